//! The baton run loop: journal-first agent steps, replay and resume.
//!
//! Each step is decided by [`baton_core::next_action`] from the replayed state, its intent is
//! journaled (and synced) before it takes effect, and its outcome right after. Resuming a run is
//! therefore "replay the journal, then keep stepping": finished model calls and tool calls are
//! never repeated.

mod api;
mod checkpoint;
mod claimed;
mod compaction;
mod error;
mod failure;
mod governance;
mod journal;
mod parallel;
mod persistence;
mod repo_map;
mod run_loop;
mod snapshots;
mod stop;
mod tasks;
mod tools;

pub use api::{
    EngineParts, Fanout, RunObserver, RunOutcome, SettingsChange, SettingsOverride, StartRun,
};
pub use checkpoint::run_state;
pub use error::EngineError;
pub use journal::{DEFAULT_READ_ONLY_COMMIT_DELAY, record_external};
pub use persistence::WorkspacePersistence;
pub use repo_map::{RepoMapSource, SideUsage};
pub use run_loop::Engine;
pub use snapshots::Snapshots;
pub use stop::{StopHandle, StopSignal};
