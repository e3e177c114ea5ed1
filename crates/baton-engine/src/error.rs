use baton_core::{ReplayError, RunId};
use baton_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the journal of run {run_id} cannot be replayed: {source}")]
    Replay { run_id: RunId, source: ReplayError },
    #[error("run {0} has no events; it never started")]
    EmptyRun(RunId),
    #[error("workspace {path}: {detail}")]
    Workspace { path: String, detail: String },
    /// The request cannot be done to this run as it is (a person's mistake, not baton's).
    #[error("{0}")]
    Usage(String),
    /// The engine tried to journal an event the reducer rejects: a bug in baton, not in the input.
    #[error("internal error: {0}")]
    Internal(String),
}

impl EngineError {
    /// Whether trying the same operation later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            EngineError::Store(e) => e.is_retryable(),
            _ => false,
        }
    }
}
