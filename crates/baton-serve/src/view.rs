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
    /// How the model ended a finished run: `tool` (`finish`) or `text` (a plain reply).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_by: Option<baton_core::FinishedBy>,
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
            finished_by: agg
                .finished_by
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

/// Turns (and their tool calls) a run page gets: the latest ones. A long run has thousands; the
/// page is reloaded on live updates, so its size matters.
pub const TIMELINE_TURNS: usize = 200;
/// Points of the token/cost chart at most: a long run's calls are thinned evenly (the last call
/// is always kept, so the totals at the end are exact).
pub const CHART_POINTS: usize = 500;

/// A run's page: the run, its tasks, and its timeline (the latest turns with their tool calls,
/// model calls with running totals).
#[derive(Clone, Debug, Serialize)]
pub struct RunDetail {
    pub run: RunView,
    pub tasks: TaskGraph,
    /// The last [`TIMELINE_TURNS`] turns, and how many there are in all.
    pub turns: Vec<TurnRow>,
    pub turns_total: usize,
    /// Chart points (at most [`CHART_POINTS`]), and how many model calls there are in all.
    pub calls: Vec<CallPoint>,
    pub calls_total: usize,
    /// Tool calls of the turns in `turns`.
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
        let total = agg.calls.len();
        let step = total.div_ceil(CHART_POINTS).max(1);
        let calls = agg
            .calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if let Some(u) = &c.usage {
                    tokens =
                        tokens.saturating_add(u.prompt_tokens.saturating_add(u.completion_tokens));
                }
                usd += c.cost_usd.unwrap_or(0.0);
                (i, c, tokens, usd)
            })
            .filter(|(i, ..)| (total - 1 - i).is_multiple_of(step))
            .map(|(_, c, cumulative_tokens, cumulative_usd)| CallPoint {
                call: c.clone(),
                cumulative_tokens,
                cumulative_usd,
            })
            .collect();
        let turns = &agg.turns[agg.turns.len().saturating_sub(TIMELINE_TURNS)..];
        let first_turn = turns.first().map_or(0, |t| t.turn);
        RunDetail {
            run: RunView::new(run, agg),
            tasks: agg.tasks(),
            turns: turns.to_vec(),
            turns_total: agg.turns.len(),
            calls,
            calls_total: total,
            tools: agg
                .tools
                .iter()
                .filter(|t| t.turn >= first_turn)
                .cloned()
                .collect(),
            retries: agg.retries.clone(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use baton_core::*;

    #[test]
    fn a_long_run_gets_a_thinned_chart_with_exact_totals_and_its_latest_turns() {
        let mut records = Vec::new();
        let mut push = |event: Event| {
            records.push(EventRecord {
                run_id: RunId::from_string("r"),
                seq: records.len() as u64,
                at: jiff::Timestamp::UNIX_EPOCH,
                event,
            })
        };
        for turn in 1..=1201u32 {
            push(Event::TurnStarted { turn });
            push(Event::ModelCallFinished {
                turn,
                call: turn,
                message: AssistantMessage::default(),
                usage: Some(Usage {
                    prompt_tokens: 10,
                    completion_tokens: 1,
                    ..Default::default()
                }),
                cost_usd: Some(0.5),
                finish_reason: None,
                served_model: None,
                duration_ms: 1,
            });
            push(Event::TurnFinished { turn });
        }
        let agg = RunAggregate::from_events(&records);
        let row = RunSummary {
            id: RunId::from_string("r"),
            goal: String::new(),
            workspace: String::new(),
            status: RunStatus::Running,
            created_at: jiff::Timestamp::UNIX_EPOCH,
            updated_at: jiff::Timestamp::UNIX_EPOCH,
            event_count: records.len() as u64,
            holder: None,
            queued: false,
        };
        let detail = RunDetail::new(&row, &agg);
        assert!(detail.calls.len() <= CHART_POINTS, "{}", detail.calls.len());
        assert_eq!(detail.calls_total, 1201);
        let last = detail.calls.last().unwrap();
        assert_eq!((last.call.turn, last.cumulative_tokens), (1201, 1201 * 11));
        assert_eq!(last.cumulative_usd, 600.5);
        assert_eq!(detail.turns.len(), TIMELINE_TURNS);
        assert_eq!(detail.turns_total, 1201);
        assert_eq!(detail.turns[0].turn, 1201 - TIMELINE_TURNS as u32 + 1);
        assert_eq!(detail.run.status, "interrupted");
    }
}
