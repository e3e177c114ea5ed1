//! The seam for `baton submit` / `baton worker`: journal a run without driving it, and drive a
//! run whose lease a worker already claimed, in the worker's own copy of the workspace.

use std::path::Path;

use baton_core::RunId;
use baton_store::Lease;
use baton_tools::Workspace;

use crate::api::{RunOutcome, SettingsOverride, StartRun};
use crate::{Engine, EngineError};

impl Engine {
    /// Creates a run and journals its start exactly as [`Engine::start`] would (settings, the
    /// system prompt, AGENTS.md and tool specs read from `request.workspace` now), then releases
    /// its lease without taking a step: a worker claims it and *resumes* it, so it runs with the
    /// settings and instructions it was submitted with.
    pub async fn submit(&self, request: StartRun) -> Result<RunId, EngineError> {
        let workspace = Workspace::new(&request.workspace).map_err(|e| EngineError::Workspace {
            path: request.workspace.display().to_string(),
            detail: e.to_string(),
        })?;
        let (journal, _) = self.begin_run(RunId::new(), request, workspace).await?;
        let run_id = journal.run_id().clone();
        journal.close().await;
        Ok(run_id)
    }

    /// Replays and drives a run whose `lease` was claimed from the queue, with `workspace` (the
    /// worker's materialised copy) as its workspace instead of the directory it was submitted
    /// from. The heartbeat renews the lease; it is released when the run stops here.
    pub async fn resume_claimed(
        &self,
        lease: Lease,
        workspace: &Path,
        overrides: &SettingsOverride,
    ) -> Result<RunOutcome, EngineError> {
        self.resume_leased(lease, Some(workspace), overrides).await
    }
}
