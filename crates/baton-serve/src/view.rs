//! What the API returns for a run: its store row and its [`RunAggregate`], combined.

use baton_core::RunStatus;
use baton_store::RunSummary;
use serde::Serialize;

use crate::aggregate::{Cost, ModelCallRow, Pause, RunAggregate, Tokens, ToolCallRow, TurnRow};
use crate::tasks::TaskGraph;

/// What to call a run's status, taking a dead holder into account: a run whose row says
/// "running" but whose process is gone is "interrupted" (`baton resume` continues it).
pub fn status_label(run: &RunSummary) -> String {
    match (run.status, &run.holder) {
        (RunStatus::Running, Some(h)) if h.alive => format!("running ({})", h.holder.describe()),
        (RunStatus::Running, _) | (RunStatus::Created, _) => "interrupted".to_string(),
        (status, _) => status.as_str().to_string(),
    }
}

/// The short status word the dashboard colours by: `running`, `interrupted`, `paused`,
/// `finished`, `failed`.
pub fn status_word(run: &RunSummary) -> &'static str {
    match (run.status, &run.holder) {
        (RunStatus::Running, Some(h)) if h.alive => "running",
        (RunStatus::Running, _) | (RunStatus::Created, _) => "interrupted",
        (status, _) => status.as_str(),
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct CostView {
    pub usd: f64,
    pub unknown_calls: u32,
    /// Ready to show; never "$0" for an unknown cost.
    pub text: String,
}

/// A run in the runs list and at the top of its page.
#[derive(Clone, Debug, Serialize)]
pub struct RunView {
    pub id: String,
    pub short_id: String,
    pub goal: String,
    pub workspace: String,
    pub status: &'static str,
    pub status_label: String,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub max_turns: Option<u32>,
    pub turns: u32,
    pub turns_started: u32,
    pub model_calls: u32,
    pub tool_calls: usize,
    pub compactions: u32,
    pub restarts: u32,
    pub tokens: Tokens,
    pub cost: CostView,
    pub tasks_done: usize,
    pub tasks_total: usize,
    pub pause: Option<Pause>,
    pub summary: Option<String>,
    pub error: Option<String>,
    pub created_at: jiff::Timestamp,
    pub updated_at: jiff::Timestamp,
    pub event_count: u64,
    pub holder: Option<String>,
}

impl RunView {
    pub fn new(run: &RunSummary, agg: &RunAggregate) -> RunView {
        let tasks = agg.tasks();
        RunView {
            id: run.id.to_string(),
            short_id: run.id.short().to_string(),
            goal: run.goal.clone(),
            workspace: run.workspace.clone(),
            status: status_word(run),
            status_label: status_label(run),
            model: agg.model.clone(),
            base_url: agg.base_url.clone(),
            max_turns: agg.max_turns,
            turns: agg.turns_finished,
            turns_started: agg.turns_started,
            model_calls: agg.model_calls(),
            tool_calls: agg.tools.len(),
            compactions: agg.compactions,
            restarts: agg.restarts,
            tokens: agg.tokens,
            cost: cost_view(&agg.cost, agg.model_calls()),
            tasks_done: tasks.done,
            tasks_total: tasks.total,
            pause: agg
                .pause
                .clone()
                .filter(|_| run.status == RunStatus::Paused),
            summary: agg
                .finish_summary
                .clone()
                .filter(|_| run.status == RunStatus::Finished),
            error: agg.failure.clone(),
            created_at: run.created_at,
            updated_at: run.updated_at,
            event_count: run.event_count,
            holder: run.holder.as_ref().filter(|h| h.alive).map(|h| {
                format!(
                    "{}, lease until {}",
                    h.holder.describe(),
                    h.expires_at.strftime("%Y-%m-%d %H:%M:%S UTC")
                )
            }),
        }
    }
}

fn cost_view(cost: &Cost, calls: u32) -> CostView {
    CostView {
        usd: cost.usd,
        unknown_calls: cost.unknown_calls,
        text: cost.text(calls),
    }
}

/// A run's page: the run, its tasks, and its timeline (turns, model calls with running totals,
/// tool calls).
#[derive(Clone, Debug, Serialize)]
pub struct RunDetail {
    pub run: RunView,
    pub tasks: TaskGraph,
    pub turns: Vec<TurnRow>,
    pub calls: Vec<CallPoint>,
    pub tools: Vec<ToolCallRow>,
    pub retries: std::collections::BTreeMap<String, u64>,
}

/// A model call with the run's running totals after it: the points of the token/cost chart.
#[derive(Clone, Debug, Serialize)]
pub struct CallPoint {
    #[serde(flatten)]
    pub call: ModelCallRow,
    /// Input + output tokens so far.
    pub cumulative_tokens: u64,
    /// Priced cost so far (a lower bound once a call of unknown cost came by).
    pub cumulative_usd: f64,
}

impl RunDetail {
    pub fn new(run: &RunSummary, agg: &RunAggregate) -> RunDetail {
        let (mut tokens, mut usd) = (0u64, 0.0);
        let calls = agg
            .calls
            .iter()
            .map(|c| {
                if let Some(u) = &c.usage {
                    tokens =
                        tokens.saturating_add(u.prompt_tokens.saturating_add(u.completion_tokens));
                }
                usd += c.cost_usd.unwrap_or(0.0);
                CallPoint {
                    call: c.clone(),
                    cumulative_tokens: tokens,
                    cumulative_usd: usd,
                }
            })
            .collect();
        RunDetail {
            run: RunView::new(run, agg),
            tasks: agg.tasks(),
            turns: agg.turns.clone(),
            calls,
            tools: agg.tools.clone(),
            retries: agg.retries.clone(),
        }
    }
}
