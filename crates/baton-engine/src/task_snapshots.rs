//! Workspace snapshots for the task graph (placeholder until the shadow repository lands):
//! taking one journals nothing, so tasks have no snapshot to roll back to and a task that
//! exhausts its attempts fails instead of trying another approach.

use baton_core::task::SnapshotReason;
use baton_tools::Workspace;

use crate::EngineError;
use crate::journal::Journal;
use crate::run_loop::Engine;

impl Engine {
    pub(crate) async fn snapshot(
        &self,
        _journal: &mut Journal,
        _workspace: &Workspace,
        _reason: SnapshotReason,
        _task: Option<String>,
    ) -> Result<(), EngineError> {
        Ok(())
    }

    pub(crate) async fn restore_snapshot(
        &self,
        _workspace: &Workspace,
        snapshot: &str,
    ) -> Result<(), EngineError> {
        Err(EngineError::Internal(format!(
            "cannot restore snapshot {snapshot}: this build has no snapshot support"
        )))
    }
}
