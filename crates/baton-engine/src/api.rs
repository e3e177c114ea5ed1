//! The engine's public types: what it is built from, what it is asked to do, what it reports.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use baton_core::{PauseReason, RunId, RunSettings, RunState, RunStatus};
use baton_model::{ModelProvider, RetryPolicy};
use baton_store::Store;
use baton_tools::ToolRegistry;

use crate::stop::StopSignal;

pub use baton_core::{Fanout, RunObserver};

/// How a run ended this time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunOutcome {
    Finished {
        run_id: RunId,
        summary: String,
    },
    Failed {
        run_id: RunId,
        error: String,
    },
    Paused {
        run_id: RunId,
        reason: PauseReason,
        detail: String,
    },
}

impl RunOutcome {
    pub fn run_id(&self) -> &RunId {
        match self {
            RunOutcome::Finished { run_id, .. }
            | RunOutcome::Failed { run_id, .. }
            | RunOutcome::Paused { run_id, .. } => run_id,
        }
    }
}

pub struct StartRun {
    pub goal: String,
    pub workspace: PathBuf,
    pub settings: RunSettings,
    /// A validated plan to work through (`--plan FILE`); journaled right after the start.
    pub plan: Option<baton_core::task::Plan>,
}

/// How a `resume` changes the run's recorded settings.
#[derive(Clone, Default)]
pub enum SettingsChange {
    /// The recorded settings, as they are.
    #[default]
    Keep,
    /// These settings from now on, whole: the CLI's (its flags' configuration layer applied to
    /// the recorded settings, `baton::settings::apply`).
    Replace(Box<RunSettings>),
    /// The recorded settings, changed by this function (a program's own override).
    Edit(Arc<dyn Fn(&mut RunSettings) + Send + Sync>),
}

impl std::fmt::Debug for SettingsChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SettingsChange::Keep => f.write_str("Keep"),
            SettingsChange::Replace(settings) => f.debug_tuple("Replace").field(settings).finish(),
            SettingsChange::Edit(_) => f.write_str("Edit(..)"),
        }
    }
}

/// What a `resume` changes: the settings from now on, and the plan.
#[derive(Clone, Debug, Default)]
pub struct SettingsOverride {
    /// The settings from now on.
    pub settings: SettingsChange,
    /// A plan that replaces the run's (allowed before any task started: `resume --plan`).
    pub plan: Option<baton_core::task::Plan>,
}

impl SettingsOverride {
    /// The recorded settings changed by `edit`, e.g. a higher turn limit:
    /// `SettingsOverride::edit(|s| s.limits.max_turns = 400)`.
    pub fn edit(edit: impl Fn(&mut RunSettings) + Send + Sync + 'static) -> SettingsOverride {
        SettingsOverride {
            settings: SettingsChange::Edit(Arc::new(edit)),
            plan: None,
        }
    }

    /// The settings from now on, given `recorded`.
    pub fn apply(&self, recorded: RunSettings) -> RunSettings {
        match &self.settings {
            SettingsChange::Keep => recorded,
            SettingsChange::Replace(settings) => settings.as_ref().clone(),
            SettingsChange::Edit(edit) => {
                let mut settings = recorded;
                edit(&mut settings);
                settings
            }
        }
    }
}

/// Everything an engine is built from.
#[derive(Clone)]
pub struct EngineParts {
    pub store: Arc<dyn Store>,
    pub provider: Arc<dyn ModelProvider>,
    pub tools: Arc<ToolRegistry>,
    pub retry: RetryPolicy,
    /// Secret values (API keys) to scrub from anything journaled.
    pub secrets: Vec<String>,
    /// Environment variable names never passed to commands.
    pub secret_env_vars: Vec<String>,
    /// The sandbox and execution policy every command runs under.
    pub exec: baton_tools::ExecEnv,
    pub observer: Arc<dyn RunObserver>,
    /// Asks the run to pause cleanly (Ctrl-C, SIGTERM).
    pub stop: StopSignal,
    /// Longest a single model call attempt may take in all (streams can trickle keep-alives
    /// forever without tripping the idle timeout).
    pub model_call_timeout: Duration,
    /// Consecutive failed model call attempts (across calls) after which the run pauses.
    pub breaker_failures: u32,
    /// Prices each finished call (built-in list prices plus config overrides).
    pub prices: Arc<baton_model::pricing::PriceTable>,
    /// Client-side requests/min and tokens/min budget, shared by everything using this provider.
    pub rate_limiter: baton_model::ratelimit::RateLimiter,
    /// The optional parts (snapshots, workspace persistence, side usage, the repo map, how the
    /// MCP servers started) and the read-only commit delay: `Extensions::default()` for none.
    pub extensions: crate::Extensions,
}

pub(crate) fn terminal_outcome(state: &RunState) -> Option<RunOutcome> {
    let run_id = state.run_id.clone()?;
    match state.status {
        RunStatus::Finished => Some(RunOutcome::Finished {
            run_id,
            summary: state.finish_summary.clone().unwrap_or_default(),
        }),
        RunStatus::Failed => Some(RunOutcome::Failed {
            run_id,
            error: state.failure.clone().unwrap_or_default(),
        }),
        _ => None,
    }
}

pub(crate) fn paused_outcome(state: &RunState) -> Option<RunOutcome> {
    let run_id = state.run_id.clone()?;
    if state.status != RunStatus::Paused {
        return None;
    }
    let (reason, detail) = state
        .pause
        .clone()
        .unwrap_or((PauseReason::Interrupted, String::new()));
    Some(RunOutcome::Paused {
        run_id,
        reason,
        detail,
    })
}
