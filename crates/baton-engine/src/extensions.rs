//! The engine's one extension point: the optional parts a host attaches when it builds an
//! engine ([`Extensions`], a field of [`crate::EngineParts`]), and the journaling of how the
//! ones that start outside the engine (MCP servers) started.
//!
//! Everything here is optional: [`Extensions::default`] is an engine with none of them, which
//! is what a program that brings only a model and tools gets. The engine reads them where they
//! matter (snapshots in the loop, persistence after a mutating call, side usage at turns and at
//! the run's end, the repo map at a start); nothing is attached after construction, so an engine
//! is whole once built.

use std::sync::Arc;
use std::time::Duration;

use baton_core::Event;

use crate::journal::Journal;
use crate::{
    DEFAULT_READ_ONLY_COMMIT_DELAY, Engine, EngineError, RepoMapSource, SideUsage, Snapshots,
    WorkspacePersistence,
};

/// The optional parts of an engine, and its one tuning knob (see the module's doc).
#[derive(Clone)]
pub struct Extensions {
    /// Whether the run loop snapshots the workspace ([`Snapshots`]): off unless asked for.
    pub snapshots: Snapshots,
    /// Where the workspace is kept besides its directory (a worker's archive), saved after
    /// every mutating call is journaled.
    pub persistence: Option<Arc<dyn WorkspacePersistence>>,
    /// Usage of services besides the model (the code index's embedder): journaled at each
    /// turn's start, after each tool call, and settled before the run's end.
    pub side_usage: Option<Arc<dyn SideUsage>>,
    /// Renders the repo map for briefs: journaled when a run without a plan starts and when
    /// each task starts.
    pub repo_map: Option<Arc<dyn RepoMapSource>>,
    /// How each configured MCP server started for this process: journaled
    /// (`mcp_server_started` / `mcp_server_failed`) when a run starts or resumes, so that
    /// `status` and the logs say which tools a run has and which are missing.
    pub mcp_servers: Vec<McpStart>,
    /// How long a read-only call's intent may wait to be written with the next commit
    /// (default [`DEFAULT_READ_ONLY_COMMIT_DELAY`]): the call runs meanwhile, and a turn whose
    /// call reads quickly costs one commit instead of two. The model reply that commit carries
    /// is at risk for up to this much longer. Zero writes it at once, while the call runs.
    /// Tests and benchmarks turn it; hosts keep the default.
    pub read_only_commit_delay: Duration,
}

impl Default for Extensions {
    fn default() -> Extensions {
        Extensions {
            snapshots: Snapshots::Off,
            persistence: None,
            side_usage: None,
            repo_map: None,
            mcp_servers: Vec::new(),
            read_only_commit_delay: DEFAULT_READ_ONLY_COMMIT_DELAY,
        }
    }
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("snapshots", &self.snapshots)
            .field("persistence", &self.persistence.is_some())
            .field("side_usage", &self.side_usage.is_some())
            .field("repo_map", &self.repo_map.is_some())
            .field("mcp_servers", &self.mcp_servers)
            .field("read_only_commit_delay", &self.read_only_commit_delay)
            .finish()
    }
}

/// How one configured MCP server started for this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpStart {
    /// The server's name in the configuration.
    pub server: String,
    pub outcome: McpOutcome,
}

/// Whether an MCP server started, with what the journal keeps of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum McpOutcome {
    /// It answered the handshake: its version, and the tools it offers as the run names them.
    Started { version: String, tools: Vec<String> },
    /// It did not start, with why (secrets are redacted when it is journaled).
    Failed { error: String },
}

impl Engine {
    /// Journals how the optional parts started ([`Extensions::mcp_servers`]) for the run
    /// `journal` is writing: every server that started, then every one that failed — the order
    /// journals have always had them in.
    pub(crate) async fn record_part_starts(
        &self,
        journal: &mut Journal,
    ) -> Result<(), EngineError> {
        let servers = &self.parts.extensions.mcp_servers;
        for start in servers {
            if let McpOutcome::Started { version, tools } = &start.outcome {
                journal
                    .record(Event::McpServerStarted {
                        server: start.server.clone(),
                        version: version.clone(),
                        tools: tools.clone(),
                    })
                    .await?;
            }
        }
        for start in servers {
            if let McpOutcome::Failed { error } = &start.outcome {
                journal
                    .record(Event::McpServerFailed {
                        server: start.server.clone(),
                        error: self.redactor.redact(error),
                    })
                    .await?;
            }
        }
        Ok(())
    }
}
