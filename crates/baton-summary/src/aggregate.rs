//! The one aggregation of a run's journal: what `baton status`, `baton cost`, the JSON API and
//! the metrics all read, so they cannot disagree.
//!
//! It is a fold over events (not over `RunState`): it needs no replay, so it also summarises
//! journals the reducer does not accept (task events from a newer baton) and a server can keep
//! one per run and feed it only the events appended since the last look.

use std::collections::{BTreeMap, HashMap};

use baton_core::{Event, EventRecord, PauseReason, RunStatus, ToolOutcome, Usage};
use serde::Serialize;

use crate::tasks::{TaskFold, TaskGraph};

/// Which kind of model call a row is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// A turn's call.
    Turn,
    /// A compaction's summary call.
    Summary,
}

/// One finished model call.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelCallRow {
    pub seq: u64,
    pub at: jiff::Timestamp,
    pub turn: u32,
    /// The turn's call number (absent for summary calls).
    pub call: Option<u32>,
    pub kind: CallKind,
    /// The model the server reported, else the one the run asked for.
    pub model: String,
    pub usage: Option<Usage>,
    /// `None`: unknown (no price for the model, or no usage reported) — never shown as $0.
    pub cost_usd: Option<f64>,
    pub duration_ms: u64,
}

/// One tool call (finished or still running).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ToolCallRow {
    /// The `tool_call_started` event.
    pub seq: u64,
    pub turn: u32,
    pub call_id: String,
    pub name: String,
    pub started_at: jiff::Timestamp,
    /// `None` while it runs (or if the process died during it).
    pub outcome: Option<ToolOutcome>,
    pub duration_ms: Option<u64>,
}

/// One turn of the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TurnRow {
    pub turn: u32,
    pub started_at: jiff::Timestamp,
    pub finished_at: Option<jiff::Timestamp>,
}

/// Token totals over all finished calls (turn and summary calls).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    pub input: u64,
    pub cached: u64,
    pub cache_write: u64,
    pub output: u64,
    pub reasoning: u64,
    /// Finished calls whose server reported no usage: the totals undercount by these.
    pub unreported_calls: u32,
}

/// The cost of a run: the sum of the priced calls, and how many calls had no price.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Cost {
    pub usd: f64,
    /// Calls of unknown cost: when non-zero, `usd` is a lower bound.
    pub unknown_calls: u32,
}

impl Cost {
    /// `$0.0050`, `at least $0.0020 (+1 call of unknown cost)`, or `unknown` when no call had a
    /// price: an unknown cost is never written as $0.
    pub fn text(&self, calls: u32) -> String {
        match self.unknown_calls {
            0 => format!("${:.4}", self.usd),
            n if n >= calls && self.usd == 0.0 => "unknown".to_string(),
            n => format!(
                "at least ${:.4} (+{n} call{} of unknown cost)",
                self.usd,
                if n == 1 { "" } else { "s" }
            ),
        }
    }
}

/// The code index's embedding calls for one embedding model (`embeddings_used` events).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EmbeddingRow {
    pub model: String,
    pub calls: u32,
    /// Texts embedded.
    pub inputs: u64,
    pub input_tokens: u64,
    /// `None`: no price for the model (a local embedder, an unpriced endpoint).
    pub cost_usd: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Pause {
    pub reason: PauseReason,
    pub detail: String,
    /// A person must act (key, model name, approval, plan, failed task, workspace), as opposed
    /// to a limit reached or an interruption (see `PauseReason::needs_person`).
    pub needs_person: bool,
}

/// Everything a run's journal says about it, kept up to date event by event.
#[derive(Clone, Debug, Default)]
pub struct RunAggregate {
    /// Events folded so far (the next one's seq).
    pub events: u64,
    pub goal: String,
    pub workspace: String,
    /// The model the run asks for (its latest settings).
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub max_turns: Option<u32>,
    /// The status the journal's events imply (the store's row says the same; a server uses the
    /// row, which also knows whether the holder is alive).
    pub status: RunStatus,
    pub turns_started: u32,
    pub turns_finished: u32,
    pub compactions: u32,
    pub restarts: u32,
    /// MCP servers that did not start for the run's current process: `(server, why)`.
    pub mcp_failures: Vec<(String, String)>,
    pub tokens: Tokens,
    /// Model calls' cost plus the priced embeddings' (as budgets count it).
    pub cost: Cost,
    pub calls: Vec<ModelCallRow>,
    /// Embedding calls by embedding model, in the order first used.
    pub embeddings: Vec<EmbeddingRow>,
    pub tools: Vec<ToolCallRow>,
    pub turns: Vec<TurnRow>,
    /// Failed model call attempts (each is retried or ends in a pause) by error class.
    pub retries: BTreeMap<String, u64>,
    pub pause: Option<Pause>,
    pub finish_summary: Option<String>,
    /// How the model ended a finished run (`tool` or `text`); absent when its task graph did.
    pub finished_by: Option<baton_core::FinishedBy>,
    pub failure: Option<String>,
    pub first_at: Option<jiff::Timestamp>,
    pub last_at: Option<jiff::Timestamp>,
    /// Milliseconds spent running (pauses and time between processes not counted), by the
    /// reducer's rule ([`baton_core::running_time`]).
    pub running_ms: u64,
    /// Runs that worked on this run's tasks (`--parallel`), in the order they were delegated.
    pub children: Vec<String>,
    tasks: TaskFold,
    /// Open tool calls: call id → index in `tools`.
    open_tools: HashMap<String, usize>,
}

impl RunAggregate {
    pub fn from_events<'a>(records: impl IntoIterator<Item = &'a EventRecord>) -> RunAggregate {
        let mut aggregate = RunAggregate::default();
        for record in records {
            aggregate.apply(record);
        }
        aggregate
    }

    /// Folds one event in. Events must come in journal order; one already folded (a seq below
    /// `events`) is ignored, so re-reading an overlapping page is harmless.
    pub fn apply(&mut self, record: &EventRecord) {
        if record.seq < self.events {
            return;
        }
        self.events = record.seq + 1;
        self.first_at.get_or_insert(record.at);
        let was_running = self.status == RunStatus::Running;
        self.running_ms = self.running_ms.saturating_add(baton_core::running_time(
            &record.event,
            self.last_at,
            record.at,
            was_running,
        ));
        self.last_at = Some(record.at);
        if let Some(status) = record.event.status_change() {
            self.status = status;
        }
        self.tasks.apply(&record.event);
        match &record.event {
            Event::RunStarted {
                goal,
                workspace,
                settings,
                ..
            } => {
                self.goal = goal.clone();
                self.workspace = workspace.clone();
                self.settings(settings);
            }
            Event::RunResumed { settings } => {
                self.settings(settings);
                self.pause = None;
                // Each process starts its own servers.
                self.mcp_failures.clear();
            }
            Event::McpServerFailed { server, error } => {
                self.mcp_failures.retain(|(name, _)| name != server);
                self.mcp_failures.push((server.clone(), error.clone()));
            }
            Event::SupervisorRestarted { .. } => self.restarts += 1,
            Event::EmbeddingsUsed {
                model,
                calls,
                inputs,
                input_tokens,
                cost_usd,
            } => self.add_embeddings(model, *calls, *inputs, *input_tokens, *cost_usd),
            Event::TurnStarted { turn } => {
                self.turns_started = self.turns_started.max(*turn);
                self.turns.push(TurnRow {
                    turn: *turn,
                    started_at: record.at,
                    finished_at: None,
                });
            }
            Event::TurnFinished { turn } => {
                self.turns_finished = self.turns_finished.max(*turn);
                if let Some(row) = self.turns.iter_mut().rev().find(|r| r.turn == *turn) {
                    row.finished_at = Some(record.at);
                }
            }
            Event::ModelCallFailed { .. }
            | Event::CompactionFailed { .. }
            | Event::ModelCallFinished { .. }
            | Event::CompactionFinished { .. }
            | Event::ToolCallStarted { .. }
            | Event::ToolCallFinished { .. } => self.apply_call(record),
            Event::RunPaused { reason, detail } => {
                self.pause = Some(Pause {
                    reason: *reason,
                    detail: detail.clone(),
                    needs_person: reason.needs_person(),
                });
            }
            Event::TaskDelegated { child_run, .. } if !self.children.contains(child_run) => {
                self.children.push(child_run.clone());
            }
            // A parallel task's child run: its calls are its own rows, its totals count here.
            Event::TaskReturned {
                cost_usd,
                unpriced_calls,
                prompt_tokens,
                completion_tokens,
                ..
            } => {
                self.tokens.input = self.tokens.input.saturating_add(*prompt_tokens);
                self.tokens.output = self.tokens.output.saturating_add(*completion_tokens);
                if cost_usd.is_finite() {
                    self.cost.usd += cost_usd;
                }
                self.cost.unknown_calls = self.cost.unknown_calls.saturating_add(*unpriced_calls);
            }
            Event::RunFinished {
                summary,
                finished_by,
            } => {
                self.finish_summary = Some(summary.clone());
                self.finished_by = *finished_by;
            }
            Event::RunFailed { error } => self.failure = Some(error.clone()),
            _ => {}
        }
    }

    /// Model calls, compactions and tool calls: their rows, retries and totals.
    fn apply_call(&mut self, record: &EventRecord) {
        match &record.event {
            Event::ModelCallFailed { class, .. } | Event::CompactionFailed { class, .. } => {
                let class = serde_json::to_value(class)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_else(|| format!("{class:?}"));
                *self.retries.entry(class).or_default() += 1;
            }
            Event::ModelCallFinished {
                turn,
                call,
                usage,
                cost_usd,
                served_model,
                duration_ms,
                ..
            } => self.add_call(
                record,
                *turn,
                Some(*call),
                CallKind::Turn,
                served_model,
                usage,
                *cost_usd,
                *duration_ms,
            ),
            Event::CompactionFinished {
                turn,
                usage,
                cost_usd,
                served_model,
                duration_ms,
                ..
            } => {
                self.compactions += 1;
                self.add_call(
                    record,
                    *turn,
                    None,
                    CallKind::Summary,
                    served_model,
                    usage,
                    *cost_usd,
                    *duration_ms,
                );
            }
            Event::ToolCallStarted {
                turn,
                call_id,
                name,
                ..
            } => {
                self.open_tools.insert(call_id.clone(), self.tools.len());
                self.tools.push(ToolCallRow {
                    seq: record.seq,
                    turn: *turn,
                    call_id: call_id.clone(),
                    name: name.clone(),
                    started_at: record.at,
                    outcome: None,
                    duration_ms: None,
                });
            }
            Event::ToolCallFinished {
                call_id,
                result,
                duration_ms,
                ..
            } => {
                if let Some(row) = self
                    .open_tools
                    .remove(call_id)
                    .and_then(|i| self.tools.get_mut(i))
                {
                    row.outcome = Some(result.outcome);
                    row.duration_ms = Some(*duration_ms);
                }
            }
            _ => {}
        }
    }

    /// As the reducer counts them: a priced call's cost joins the run's; an unpriced one
    /// costs nothing known (it is not a model call of unknown cost).
    fn add_embeddings(
        &mut self,
        model: &str,
        calls: u32,
        inputs: u64,
        input_tokens: u64,
        cost_usd: Option<f64>,
    ) {
        let cost_usd = cost_usd.filter(|c| c.is_finite() && *c >= 0.0);
        let i = match self.embeddings.iter().position(|row| row.model == model) {
            Some(i) => i,
            None => {
                self.embeddings.push(EmbeddingRow {
                    model: model.to_owned(),
                    calls: 0,
                    inputs: 0,
                    input_tokens: 0,
                    cost_usd: None,
                });
                self.embeddings.len() - 1
            }
        };
        let row = &mut self.embeddings[i];
        row.calls = row.calls.saturating_add(calls);
        row.inputs = row.inputs.saturating_add(inputs);
        row.input_tokens = row.input_tokens.saturating_add(input_tokens);
        if let Some(cost) = cost_usd {
            row.cost_usd = Some(row.cost_usd.unwrap_or(0.0) + cost);
            self.cost.usd += cost;
        }
    }

    fn settings(&mut self, settings: &baton_core::RunSettings) {
        self.model = Some(settings.model.model.clone());
        self.base_url = Some(settings.model.base_url.clone());
        self.max_turns = Some(settings.limits.max_turns);
    }

    #[allow(clippy::too_many_arguments)]
    fn add_call(
        &mut self,
        record: &EventRecord,
        turn: u32,
        call: Option<u32>,
        kind: CallKind,
        served_model: &Option<String>,
        usage: &Option<Usage>,
        cost_usd: Option<f64>,
        duration_ms: u64,
    ) {
        match usage {
            Some(u) => {
                // Numbers come from a server: absurd ones must not overflow.
                let t = &mut self.tokens;
                t.input = t.input.saturating_add(u.prompt_tokens);
                t.cached = t.cached.saturating_add(u.cached_prompt_tokens.unwrap_or(0));
                t.cache_write = t
                    .cache_write
                    .saturating_add(u.cache_write_tokens.unwrap_or(0));
                t.output = t.output.saturating_add(u.completion_tokens);
                t.reasoning = t.reasoning.saturating_add(u.reasoning_tokens.unwrap_or(0));
            }
            None => self.tokens.unreported_calls += 1,
        }
        let cost_usd = cost_usd.filter(|c| c.is_finite());
        match cost_usd {
            Some(c) => self.cost.usd += c,
            None => self.cost.unknown_calls += 1,
        }
        self.calls.push(ModelCallRow {
            seq: record.seq,
            at: record.at,
            turn,
            call,
            kind,
            model: served_model
                .clone()
                .or_else(|| self.model.clone())
                .unwrap_or_else(|| "unknown".to_string()),
            usage: *usage,
            cost_usd,
            duration_ms,
        });
    }

    /// Finished model calls (turn and summary calls).
    pub fn model_calls(&self) -> u32 {
        u32::try_from(self.calls.len()).unwrap_or(u32::MAX)
    }

    /// `Cost::text` for this run.
    pub fn cost_text(&self) -> String {
        self.cost.text(self.model_calls())
    }

    pub fn tasks(&self) -> TaskGraph {
        self.tasks.graph()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use baton_core::*;

    fn records(events: Vec<Event>) -> Vec<EventRecord> {
        events
            .into_iter()
            .enumerate()
            .map(|(i, event)| EventRecord {
                run_id: RunId::from_string("r"),
                seq: i as u64,
                at: jiff::Timestamp::from_second(1_700_000_000 + i as i64).unwrap(),
                event,
            })
            .collect()
    }

    fn finished(call: u32, usage: Option<Usage>, cost_usd: Option<f64>) -> Event {
        Event::ModelCallFinished {
            turn: call,
            call,
            message: AssistantMessage::default(),
            usage,
            cost_usd,
            finish_reason: None,
            served_model: Some("gpt-4o".into()),
            duration_ms: 1500,
        }
    }

    #[test]
    fn embeddings_are_summed_per_model_and_priced_ones_join_the_cost() {
        let used = |model: &str, calls, tokens, cost_usd| Event::EmbeddingsUsed {
            model: model.into(),
            calls,
            inputs: u64::from(calls) * 3,
            input_tokens: tokens,
            cost_usd,
        };
        let agg = RunAggregate::from_events(&records(vec![
            used("openai/text-embedding-3-small", 2, 100, Some(0.002)),
            used("local/all-MiniLM-L6-v2", 1, 40, None),
            used("openai/text-embedding-3-small", 1, 50, Some(0.001)),
            used("openai/text-embedding-3-small", 1, 5, Some(f64::NAN)),
        ]));
        assert_eq!(agg.embeddings.len(), 2, "{:?}", agg.embeddings);
        let priced = &agg.embeddings[0];
        assert_eq!(
            (
                priced.model.as_str(),
                priced.calls,
                priced.inputs,
                priced.input_tokens
            ),
            ("openai/text-embedding-3-small", 4, 12, 155)
        );
        assert!((priced.cost_usd.unwrap() - 0.003).abs() < 1e-12);
        assert_eq!(agg.embeddings[1].cost_usd, None);
        assert!((agg.cost.usd - 0.003).abs() < 1e-12);
        // Embeddings are not model calls: no call of unknown cost, no tokens of the model's.
        assert_eq!((agg.cost.unknown_calls, agg.model_calls()), (0, 0));
        assert_eq!(agg.tokens, Tokens::default());
    }

    #[test]
    fn a_parallel_tasks_child_run_counts_in_the_totals_but_not_as_a_call() {
        let usage = Usage {
            prompt_tokens: 1000,
            completion_tokens: 100,
            ..Default::default()
        };
        let events = records(vec![
            finished(1, Some(usage), Some(0.01)),
            Event::TaskReturned {
                task: "a".into(),
                child_run: "c".into(),
                result: DelegatedResult::Failed { reason: "x".into() },
                cost_usd: 0.02,
                unpriced_calls: 1,
                prompt_tokens: 500,
                completion_tokens: 50,
                turns: 2,
            },
        ]);
        let agg = RunAggregate::from_events(&events);
        assert_eq!((agg.tokens.input, agg.tokens.output), (1500, 150));
        assert_eq!(agg.model_calls(), 1);
        assert_eq!(agg.cost.unknown_calls, 1);
        assert!((agg.cost.usd - 0.03).abs() < 1e-9);
    }

    #[test]
    fn totals_count_turn_and_summary_calls_and_unknown_costs_are_never_zero() {
        let usage = Usage {
            prompt_tokens: 1000,
            completion_tokens: 100,
            cached_prompt_tokens: Some(800),
            ..Default::default()
        };
        let events = records(vec![
            finished(1, Some(usage), Some(0.0035)),
            Event::ModelCallFailed {
                turn: 2,
                call: 2,
                attempt: 1,
                class: ErrorClass::RateLimited,
                message: "429".into(),
                retry_in_ms: Some(1),
            },
            finished(2, Some(usage), Some(0.0015)),
            Event::CompactionFinished {
                turn: 3,
                summary: "s".into(),
                replaced: 2,
                first_seq: 0,
                last_seq: 1,
                left_out: 0,
                usage: None,
                cost_usd: None,
                served_model: None,
                duration_ms: 10,
            },
        ]);
        let agg = RunAggregate::from_events(&events);
        assert_eq!(
            (agg.tokens.input, agg.tokens.cached, agg.tokens.output),
            (2000, 1600, 200)
        );
        assert_eq!(agg.tokens.unreported_calls, 1);
        assert_eq!(agg.model_calls(), 3);
        assert_eq!(agg.compactions, 1);
        assert_eq!(agg.retries.get("rate_limited"), Some(&1));
        assert_eq!(
            agg.cost_text(),
            "at least $0.0050 (+1 call of unknown cost)"
        );
        assert_eq!(agg.calls[2].model, "unknown");

        // Folding in two halves equals folding at once; a repeated event is ignored.
        let mut halves = RunAggregate::from_events(&events[..2]);
        for r in &events[1..] {
            halves.apply(r);
        }
        assert_eq!(halves.tokens, agg.tokens);
        assert_eq!(halves.calls, agg.calls);

        let none = Cost {
            usd: 0.0,
            unknown_calls: 2,
        };
        assert_eq!(none.text(2), "unknown");
        assert_eq!(Cost::default().text(0), "$0.0000");
    }

    #[test]
    fn tool_rows_get_their_outcome_and_turns_their_end() {
        let events = records(vec![
            Event::TurnStarted { turn: 1 },
            Event::ToolCallStarted {
                turn: 1,
                call_id: "c1".into(),
                name: "shell".into(),
                arguments: "{}".into(),
                effect: ToolEffect::Mutating,
            },
            Event::ToolCallFinished {
                turn: 1,
                call_id: "c1".into(),
                result: ToolResult {
                    outcome: ToolOutcome::Error,
                    content: "x".into(),
                    exit_code: Some(1),
                },
                duration_ms: 42,
            },
            Event::TurnFinished { turn: 1 },
            Event::RunPaused {
                reason: PauseReason::Budget,
                detail: "spent".into(),
            },
        ]);
        let agg = RunAggregate::from_events(&events);
        assert_eq!(agg.tools[0].outcome, Some(ToolOutcome::Error));
        assert_eq!(agg.tools[0].duration_ms, Some(42));
        assert_eq!(agg.turns[0].finished_at, Some(events[3].at));
        assert_eq!(agg.turns_finished, 1);
        assert_eq!(agg.pause.as_ref().unwrap().reason, PauseReason::Budget);
        assert_eq!(agg.status, RunStatus::Paused);
    }
}
