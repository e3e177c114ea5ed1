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

/// An MCP server that did not start (`mcp_failures` of a run).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct McpFailure {
    pub server: String,
    pub error: String,
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
    /// Milliseconds spent running (pauses and time between processes not counted).
    pub running_ms: u64,
    /// The run whose task this run worked on (`--parallel`), when that run is listed too.
    pub parent: Option<String>,
    /// Runs that worked on this run's tasks, in the order they were delegated.
    pub children: Vec<String>,
    /// How deep under its listed ancestors this run sits (0: a top-level run).
    pub depth: u32,
    pub model_calls: u32,
    pub tool_calls: usize,
    pub compactions: u32,
    pub restarts: u32,
    /// MCP servers that did not start for the run's current process, with why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub mcp_failures: Vec<McpFailure>,
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
            running_ms: agg.running_ms,
            parent: None,
            children: agg.children.clone(),
            depth: 0,
            model_calls: agg.model_calls(),
            tool_calls: agg.tools.len(),
            compactions: agg.compactions,
            restarts: agg.restarts,
            mcp_failures: agg
                .mcp_failures
                .iter()
                .map(|(server, error)| McpFailure {
                    server: server.clone(),
                    error: error.clone(),
                })
                .collect(),
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

/// Orders runs as families: each top-level run (in the given order) followed by the runs that
/// worked on its tasks, depth first, each child with `parent` and `depth` set. A child whose
/// parent is not in the list stays at the top level. A child listed by several parents (a
/// corrupt journal) is placed once, under the first.
pub fn group_families(views: Vec<RunView>) -> Vec<RunView> {
    use std::collections::{HashMap, HashSet};
    let ids: HashSet<String> = views.iter().map(|v| v.id.clone()).collect();
    let mut parent_of: HashMap<String, String> = HashMap::new();
    for view in &views {
        for child in &view.children {
            if ids.contains(child) && *child != view.id {
                parent_of
                    .entry(child.clone())
                    .or_insert_with(|| view.id.clone());
            }
        }
    }
    let mut by_id: HashMap<String, RunView> = HashMap::new();
    let mut order = Vec::with_capacity(views.len());
    for mut view in views {
        view.parent = parent_of.get(&view.id).cloned();
        order.push(view.id.clone());
        by_id.insert(view.id.clone(), view);
    }
    let mut out = Vec::with_capacity(order.len());
    let mut placed = HashSet::new();
    // Top-level runs first; then anything a cycle left unplaced, so no run is ever lost.
    let roots = order.iter().filter(|id| !parent_of.contains_key(*id));
    for id in roots.chain(order.iter()).cloned().collect::<Vec<_>>() {
        let mut stack = vec![(id, 0u32)];
        while let Some((id, depth)) = stack.pop() {
            if !placed.insert(id.clone()) {
                continue;
            }
            let Some(mut view) = by_id.remove(&id) else {
                continue;
            };
            view.depth = depth;
            // Reversed onto the stack so children come out in delegation order.
            for child in view.children.iter().rev() {
                if parent_of.get(child) == Some(&id) {
                    stack.push((child.clone(), depth + 1));
                }
            }
            out.push(view);
        }
    }
    out
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
    use proptest::prelude::*;

    fn row(id: &str) -> RunSummary {
        RunSummary {
            id: RunId::from_string(id),
            goal: String::new(),
            workspace: String::new(),
            status: RunStatus::Finished,
            created_at: jiff::Timestamp::UNIX_EPOCH,
            updated_at: jiff::Timestamp::UNIX_EPOCH,
            event_count: 0,
            holder: None,
            queued: false,
        }
    }

    fn view(id: &str, children: &[&str]) -> RunView {
        let mut agg = RunAggregate::default();
        agg.children = children.iter().map(|c| c.to_string()).collect();
        RunView::new(&row(id), &agg)
    }

    fn shape(views: &[RunView]) -> Vec<(String, Option<String>, u32)> {
        views
            .iter()
            .map(|v| (v.id.clone(), v.parent.clone(), v.depth))
            .collect()
    }

    #[test]
    fn child_runs_follow_their_parent_in_delegation_order() {
        // Listed newest first, as the store does: children were created after their parent.
        let views = vec![
            view("c2", &[]),
            view("g1", &[]),
            view("c1", &["g1"]),
            view("other", &[]),
            view("p", &["c1", "c2", "missing"]),
        ];
        let some = |s: &str| Some(s.to_string());
        assert_eq!(
            shape(&group_families(views)),
            vec![
                ("other".to_string(), None, 0),
                ("p".to_string(), None, 0),
                ("c1".to_string(), some("p"), 1),
                ("g1".to_string(), some("c1"), 2),
                ("c2".to_string(), some("p"), 1),
            ]
        );
    }

    proptest! {
        /// Whatever the delegation links (even cycles and self-links from a corrupt journal),
        /// every run is listed exactly once, and a child comes after its parent unless a cycle
        /// made that impossible.
        #[test]
        fn grouping_loses_no_run(links in proptest::collection::vec(proptest::collection::vec(0usize..8, 0..4), 1..8)) {
            let n = links.len();
            let names: Vec<String> = (0..n).map(|i| format!("r{i}")).collect();
            let views: Vec<RunView> = links
                .iter()
                .enumerate()
                .map(|(i, kids)| {
                    let kids: Vec<&str> = kids.iter().filter(|k| **k < 8).map(|k| names.get(*k).map_or("gone", |s| s.as_str())).collect();
                    view(&names[i], &kids)
                })
                .collect();
            let grouped = group_families(views);
            let mut ids: Vec<String> = grouped.iter().map(|v| v.id.clone()).collect();
            ids.sort();
            let mut expected = names.clone();
            expected.sort();
            prop_assert_eq!(ids, expected);
            for (i, v) in grouped.iter().enumerate() {
                if let Some(parent) = &v.parent {
                    let at = grouped.iter().position(|p| &p.id == parent).unwrap();
                    if v.depth > 0 {
                        prop_assert!(at < i, "{} before its parent {}", v.id, parent);
                        prop_assert_eq!(grouped[at].depth + 1, v.depth);
                    }
                }
            }
        }
    }

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
