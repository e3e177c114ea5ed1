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
mod ending;
mod engine;
mod error;
mod extensions;
mod failure;
mod governance;
mod journal;
mod model_call;
mod parallel;
mod persistence;
mod repo_map;
mod resume;
mod run_loop;
mod side_usage;
mod snapshots;
mod start;
mod stop;
mod tasks;
mod tool_call;
mod tools;

pub use api::{
    EngineParts, Fanout, RunObserver, RunOutcome, SettingsChange, SettingsOverride, StartRun,
};
pub use checkpoint::run_state;
pub use engine::Engine;
pub use error::EngineError;
pub use extensions::{Extensions, McpOutcome, McpStart};
pub use journal::{DEFAULT_READ_ONLY_COMMIT_DELAY, record_external};
pub use persistence::WorkspacePersistence;
pub use repo_map::RepoMapSource;
pub use side_usage::SideUsage;
pub use snapshots::Snapshots;
pub use stop::{StopHandle, StopSignal};
