//! Agent tools of baton: the one tool trait ([`Tool`], and [`TypedTool`] for tools whose
//! arguments are a struct), the registry, and the standard tools — workspace-confined file
//! tools, listing, grep, shell and `finish`. The engine's own tools (memory, planning) and any
//! program's or MCP server's tools are the same kind of thing, in the same registry.
//!
//! Every failure — bad arguments, a path outside the workspace, a command that fails — is a
//! [`ToolResult`] the model sees, never an error that stops the run.

mod args;
mod finish;
mod fs_tools;
mod grep_tool;
mod list;
mod output;
mod path;
mod read_file;
mod registry;
mod shell;

pub use args::{parse_args, run_blocking, schema_of, spec_for};
pub use baton_sandbox;
pub use finish::Finish;
pub use fs_tools::{EditFile, WriteFile};
pub use grep_tool::Grep;
pub use list::ListDir;
pub use output::CappedBuffer;
pub use path::{Access, PathError, STATE_DIR, Workspace};
pub use read_file::ReadFile;
pub use registry::ToolRegistry;
pub use shell::Shell;
pub use shell::{is_secret_var, without_secrets};

use async_trait::async_trait;
use baton_core::{Event, EventRecord, RunState, ToolEffect, ToolResult, ToolSpec};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How commands run: the sandbox every one of them goes through, and the execution policy
/// that decides whether it may run at all.
#[derive(Clone, Debug)]
pub struct ExecEnv {
    pub sandbox: Arc<baton_sandbox::Sandbox>,
    pub policy: Arc<baton_sandbox::policy::Policy>,
    /// What a command the policy marks `ask` does: refused, or refused and the run paused.
    pub ask: baton_sandbox::policy::AskBehaviour,
    /// Set by a tool that wants the run paused for a person once its result is journaled.
    pub pause_request: Arc<std::sync::Mutex<Option<String>>>,
}

impl ExecEnv {
    /// No isolation: for tests of tools that are not about the sandbox (see
    /// [`baton_sandbox::Sandbox::unconfined`]).
    pub fn unconfined() -> ExecEnv {
        let sandbox = baton_sandbox::Sandbox::unconfined(baton_sandbox::SandboxConfig::default());
        ExecEnv::new(sandbox, baton_sandbox::policy::Policy::builtin())
    }

    pub fn new(sandbox: baton_sandbox::Sandbox, policy: baton_sandbox::policy::Policy) -> ExecEnv {
        ExecEnv {
            sandbox: Arc::new(sandbox),
            policy: Arc::new(policy),
            ask: baton_sandbox::policy::AskBehaviour::Refuse,
            pause_request: Arc::default(),
        }
    }

    /// The same environment with the sandbox in `read-only` mode (policy, `ask` behaviour and
    /// pause slot shared).
    pub fn read_only(&self) -> ExecEnv {
        ExecEnv {
            sandbox: Arc::new(self.sandbox.read_only()),
            policy: self.policy.clone(),
            ask: self.ask,
            pause_request: self.pause_request.clone(),
        }
    }

    /// The pending pause request, if a tool made one (taking it clears it).
    pub fn take_pause_request(&self) -> Option<String> {
        self.pause_request
            .lock()
            .map(|mut slot| slot.take())
            .unwrap_or_else(|poisoned| poisoned.into_inner().take())
    }
}

/// What a tool call may use besides its arguments.
#[derive(Clone)]
pub struct ToolContext<'a> {
    pub workspace: Workspace,
    /// Default wall-clock limit of a shell command.
    pub shell_timeout: Duration,
    /// Environment variables never passed to commands (API keys and the like).
    pub secret_env_vars: Vec<String>,
    pub exec: ExecEnv,
    /// The run the call belongs to, for tools served from the run itself (memory, planning);
    /// `None` when a tool runs outside a run (a task's check, a tool tested alone).
    pub run: Option<RunAccess<'a>>,
}

impl std::fmt::Debug for ToolContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("workspace", &self.workspace)
            .field("shell_timeout", &self.shell_timeout)
            .field("in_run", &self.run.is_some())
            .finish_non_exhaustive()
    }
}

/// A run's state and journal as a tool sees them: read the state and the journaled events,
/// and hand events to be journaled with the call — before its result, so a crash after the
/// result is recorded never finds the result without them.
#[derive(Clone, Copy)]
pub struct RunAccess<'a> {
    /// The run's state when the call started.
    pub state: &'a RunState,
    /// The run's journaled events.
    pub journal: &'a dyn JournalReader,
    /// Events to journal before the call's result.
    pub outbox: &'a Outbox,
}

/// Reads a run's journaled events (the engine's store, scoped to the run).
#[async_trait]
pub trait JournalReader: Send + Sync {
    /// Up to `limit` events from sequence number `from` on, in order.
    async fn read(&self, from: u64, limit: u64) -> Result<Vec<EventRecord>, String>;
}

/// Events a tool asks to journal with its call (see [`RunAccess`]).
#[derive(Debug, Default)]
pub struct Outbox(Mutex<Vec<Event>>);

impl Outbox {
    /// Journals `event` before the call's result.
    pub fn record(&self, event: Event) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event);
    }

    /// The events recorded so far, in order (taking them empties the outbox).
    pub fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The one kind of tool the registry holds and the run loop calls: the standard tools, the
/// engine's memory and planning tools, a program's own, an MCP server's.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Name, description, argument schema and effect, as offered to the model.
    fn spec(&self) -> ToolSpec;

    /// Runs the call. `arguments` is the model's raw argument text (a JSON object: the
    /// registry refuses anything else); a failure is an error result.
    async fn call(&self, ctx: &ToolContext<'_>, arguments: &str) -> ToolResult;
}

/// A tool whose arguments are a struct: its schema is the spec's parameters, and the
/// framework parses the model's text into it (an unusable argument is an error result the
/// model reads) — every such type is a [`Tool`].
#[async_trait]
pub trait TypedTool: Send + Sync {
    /// The arguments, with doc comments that become the schema's descriptions.
    type Args: DeserializeOwned + JsonSchema + Send;
    /// The name the model calls it by.
    const NAME: &'static str;
    /// Whether a call can change the workspace (and is reported interrupted after a crash).
    const EFFECT: ToolEffect;

    /// What the model is told the tool does.
    fn description(&self) -> String;

    /// Runs a call with its parsed arguments.
    async fn run(&self, ctx: &ToolContext<'_>, args: Self::Args) -> ToolResult;
}

#[async_trait]
impl<T: TypedTool> Tool for T {
    fn spec(&self) -> ToolSpec {
        spec_for::<T::Args>(T::NAME, &self.description(), T::EFFECT)
    }

    async fn call(&self, ctx: &ToolContext<'_>, arguments: &str) -> ToolResult {
        match parse_args::<T::Args>(T::NAME, arguments) {
            Ok(args) => self.run(ctx, args).await,
            Err(result) => result,
        }
    }
}

/// Helpers shared by the tools' unit tests.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod test_support {
    use super::*;

    /// A context over a fresh temporary workspace (keep the directory alive while using it).
    pub(crate) fn ctx() -> (tempfile::TempDir, ToolContext<'static>) {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext {
            workspace: Workspace::new(dir.path()).unwrap(),
            shell_timeout: Duration::from_secs(10),
            secret_env_vars: vec![],
            exec: ExecEnv::unconfined(),
            run: None,
        };
        (dir, ctx)
    }

    pub(crate) async fn call(
        tool: &dyn Tool,
        ctx: &ToolContext<'_>,
        args: serde_json::Value,
    ) -> ToolResult {
        tool.call(ctx, &args.to_string()).await
    }
}
