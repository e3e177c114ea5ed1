//! What can go wrong, naming the git command and what git said.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// No `git` binary: snapshots need it.
    #[error(
        "workspace snapshots need the `git` binary, which could not be started ({source}); \
         install git (e.g. `apt-get install git`) or turn snapshots off"
    )]
    GitMissing { source: std::io::Error },
    /// A git command failed; `stderr` is what it said.
    #[error("`git {command}` failed ({status}): {stderr}")]
    Git {
        command: String,
        status: String,
        stderr: String,
    },
    /// git answered something this crate does not understand.
    #[error("unexpected output from `git {command}`: {detail}")]
    Unexpected { command: String, detail: String },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The workspace's state directory (where the shadow repository lives) is not usable.
    #[error(transparent)]
    State(#[from] baton_state::StateError),
    #[error("workspace {} is not a directory", path.display())]
    NotADirectory { path: PathBuf },
    /// Run ids name a ref and an index file, so they are held to a safe alphabet.
    #[error("invalid run id {0:?}: use letters, digits, '-', '_' and '.' (not first)")]
    InvalidRunId(String),
    #[error("{0:?} is not a snapshot id: give 4 to 40 hexadecimal characters")]
    InvalidSnapshotId(String),
    #[error("no snapshot matches {0}")]
    UnknownSnapshot(String),
    #[error("{prefix} matches {} snapshots ({}); give more characters", candidates.len(), candidates.join(", "))]
    AmbiguousSnapshot {
        prefix: String,
        candidates: Vec<String>,
    },
    #[error("run {0} has no snapshots")]
    NoSnapshots(String),
    /// The shadow repository passed its size bound: no snapshot is taken until it is cleaned.
    #[error(
        "the shadow repository {} holds {size_mib} MiB, over its {limit_mib} MiB bound: no more \
         snapshots are taken. Large generated files are the usual cause (add them to \
         .gitignore); to start over, remove {} (every run's snapshots go with it)",
        git_dir.display(),
        git_dir.display()
    )]
    RepositoryTooLarge {
        git_dir: PathBuf,
        size_mib: u64,
        limit_mib: u64,
    },
    #[error("snapshot {snapshot} is not one of run {run}'s snapshots")]
    NotInRun { run: String, snapshot: String },
}

impl SnapshotError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> SnapshotError {
        SnapshotError::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = SnapshotError> = std::result::Result<T, E>;
