//! baton as a library: durable, resumable coding-agent runs for programs that build their own
//! agent on baton's crates.
//!
//! [`Runtime::builder`] assembles an engine from a workspace and whatever parts the program
//! wants to own — a store, a model provider, tools, observers, a stop signal, the sandbox — and
//! makes every other part from the workspace's configuration exactly as the `baton` CLI does
//! (config files, presets, price table, rate limiter, retry policy, secrets, snapshots). The
//! runtime then starts, resumes or submits runs; each step is journaled before it takes effect,
//! so a run killed at any point resumes without repeating a finished model or tool call.
//!
//! ```no_run
//! use std::sync::Arc;
//! # async fn demo(model: Arc<dyn baton::model::ModelProvider>) -> baton::Result<()> {
//! let (observer, mut events) = baton::events::channel();
//! let runtime = baton::Runtime::builder()
//!     .workspace("/path/to/repo")
//!     .provider(model)
//!     .observer(Arc::new(observer))
//!     .build()
//!     .await?;
//! let outcome = runtime.start("add a --verbose flag").await?;
//! while let Ok(record) = events.try_recv() {
//!     println!("{} {}", record.seq, record.event.kind());
//! }
//! if let baton::RunOutcome::Paused { run_id, .. } = outcome {
//!     runtime.resume(&run_id, &Default::default()).await?;
//! }
//! # Ok(())
//! # }
//! ```
//!
//! A program whose commands run sandboxed calls [`sandbox_trampoline`] first in `main`: the
//! sandbox confines each command by re-executing the program itself.
//!
//! The CLI (`baton-cli`) is argument parsing and output over this crate and the application's
//! services (`baton-app`: supervision, doctor, goal and plan files, snapshots as a person uses
//! them); the worker runtime is `baton-worker`.
#![warn(missing_docs)]

pub mod client;
pub mod code;
pub mod config;
pub mod embeddings;
mod error;
pub mod events;
pub mod exec;
mod layered;
pub mod mcp;
pub mod providers;
mod runtime;
pub mod settings;
mod snapshot_git;
pub mod store;
pub mod trust;

pub use error::{Error, Result};
pub use runtime::{CodeIndexing, IN_PROCESS, Runtime, RuntimeBuilder, SecretsHook};

pub use baton_core::{self as core, Event, EventRecord, RunId, RunSettings, RunState, RunStatus};
pub use baton_engine::{
    self as engine_api, EngineError, Fanout, RunObserver, RunOutcome, SettingsOverride, Snapshots,
    StartRun, StopHandle, StopSignal,
};
pub use baton_model as model;
pub use baton_store as journal_store;
pub use baton_tools as tools;

/// Runs the sandbox trampoline when this process was started as one (its first argument is
/// `__sandbox-exec`) and returns its exit code; `None` otherwise. Call it first in `main` of a
/// program whose runs execute commands under the sandbox:
///
/// ```no_run
/// fn main() -> std::process::ExitCode {
///     if let Some(code) = baton::sandbox_trampoline() {
///         return code;
///     }
///     // … build a Runtime and run …
///     std::process::ExitCode::SUCCESS
/// }
/// ```
pub fn sandbox_trampoline() -> Option<std::process::ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() == Some(baton_sandbox::trampoline::SUBCOMMAND.as_ref()) {
        return Some(baton_sandbox::trampoline::main(args.collect()));
    }
    // This binary is the trampoline, so baton's own git can run in the sandbox as well.
    snapshot_git::confine();
    None
}
