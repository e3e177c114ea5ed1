mod context;
mod delegation;
mod ending;
mod governance;
mod run;
mod snapshot;
mod task;
mod tool;
mod turn;

use serde::{Deserialize, Serialize};

use std::collections::VecDeque;

use crate::board::TaskBoard;
use crate::ending::{
    AfterReply, EndingTrack, FinishedBy, NudgeKind, OpenItems, open_items_due, with_open_items,
};
use crate::event::{
    CompactionTrigger, ErrorClass, Event, EventRecord, LoopResponse, PauseReason, RunStatus,
};
use crate::governance::{BudgetResource, CallFingerprint, LoopPattern, remember_call, stable_hash};
use crate::memory::{
    PlanItem, REMEMBER_TOOL, UPDATE_PLAN_TOOL, apply_fact, parse_plan_update, parse_remember,
};
use crate::message::{Message, ToolCall, ToolEffect, ToolOutcome, ToolSpec, Usage};
use crate::settings::RunSettings;
use crate::task::PlanSource;
use crate::{FINISH_TOOL, RunId, SUBMIT_PLAN_TOOL};

/// A repo map as journaled: the text, and the task it was rendered for (`None`: the run's
/// start, before or without a plan).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoMap {
    pub task: Option<String>,
    pub text: String,
}

/// The state of a run: a pure fold over its journal. Nothing else writes to it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    pub run_id: Option<RunId>,
    /// Sequence number the next event must carry.
    pub next_seq: u64,
    pub status: RunStatus,
    pub goal: String,
    pub workspace: String,
    pub settings: Option<RunSettings>,
    pub system_prompt: String,
    pub project_instructions: Option<String>,
    pub tools: Vec<ToolSpec>,
    /// What the run's code index spent on embeddings (`embeddings_used`).
    #[serde(default)]
    pub embeddings: EmbeddingTotals,
    /// The latest repo map (`repo_map_rendered`): shown in the brief of the run or task it was
    /// rendered for.
    pub repo_map: Option<RepoMap>,
    /// The conversation after the fixed preamble (system prompt, instructions, goal). After a
    /// compaction it starts with the handoff summary.
    pub history: Vec<HistoryEntry>,
    /// The model's todo list (`update_plan`), shown at the end of every request.
    pub plan: Vec<PlanItem>,
    /// Durable facts (`remember`): never summarised away.
    pub facts: Vec<String>,
    /// A compaction that started and has not finished.
    pub compaction: Option<PendingCompaction>,
    pub compactions: u32,
    /// Compactions forced by overflow errors since the last successful model call: bounds how
    /// often a call that keeps overflowing is retried.
    pub overflow_compactions: u32,
    /// The last finished call's (local count, reported prompt tokens): calibrates estimates
    /// for models without an exact local tokenizer.
    pub calibration: Option<(u64, u64)>,
    /// Milliseconds the run spent running, summed between consecutive events of one process
    /// (downtime before a resume does not count): what the wall-time budget measures.
    pub running_ms: u64,
    pub last_event_at: Option<jiff::Timestamp>,
    /// Budgets already warned about in this process.
    pub budget_warned: Vec<BudgetResource>,
    /// MCP servers that did not start for this process of the run, with why (name order of the
    /// events; a later failure of the same server replaces its entry).
    pub mcp_failures: Vec<(String, String)>,
    /// Recent tool calls, for loop detection.
    pub recent_calls: VecDeque<CallFingerprint>,
    /// Loop nudges since the last resume.
    pub loop_nudges: u32,
    /// Local token count of the open model call's request.
    pub open_call_counted: Option<u64>,
    pub phase: Phase,
    pub turns_started: u32,
    pub turns_finished: u32,
    /// Model calls started so far (a call retried over several attempts counts once).
    pub model_calls_started: u32,
    pub model_calls_finished: u32,
    /// Model calls finished since the run last changed endpoint (provider or base URL, at
    /// start or on a resume): 0 means the endpoint has never answered this run, so a failure
    /// to connect pauses quickly instead of waiting out the patient retry schedule.
    pub calls_on_endpoint: u32,
    /// Failed model call attempts since the last success or resume: what the circuit breaker
    /// counts.
    pub consecutive_model_failures: u32,
    pub usage: UsageTotals,
    /// Set when the model ended the run (the `finish` tool, or a text reply accepted as its
    /// claim): the run should be recorded as finished.
    pub finish_summary: Option<String>,
    /// How the model ended, once `finish_summary` is set by the model.
    #[serde(default)]
    pub finished_by: Option<FinishedBy>,
    /// Replies without tool calls, nudges and reminders: what decides how a run ends.
    #[serde(default)]
    pub endings: EndingTrack,
    pub pause: Option<(PauseReason, String)>,
    pub failure: Option<String>,
    /// Workspace snapshots of this run, oldest first.
    #[serde(default)]
    pub snapshots: Vec<SnapshotRecord>,
    /// The task graph and where each task stands; `None` for a run without a plan.
    #[serde(default)]
    pub board: Option<TaskBoard>,
    /// A person's rollback that started and has not finished (redone on resume).
    #[serde(default)]
    pub user_rollback: Option<String>,
}

/// A journaled workspace snapshot (a commit in the run's shadow git repository).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRecord {
    /// The `snapshot_taken` event.
    pub seq: u64,
    pub snapshot: String,
    pub reason: crate::task::SnapshotReason,
    pub task: Option<String>,
}

/// One message of the history with where it came from: the journal event that added it (its
/// handle for `recall`) and the turn it belongs to (what masking and compaction cut by).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub seq: u64,
    pub turn: u32,
    pub message: Message,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingCompaction {
    pub replaced: u32,
    pub trigger: CompactionTrigger,
    pub failures: u32,
    /// Failures because the summary request itself was too long: each leaves out more of the
    /// oldest history.
    pub overflows: u32,
}

/// The history message standing for everything a compaction replaced.
pub fn summary_message(summary: &str, first_seq: u64, last_seq: u64) -> String {
    format!(
        "Handoff summary of the work so far. The conversation before this point (journal \
         events {first_seq}-{last_seq}) was compacted into it; exact earlier outputs can be \
         fetched with `recall`.\n\n{}",
        summary.trim()
    )
}

/// What the model is told when it seems to go in circles.
pub fn loop_nudge(detail: &str) -> String {
    format!(
        "baton noticed a loop: {detail}. Repeating it will not give a different result. Step \
         back: re-read the error, check your assumptions (recall earlier outputs or search_memory \
         if needed) and try a different approach. If you are blocked, say why and call `finish`."
    )
}

/// Where the run is inside its current turn.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// Between turns.
    #[default]
    Idle,
    /// The turn started; its model call has not finished. `call` is set once an attempt started.
    AwaitingModel {
        turn: u32,
        call: Option<u32>,
        attempts: u32,
    },
    /// The model answered; its tool calls run in order.
    RunningTools {
        turn: u32,
        remaining: Vec<ToolCall>,
        in_flight: Option<InFlightTool>,
        /// What the run does once the turn's calls are done about a reply without a tool call
        /// or an ending (decided when it was journaled; taken by the event that carries it out).
        after: Option<AfterReply>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlightTool {
    pub call: ToolCall,
    pub effect: ToolEffect,
}

/// Sums of the run's `embeddings_used` events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingTotals {
    pub calls: u32,
    pub inputs: u64,
    pub input_tokens: u64,
    pub cost_usd: f64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageTotals {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_prompt_tokens: u64,
    /// Finished calls whose server reported no usage: the totals undercount by these.
    pub unreported_calls: u32,
    /// Sum of the priced calls' cost.
    pub cost_usd: f64,
    /// Finished calls whose cost is unknown (no price for the model, or no usage).
    pub unpriced_calls: u32,
}

impl UsageTotals {
    /// Counts one finished call (model or compaction).
    fn add_call(&mut self, usage: Option<&Usage>, cost_usd: Option<f64>) {
        match usage {
            Some(usage) => self.add(usage),
            None => self.unreported_calls += 1,
        }
        match cost_usd {
            Some(cost) if cost.is_finite() => self.cost_usd += cost,
            _ => self.unpriced_calls += 1,
        }
    }

    fn add(&mut self, usage: &Usage) {
        // Numbers come from a server: absurd ones must not overflow (and panic on replay).
        self.prompt_tokens = self.prompt_tokens.saturating_add(usage.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(usage.completion_tokens);
        self.cached_prompt_tokens = self
            .cached_prompt_tokens
            .saturating_add(usage.cached_prompt_tokens.unwrap_or(0));
    }
}

/// A journal that does not describe a possible run: out-of-order sequence numbers, a result for
/// a call that never started, events after the run ended. Replay stops at the first one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("journal event #{seq} ({kind}) is inconsistent with the run so far: {problem}")]
pub struct ReplayError {
    pub seq: u64,
    pub kind: &'static str,
    pub problem: String,
}

impl RunState {
    /// Applies one journaled event. This is the only way run state changes.
    pub fn apply(&mut self, record: &EventRecord) -> Result<(), ReplayError> {
        let fail = |problem: String| ReplayError {
            seq: record.seq,
            kind: record.event.kind(),
            problem,
        };
        if record.seq != self.next_seq {
            return Err(fail(format!("expected sequence number {}", self.next_seq)));
        }
        match &self.run_id {
            Some(id) if *id != record.run_id => {
                return Err(fail(format!(
                    "event belongs to run {}, not {}",
                    record.run_id, id
                )));
            }
            _ => {}
        }
        let started = self.run_id.is_some();
        if !started && !matches!(record.event, Event::RunStarted { .. }) {
            return Err(fail("the first event must be run_started".into()));
        }
        if self.status.is_terminal() {
            return Err(fail(format!("the run already {}", self.status.as_str())));
        }
        let was_running = self.status == RunStatus::Running;
        // Time up to this event belongs to the task that was current before it.
        let task_before = self.board.as_ref().and_then(|b| b.current.clone());
        self.apply_event(&record.event, &record.run_id, record.seq)
            .map_err(fail)?;
        self.count_running_time(&record.event, record.at, was_running, task_before);
        if let Some(status) = record.event.status_change() {
            self.status = status;
        }
        self.next_seq += 1;
        Ok(())
    }

    /// Applies one event: checks it is allowed now and changes the state. Each family of
    /// events has its rules in `state/FAMILY.rs`.
    fn apply_event(&mut self, event: &Event, run_id: &RunId, seq: u64) -> Result<(), String> {
        let applied = Applied {
            event,
            run_id,
            seq,
            running: self.status == RunStatus::Running,
        };
        match event {
            Event::RunStarted { .. }
            | Event::RunResumed { .. }
            | Event::SupervisorRestarted { .. }
            | Event::NoteAdded { .. }
            | Event::TextEndAccepted { .. }
            | Event::RunPaused { .. }
            | Event::RunFinished { .. }
            | Event::RunFailed { .. } => self.apply_run_event(applied),
            Event::TurnStarted { .. }
            | Event::ModelCallStarted { .. }
            | Event::ModelCallFailed { .. }
            | Event::ModelCallFinished { .. }
            | Event::TurnFinished { .. } => self.apply_turn_event(applied),
            Event::ToolCallStarted { .. } | Event::ToolCallFinished { .. } => {
                self.apply_tool_event(applied)
            }
            Event::CompactionStarted { .. }
            | Event::CompactionFailed { .. }
            | Event::CompactionFinished { .. } => self.apply_context_event(applied),
            Event::BudgetWarning { .. }
            | Event::LoopDetected { .. }
            | Event::McpServerFailed { .. }
            | Event::McpServerStarted { .. }
            | Event::RepoMapRendered { .. }
            | Event::EmbeddingsUsed { .. } => self.apply_governance_event(applied),
            Event::PlanSet { .. }
            | Event::TaskStarted { .. }
            | Event::CheckStarted { .. }
            | Event::CheckFinished { .. }
            | Event::TaskFinished { .. }
            | Event::TaskFailed { .. }
            | Event::TaskSkipped { .. } => self.apply_task_event(applied),
            Event::TaskDelegated { .. }
            | Event::TaskReturned { .. }
            | Event::MergeStarted { .. }
            | Event::MergeConflicted { .. } => self.apply_delegation_event(applied),
            Event::RollbackStarted { .. }
            | Event::RollbackFinished { .. }
            | Event::SnapshotTaken { .. } => self.apply_snapshot_event(applied),
        }
    }

    fn count_running_time(
        &mut self,
        event: &Event,
        at: jiff::Timestamp,
        was_running: bool,
        task: Option<String>,
    ) {
        let ms = crate::event::running_time(event, self.last_event_at, at, was_running);
        if ms > 0 {
            self.running_ms = self.running_ms.saturating_add(ms);
            if let (Some(task), Some(board)) = (task, &mut self.board) {
                board.add_running_time(&task, ms);
            }
        }
        self.last_event_at = Some(at);
    }

    fn push_history(&mut self, seq: u64, turn: u32, message: Message) {
        self.history.push(HistoryEntry { seq, turn, message });
    }

    /// What a successful call of a tool the reducer knows about does to the run itself; an
    /// ending that must wait (open todo items) comes back as what to do after the turn's calls.
    fn apply_tool_effect(
        &mut self,
        name: &str,
        arguments: &str,
        result: &crate::ToolResult,
    ) -> Option<AfterReply> {
        match name {
            FINISH_TOOL => {
                let policy = self.ending_policy();
                if let Some(items) = open_items_due(policy, &self.plan, &self.endings) {
                    return Some(AfterReply::RemindOpenItems { items });
                }
                let summary = match policy.open_items {
                    OpenItems::RemindOnce => with_open_items(&result.content, &self.plan),
                    OpenItems::Ignore => result.content.clone(),
                };
                self.claim_end(&summary, FinishedBy::Tool);
            }
            // The engine only reports success after the same parse succeeded; a journal where
            // it fails here changes nothing rather than guessing.
            UPDATE_PLAN_TOOL => {
                if let Ok(plan) = parse_plan_update(arguments) {
                    self.plan = plan;
                }
            }
            REMEMBER_TOOL => {
                if let Ok(update) = parse_remember(arguments, &self.facts) {
                    apply_fact(&mut self.facts, update);
                }
            }
            _ => {}
        }
        None
    }

    /// The run plans first and has no plan yet: only read-only tools and `submit_plan` are
    /// offered, and an ending without a plan is not an ending.
    pub fn is_planning(&self) -> bool {
        self.board.is_none()
            && self
                .settings
                .as_ref()
                .is_some_and(|s| s.tasks.planning != crate::settings::Planning::None)
    }

    fn expect_open_call(&self, turn: u32, call: u32) -> Result<(), String> {
        match &self.phase {
            Phase::AwaitingModel {
                turn: t,
                call: Some(c),
                ..
            } if *t == turn && *c == call => Ok(()),
            _ => Err(format!("model call {call} of turn {turn} is not open")),
        }
    }

    fn require_idle(&self) -> Result<(), String> {
        if self.phase == Phase::Idle {
            Ok(())
        } else {
            Err("a turn is in progress".into())
        }
    }

    fn board_mut(&mut self) -> Result<&mut TaskBoard, String> {
        self.board
            .as_mut()
            .ok_or_else(|| "the run has no plan".to_string())
    }

    pub fn settings(&self) -> Option<&RunSettings> {
        self.settings.as_ref()
    }
}

/// The event being applied and what the family rules may need of its record.
#[derive(Clone, Copy)]
struct Applied<'a> {
    event: &'a Event,
    run_id: &'a RunId,
    seq: u64,
    /// Whether the run was running before this event.
    running: bool,
}

/// An event handed to the wrong family's rules: a bug in `apply_event`'s dispatch.
fn misrouted(event: &Event) -> String {
    format!(
        "internal: {} reached the rules of another family",
        event.kind()
    )
}

fn require_running(running: bool) -> Result<(), String> {
    if running {
        Ok(())
    } else {
        Err("the run is not running (resume it first)".into())
    }
}

fn check_turn(current: u32, got: u32) -> Result<(), String> {
    if current == got {
        Ok(())
    } else {
        Err(format!("the current turn is {current}, not {got}"))
    }
}

/// The layout of a serialized [`RunState`] in a state checkpoint. A checkpoint of another
/// layout is ignored and the journal replayed instead, so this changes whenever the reducer
/// could fold the same events into a different state: with each baton version, and by hand (the
/// number) when a change to the reducer or to `RunState` lands between versions.
pub const STATE_FORMAT: &str = concat!("run-state/1+", env!("CARGO_PKG_VERSION"));

/// Folds a whole journal into a state.
pub fn replay<'a>(
    records: impl IntoIterator<Item = &'a EventRecord>,
) -> Result<RunState, ReplayError> {
    let mut state = RunState::default();
    for record in records {
        state.apply(record)?;
    }
    Ok(state)
}
