//! The facade's error: what went wrong, classified so a caller can tell "change your input" from
//! "something failed" and "try again".

use baton_engine::EngineError;
use baton_store::StoreError;

/// Everything the facade can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration, an argument or a run reference is wrong: the person or program that
    /// gave it must change it (the CLI exits 2). The text says what to change.
    #[error("{0}")]
    Usage(String),
    /// The store could not be opened, read or written.
    #[error(transparent)]
    Store(StoreError),
    /// The engine stopped the run (the store and the process no longer agree, a lease was lost).
    #[error(transparent)]
    Engine(EngineError),
    /// Anything else that failed (a file that cannot be written, an executable not found).
    #[error("{0}")]
    Failed(String),
}

/// The facade's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A [`Error::Usage`] with this text.
    pub fn usage(message: impl std::fmt::Display) -> Error {
        Error::Usage(message.to_string())
    }

    /// A [`Error::Failed`] with this text.
    pub fn failed(message: impl std::fmt::Display) -> Error {
        Error::Failed(message.to_string())
    }

    /// Whether the input must change (a bad config key, a locked or refused store, an unknown
    /// run): trying again as it is cannot succeed.
    ///
    /// ```
    /// assert!(baton::Error::usage("max_turns = 0: use at least 1").is_usage());
    /// assert!(!baton::Error::failed("disk full").is_usage());
    /// ```
    pub fn is_usage(&self) -> bool {
        match self {
            Error::Usage(_) | Error::Engine(EngineError::Usage(_)) => true,
            Error::Store(e) | Error::Engine(EngineError::Store(e)) => store_is_usage(e),
            Error::Engine(_) | Error::Failed(_) => false,
        }
    }

    /// Whether the same call may succeed later (a busy database, a dropped connection).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Store(e) => e.is_retryable(),
            Error::Engine(e) => e.is_retryable(),
            Error::Usage(_) | Error::Failed(_) => false,
        }
    }
}

/// Store errors that name something the user chose: another process holds the run, the URL is
/// not one baton speaks, the store refused the request as given.
fn store_is_usage(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::Locked { .. }
            | StoreError::Refused { .. }
            | StoreError::UnsupportedUrl { .. }
            | StoreError::NeedsPostgres { .. }
    )
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        Error::Store(e)
    }
}

impl From<EngineError> for Error {
    /// A store failure inside the engine stays a store failure (so `is_usage` sees a lock).
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::Store(s) => Error::Store(s),
            other => Error::Engine(other),
        }
    }
}

impl From<baton_state::StateError> for Error {
    fn from(e: baton_state::StateError) -> Self {
        Error::Failed(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_locked_store_is_a_usage_error_also_inside_the_engine() {
        let locked = || StoreError::Locked {
            run_id: baton_core::RunId::new(),
            holder: "pid 1".into(),
            expires_at: jiff::Timestamp::now(),
        };
        assert!(Error::from(locked()).is_usage());
        assert!(Error::from(EngineError::Store(locked())).is_usage());
        assert!(!Error::failed("disk").is_usage());
        assert!(Error::usage("bad key").is_usage());
    }
}
