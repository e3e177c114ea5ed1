//! The engine itself: what it is made of, and what it keeps between a run's steps in one
//! process. What it does is in the modules beside this one — starting a run (`start.rs`),
//! resuming one (`resume.rs`), the loop (`run_loop.rs`), a model call (`model_call.rs`), a tool
//! call (`tool_call.rs`), the run's end (`ending.rs`) — each an `impl Engine` of its own job.

use std::time::Instant;

use baton_context::Assembler;
use baton_context::encoder::PromptEncoder;
use baton_context::tokens::TokenCounter;
use baton_core::{Redactor, RunState};
use baton_store::Lease;
use baton_tools::ToolRegistry;

use crate::api::EngineParts;
use crate::journal::Journal;
use crate::snapshots::SnapshotHook;

/// Drives runs: journal-first steps decided from the replayed state (see the crate's doc).
/// Built once from its [`EngineParts`] (optional parts included, [`crate::Extensions`]); one
/// engine drives any number of runs, one after the other or at once.
pub struct Engine {
    pub(crate) parts: EngineParts,
    pub(crate) redactor: Redactor,
    pub(crate) counter: TokenCounter,
    /// Every tool of a run, in the order they are offered: the parts' tools, then the run's
    /// own (memory, `submit_plan`). One registry, one dispatch path.
    pub(crate) tools: ToolRegistry,
    /// The snapshot switch (from the extensions) and what this process learnt about git.
    pub(crate) snapshots: SnapshotHook,
}

/// What the engine remembers between requests within one process (not journaled: it only saves
/// work — what it computes depends on each request alone).
#[derive(Default)]
pub(crate) struct RequestHistory {
    /// The previous request, which the next one is built from: building it costs only what
    /// changed.
    pub(crate) assembler: Assembler,
    /// The previous request's encoding: the digest and prefix stability of the next one cost
    /// only what changed.
    pub(crate) encoder: PromptEncoder,
    /// The previous request's token count: the next one counts only what changed.
    pub(crate) tokens: baton_context::tokens::RunningCount,
}

impl Engine {
    pub fn new(parts: EngineParts) -> Engine {
        let redactor = Redactor::new(parts.secrets.clone());
        let tools = crate::tools::with_run_tools(&parts.tools);
        let snapshots = SnapshotHook::new(parts.extensions.snapshots);
        Engine {
            parts,
            redactor,
            counter: TokenCounter::default(),
            tools,
            snapshots,
        }
    }

    /// The journal of the run `lease` holds, its state `state` so far, written as this engine
    /// is configured (its observer, its read-only commit delay).
    pub(crate) fn open_journal(&self, lease: Lease, state: RunState) -> Journal {
        Journal::new(
            self.parts.store.clone(),
            lease,
            state,
            self.parts.observer.clone(),
        )
        .with_read_only_delay(self.parts.extensions.read_only_commit_delay)
    }
}

pub(crate) fn elapsed_ms(started: Instant) -> u64 {
    started.elapsed().as_millis().try_into().unwrap_or(u64::MAX)
}
