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

/// Settings a `resume` may change; `None` keeps the recorded value.
#[derive(Clone, Debug, Default)]
pub struct SettingsOverride {
    /// The run's settings from now on, whole, instead of the recorded ones (the CLI applies its
    /// flags' configuration layer to the recorded settings: `baton::settings::apply`); the
    /// fields below apply over them.
    pub settings: Option<RunSettings>,
    pub provider: Option<baton_core::ProviderKind>,
    pub base_url: Option<String>,
    pub model: Option<String>,
    pub max_turns: Option<u32>,
    pub response_mode: Option<baton_core::ResponseMode>,
    pub tool_choice: Option<baton_core::ToolChoice>,
    pub context_window: Option<u64>,
    /// Budgets given on resume; each set field replaces the recorded one.
    pub budget: Option<baton_core::governance::Budget>,
    /// A plan that replaces the run's (allowed before any task started: `resume --plan`).
    pub plan: Option<baton_core::task::Plan>,
    /// Per-task budgets given on resume; each set field replaces the recorded one.
    pub task_budget: Option<baton_core::governance::Budget>,
    pub task_max_turns: Option<u32>,
    /// `--on-text-reply`: what a text reply (after its nudge) means from now on.
    pub on_text_reply: Option<baton_core::OnTextReply>,
    /// `--no-tool-turns`: replies in a row without a tool call that pause the run.
    pub no_tool_turns: Option<u32>,
    /// `--wire-api`: the OpenAI wire from now on.
    pub wire_api: Option<baton_core::WireApi>,
    /// `--thinking`, `--thinking-budget`, `--reasoning-effort` from now on.
    pub thinking: Option<baton_core::Thinking>,
    pub thinking_budget: Option<u32>,
    pub reasoning_effort: Option<String>,
    /// `--verbosity` from now on.
    pub verbosity: Option<baton_core::Verbosity>,
}

impl SettingsOverride {
    pub fn apply(&self, recorded: RunSettings) -> RunSettings {
        let mut settings = self.settings.clone().unwrap_or(recorded);
        if let Some(v) = self.provider {
            settings.model.provider = v;
        }
        if let Some(v) = &self.base_url {
            settings.model.base_url = v.clone();
        }
        if let Some(v) = &self.model {
            settings.model.model = v.clone();
        }
        if let Some(budget) = self.budget {
            settings.budget = budget.over(settings.budget);
        }
        if let Some(budget) = self.task_budget {
            settings.tasks.budget = budget.over(settings.tasks.budget);
        }
        if let Some(v) = self.task_max_turns {
            settings.tasks.max_turns = Some(v);
        }
        if let Some(v) = self.context_window {
            settings.context.window_tokens = v;
        }
        if let Some(v) = self.max_turns {
            settings.limits.max_turns = v;
        }
        if let Some(v) = self.response_mode {
            settings.model.response_mode = v;
        }
        if let Some(v) = &self.tool_choice {
            settings.model.tool_choice = v.clone();
        }
        if let Some(v) = self.on_text_reply {
            settings.endings.on_text_reply = v;
        }
        if let Some(v) = self.wire_api {
            settings.model.wire_api = v;
        }
        if let Some(v) = self.thinking {
            settings.model.reasoning.thinking = Some(v);
        }
        if let Some(v) = self.thinking_budget {
            settings.model.reasoning.thinking_budget = Some(v);
        }
        if let Some(v) = &self.reasoning_effort {
            settings.model.reasoning.effort = Some(v.clone());
        }
        if let Some(v) = self.verbosity {
            settings.model.reasoning.verbosity = Some(v);
        }
        if let Some(v) = self.no_tool_turns {
            settings.loop_detection.no_tool_turns = v;
        }
        settings
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
