//! Workspace persistence: where a run's workspace is kept besides the directory itself, for a
//! process that may take the run over elsewhere (a worker's tar archive in object storage).
//! The engine calls it at its own step boundary — after a mutating tool call's result is
//! journaled, before the next step — so a run taken over restores a workspace that holds every
//! change its journal reports.

use std::path::Path;

use async_trait::async_trait;
use baton_core::RunId;

use crate::Engine;

/// Keeps a copy of a run's workspace (see the module documentation).
#[async_trait]
pub trait WorkspacePersistence: Send + Sync {
    /// Saves `workspace` as the state of `run_id` after journal event `seq`. A failure is
    /// logged and the run goes on (the previous copy stays the one a takeover restores).
    async fn persist(&self, run_id: &RunId, seq: u64, workspace: &Path) -> Result<(), String>;
}

impl Engine {
    /// Called after a tool call's result is journaled at `seq`.
    pub(crate) async fn persist_after(&self, run_id: &RunId, seq: u64, workspace: &Path) {
        if let Some(persistence) = &self.parts.extensions.persistence
            && let Err(e) = persistence.persist(run_id, seq, workspace).await
        {
            tracing::warn!("run {run_id}: workspace snapshot failed: {e}");
        }
    }
}
