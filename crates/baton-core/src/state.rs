use serde::{Deserialize, Serialize};

use std::collections::VecDeque;

use crate::board::{OpenCheck, TaskBoard, TaskStatus};
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

    fn apply_event(&mut self, event: &Event, run_id: &RunId, seq: u64) -> Result<(), String> {
        let running = self.status == RunStatus::Running;
        match event {
            Event::RunStarted {
                goal,
                workspace,
                settings,
                system_prompt,
                project_instructions,
                tools,
            } => {
                if self.run_id.is_some() {
                    return Err("the run was already started".into());
                }
                self.run_id = Some(run_id.clone());
                self.goal = goal.clone();
                self.workspace = workspace.clone();
                self.settings = Some(settings.clone());
                self.system_prompt = system_prompt.clone();
                self.project_instructions = project_instructions.clone();
                self.tools = tools.clone();
            }
            Event::RunResumed { settings } => {
                let endpoint = |s: &RunSettings| (s.model.provider, s.model.base_url.clone());
                if self.settings.as_ref().map(endpoint) != Some(endpoint(settings)) {
                    self.calls_on_endpoint = 0;
                }
                self.settings = Some(settings.clone());
                // A person resumed a run paused about its endings: count afresh (a crash's
                // resume keeps the counts, so it decides as the dead process would have).
                let paused = self.pause.take().map(|(reason, _)| reason);
                match paused {
                    Some(PauseReason::Loop | PauseReason::TextReply) => {
                        self.endings.no_tool_replies = 0;
                    }
                    Some(PauseReason::NoPlan) => {
                        self.endings.no_tool_replies = 0;
                        self.endings.planning_nudged = false;
                    }
                    _ => {}
                }
                // Warnings are per process.
                self.budget_warned.clear();
                // A paused run was resumed by a person: loops start counting afresh, and the
                // outage may be over, so the breaker gets a fresh count. A crashed process's
                // successor (no pause journaled) keeps both and decides as it would have.
                if paused.is_some() {
                    self.recent_calls.clear();
                    self.loop_nudges = 0;
                    self.consecutive_model_failures = 0;
                }
            }
            // Only a record of the restart: the state to continue from is what the journal
            // already holds, and the next process records its own `run_resumed`.
            Event::SupervisorRestarted { .. } => {}
            Event::TurnStarted { turn } => {
                require_running(running)?;
                if self.phase != Phase::Idle {
                    return Err("a turn is already in progress".into());
                }
                if *turn != self.turns_started + 1 {
                    return Err(format!("expected turn {}", self.turns_started + 1));
                }
                self.turns_started = *turn;
                if let Some(board) = &mut self.board {
                    board.count_turn();
                }
                self.phase = Phase::AwaitingModel {
                    turn: *turn,
                    call: None,
                    attempts: 0,
                };
            }
            Event::ModelCallStarted {
                turn,
                call,
                attempt,
                context,
                ..
            } => {
                self.open_call_counted = context.map(|c| c.counted_prompt_tokens);
                require_running(running)?;
                let Phase::AwaitingModel {
                    turn: current,
                    call: current_call,
                    attempts,
                } = &mut self.phase
                else {
                    return Err("no turn is waiting for a model call".into());
                };
                check_turn(*current, *turn)?;
                if self.compaction.is_some() {
                    return Err("a compaction is in progress".into());
                }
                match current_call {
                    None => {
                        if *call != self.model_calls_started + 1 {
                            return Err(format!(
                                "expected model call {}",
                                self.model_calls_started + 1
                            ));
                        }
                        self.model_calls_started = *call;
                        *current_call = Some(*call);
                    }
                    Some(c) if c == call => {}
                    Some(c) => return Err(format!("model call {c} is still open")),
                }
                if *attempt != *attempts + 1 {
                    return Err(format!("expected attempt {}", *attempts + 1));
                }
                *attempts = *attempt;
            }
            Event::ModelCallFailed { turn, call, .. } => {
                self.expect_open_call(*turn, *call)?;
                self.consecutive_model_failures = self.consecutive_model_failures.saturating_add(1);
            }
            Event::ModelCallFinished {
                turn,
                call,
                message,
                usage,
                cost_usd,
                ..
            } => {
                require_running(running)?;
                self.expect_open_call(*turn, *call)?;
                self.usage.add_call(usage.as_ref(), *cost_usd);
                if let Some(board) = &mut self.board {
                    board.charge(usage.as_ref(), *cost_usd);
                }
                if let (Some(counted), Some(usage)) = (self.open_call_counted.take(), usage) {
                    self.calibration = Some((counted, usage.prompt_tokens));
                }
                self.model_calls_finished += 1;
                self.calls_on_endpoint = self.calls_on_endpoint.saturating_add(1);
                self.consecutive_model_failures = 0;
                self.overflow_compactions = 0;
                self.push_history(seq, *turn, Message::Assistant(message.clone()));
                let after = self.reply_without_tools(*turn, message);
                self.phase = Phase::RunningTools {
                    turn: *turn,
                    remaining: message.tool_calls.clone(),
                    in_flight: None,
                    after,
                };
            }
            Event::ToolCallStarted {
                turn,
                call_id,
                name,
                arguments,
                effect,
            } => {
                require_running(running)?;
                let Phase::RunningTools {
                    turn: current,
                    remaining,
                    in_flight,
                    ..
                } = &mut self.phase
                else {
                    return Err("no model answer is waiting for its tool calls".into());
                };
                check_turn(*current, *turn)?;
                if in_flight.is_some() {
                    return Err("another tool call is still running".into());
                }
                match remaining.first() {
                    Some(next)
                        if next.id == *call_id
                            && next.name == *name
                            && next.arguments == *arguments => {}
                    Some(next) => {
                        return Err(format!("the next tool call is {} ({})", next.id, next.name));
                    }
                    None => return Err(format!("tool call {call_id} was not requested")),
                }
                let call = remaining.remove(0);
                *in_flight = Some(InFlightTool {
                    call,
                    effect: *effect,
                });
            }
            Event::ToolCallFinished {
                turn,
                call_id,
                result,
                ..
            } => {
                let Phase::RunningTools {
                    turn: current,
                    in_flight,
                    ..
                } = &mut self.phase
                else {
                    return Err("no tool call is running".into());
                };
                check_turn(*current, *turn)?;
                let Some(flight) = in_flight.take_if(|f| f.call.id == *call_id) else {
                    return Err(format!("tool call {call_id} is not the one running"));
                };
                let after = if result.outcome == ToolOutcome::Success {
                    self.apply_tool_effect(&flight.call.name, &flight.call.arguments, result)
                } else if flight.call.name == FINISH_TOOL && self.is_planning() {
                    self.finish_while_planning()
                } else {
                    None
                };
                if let (Some(after), Phase::RunningTools { after: slot, .. }) =
                    (after, &mut self.phase)
                {
                    *slot = Some(after);
                }
                let turn = *turn;
                remember_call(
                    &mut self.recent_calls,
                    turn,
                    stable_hash(&[&flight.call.name, &flight.call.arguments]),
                    stable_hash(&[&format!("{:?}", result.outcome), &result.content]),
                );
                self.push_history(
                    seq,
                    turn,
                    Message::Tool {
                        call_id: flight.call.id,
                        name: flight.call.name,
                        content: result.content.clone(),
                    },
                );
            }
            Event::NoteAdded { text } => {
                match &mut self.phase {
                    Phase::Idle => {}
                    Phase::RunningTools {
                        in_flight: None,
                        after,
                        ..
                    } => match after.take() {
                        Some(AfterReply::RemindOpenItems { .. }) => {
                            self.endings.open_items_reminded = true;
                        }
                        Some(AfterReply::Nudge {
                            kind: NudgeKind::Planning,
                        }) => self.endings.planning_nudged = true,
                        // Journals written before endings were decided nudged every reply
                        // without a tool call, whatever it was.
                        Some(_) => self.endings.nudged = true,
                        None => {}
                    },
                    _ => return Err("a note cannot interrupt a model or tool call".into()),
                }
                self.push_history(
                    seq,
                    self.turns_started,
                    Message::User {
                        content: text.clone(),
                    },
                );
            }
            Event::CompactionStarted {
                turn,
                replaced,
                trigger,
                ..
            } => {
                require_running(running)?;
                match &self.phase {
                    Phase::AwaitingModel { turn: current, .. } => check_turn(*current, *turn)?,
                    _ => return Err("compaction happens only before a model call".into()),
                }
                if self.compaction.is_some() {
                    return Err("a compaction is already in progress".into());
                }
                if *replaced == 0 || *replaced as usize > self.history.len() {
                    return Err(format!(
                        "cannot replace {replaced} of {} history entries",
                        self.history.len()
                    ));
                }
                self.compaction = Some(PendingCompaction {
                    replaced: *replaced,
                    trigger: *trigger,
                    failures: 0,
                    overflows: 0,
                });
            }
            Event::CompactionFailed { class, .. } => {
                let Some(pending) = &mut self.compaction else {
                    return Err("no compaction is in progress".into());
                };
                pending.failures = pending.failures.saturating_add(1);
                if *class == ErrorClass::ContextOverflow {
                    pending.overflows = pending.overflows.saturating_add(1);
                }
                self.consecutive_model_failures = self.consecutive_model_failures.saturating_add(1);
            }
            Event::CompactionFinished {
                summary,
                replaced,
                first_seq,
                last_seq,
                usage,
                cost_usd,
                ..
            } => {
                require_running(running)?;
                let Some(pending) = self.compaction.take_if(|p| p.replaced == *replaced) else {
                    return Err(format!(
                        "no compaction of {replaced} entries is in progress"
                    ));
                };
                let count = pending.replaced as usize;
                let (first, last) = (self.history[0].seq, self.history[count - 1].seq);
                if (first, last) != (*first_seq, *last_seq) {
                    return Err(format!(
                        "the replaced entries span events {first}-{last}, not {first_seq}-{last_seq}"
                    ));
                }
                self.usage.add_call(usage.as_ref(), *cost_usd);
                if let Some(board) = &mut self.board {
                    board.charge(usage.as_ref(), *cost_usd);
                }
                self.consecutive_model_failures = 0;
                self.compactions += 1;
                if pending.trigger == CompactionTrigger::Overflow {
                    self.overflow_compactions += 1;
                }
                let kept = self.history.split_off(count);
                // Turn 0: the summary is older than every turn it kept, so the next compaction
                // replaces (and folds in) it.
                self.history = vec![HistoryEntry {
                    seq,
                    turn: 0,
                    message: Message::User {
                        content: summary_message(summary, first, last),
                    },
                }];
                self.history.extend(kept);
            }
            Event::BudgetWarning { resource, .. } => {
                require_running(running)?;
                if !self.budget_warned.contains(resource) {
                    self.budget_warned.push(*resource);
                }
            }
            Event::LoopDetected {
                pattern: LoopPattern::NoToolReplies,
                response: LoopResponse::Pause,
                ..
            } => {
                require_running(running)?;
                match &self.phase {
                    Phase::RunningTools {
                        after: Some(AfterReply::PauseLoop { .. }),
                        ..
                    } => {}
                    _ => return Err("no run of replies without tool calls is due to pause".into()),
                }
            }
            Event::LoopDetected {
                detail, response, ..
            } => {
                require_running(running)?;
                if self.phase != Phase::Idle {
                    return Err("loops are handled between turns".into());
                }
                self.recent_calls.clear();
                if *response == LoopResponse::Nudge {
                    self.loop_nudges += 1;
                    self.push_history(
                        seq,
                        self.turns_started,
                        Message::User {
                            content: loop_nudge(detail),
                        },
                    );
                }
            }
            Event::TurnFinished { turn } => {
                require_running(running)?;
                match &self.phase {
                    Phase::RunningTools {
                        turn: current,
                        remaining,
                        in_flight: None,
                        ..
                    } if remaining.is_empty() && current == turn => {}
                    _ => return Err(format!("turn {turn} still has work in progress")),
                }
                self.turns_finished = *turn;
                self.phase = Phase::Idle;
            }
            Event::PlanSet {
                tasks,
                final_check,
                source,
            } => {
                require_running(running)?;
                let planning = matches!(
                    &self.phase,
                    Phase::RunningTools { in_flight: Some(f), .. } if f.call.name == SUBMIT_PLAN_TOOL
                );
                // A person's plan may also come while a turn waits only to be finished (a run
                // paused for `no_plan`).
                let turn_done = matches!(
                    &self.phase,
                    Phase::RunningTools { remaining, in_flight: None, .. } if remaining.is_empty()
                );
                if self.phase != Phase::Idle
                    && !planning
                    && !(turn_done && *source == PlanSource::User)
                {
                    return Err("a plan is set between turns or by `submit_plan`".into());
                }
                // A person's plan replaces one no task has started on (`resume --plan`).
                if *source == PlanSource::User
                    && self.board.as_ref().is_some_and(|b| !b.any_started())
                {
                    let reviewed = self.board.as_ref().is_some_and(|b| b.plan_reviewed);
                    self.board = Some(TaskBoard {
                        plan_reviewed: reviewed,
                        ..TaskBoard::default()
                    });
                }
                let board = self.board.get_or_insert_with(TaskBoard::default);
                board.add_tasks(tasks, final_check.as_ref())?;
                if *source == PlanSource::Baton {
                    board.fix_rounds += 1;
                }
            }
            Event::TaskStarted { task, approach, .. } => {
                require_running(running)?;
                self.require_idle()?;
                let snapshot = self.snapshots.last().map(|s| s.snapshot.clone());
                self.board_mut()?.start_task(task, *approach, snapshot)?;
                // A fresh context: the task starts from its brief, not from earlier
                // conversations (they stay in the journal for `recall` and search).
                self.history.clear();
                self.plan.clear();
                self.recent_calls.clear();
                self.compaction = None;
                self.endings = EndingTrack {
                    planning_nudged: self.endings.planning_nudged,
                    ..EndingTrack::default()
                };
            }
            Event::CheckStarted {
                task,
                attempt,
                command,
            } => {
                require_running(running)?;
                self.require_idle()?;
                self.board_mut()?.check_started(OpenCheck {
                    task: task.clone(),
                    attempt: *attempt,
                    command: command.clone(),
                })?;
            }
            Event::CheckFinished {
                task,
                attempt,
                passed,
                exit_code,
                output,
                ..
            } => {
                require_running(running)?;
                let note = self.board_mut()?.check_finished(
                    task.as_ref(),
                    *attempt,
                    *passed,
                    *exit_code,
                    output,
                )?;
                if let Some(note) = note {
                    self.push_history(seq, self.turns_started, Message::User { content: note });
                }
                // The check's output is news: replies without tool calls count afresh.
                self.endings.no_tool_replies = 0;
                self.endings.nudged = false;
            }
            Event::TaskFinished { task, summary } => {
                require_running(running)?;
                self.board_mut()?.task_finished(task, summary)?;
            }
            Event::TaskFailed { task, reason } => {
                require_running(running)?;
                self.require_idle()?;
                self.board_mut()?
                    .task_ended(task, TaskStatus::Failed, reason)?;
            }
            Event::TaskSkipped { task, reason } => {
                require_running(running)?;
                self.board_mut()?
                    .task_ended(task, TaskStatus::Skipped, reason)?;
            }
            Event::RollbackStarted {
                task: Some(task),
                snapshot,
                reason,
            } => {
                require_running(running)?;
                self.require_idle()?;
                self.board_mut()?
                    .rollback_started(Some(task), snapshot, reason)?;
            }
            Event::RollbackFinished {
                task: Some(task),
                snapshot,
            } => {
                self.board_mut()?.rollback_finished(Some(task), snapshot)?;
            }
            // A person's rollback (`baton rollback`), journaled by the CLI holding the lease,
            // whatever the run was doing when it stopped.
            Event::RollbackStarted {
                task: None,
                snapshot,
                ..
            } => {
                if self.user_rollback.is_some() {
                    return Err("another rollback is in progress".into());
                }
                self.user_rollback = Some(snapshot.clone());
            }
            Event::RollbackFinished {
                task: None,
                snapshot,
            } => {
                if self.user_rollback.as_deref() != Some(snapshot.as_str()) {
                    return Err(format!("no rollback to {snapshot} is in progress"));
                }
                self.user_rollback = None;
                // Between turns the model is told; inside a turn a message would split a tool
                // call from its result, so the restored files speak for themselves.
                if self.phase == Phase::Idle {
                    self.push_history(
                        seq,
                        self.turns_started,
                        Message::User {
                            content: format!(
                                "A person restored the workspace to snapshot {}: files may \
                                 differ from what you saw before. Check before relying on them.",
                                snapshot.get(..12).unwrap_or(snapshot)
                            ),
                        },
                    );
                }
            }
            Event::TaskDelegated {
                task,
                child_run,
                base_snapshot,
            } => {
                require_running(running)?;
                self.require_idle()?;
                self.board_mut()?.delegate(task, child_run, base_snapshot)?;
            }
            Event::TaskReturned {
                task,
                child_run,
                result,
                cost_usd,
                unpriced_calls,
                prompt_tokens,
                completion_tokens,
                turns,
            } => {
                // A record of what a child run did: also after this run paused (say, for a
                // failed task) while other children were still working.
                let tokens = prompt_tokens.saturating_add(*completion_tokens);
                self.board_mut()?
                    .returned(task, child_run, result, tokens, *cost_usd, *turns)?;
                // The run's budgets cover the work of its parallel tasks too.
                self.usage.prompt_tokens = self.usage.prompt_tokens.saturating_add(*prompt_tokens);
                self.usage.completion_tokens = self
                    .usage
                    .completion_tokens
                    .saturating_add(*completion_tokens);
                if cost_usd.is_finite() {
                    self.usage.cost_usd += cost_usd;
                }
                self.usage.unpriced_calls =
                    self.usage.unpriced_calls.saturating_add(*unpriced_calls);
            }
            Event::MergeStarted { task, snapshot } => {
                require_running(running)?;
                self.require_idle()?;
                self.board_mut()?.merge_started(task, snapshot)?;
                // The merge commit is the state later tasks start from (and roll back to).
                self.snapshots.push(SnapshotRecord {
                    seq,
                    snapshot: snapshot.clone(),
                    reason: crate::task::SnapshotReason::TaskMerged,
                    task: Some(task.clone()),
                });
            }
            Event::MergeConflicted {
                task,
                conflicts,
                follow_up,
            } => {
                require_running(running)?;
                self.require_idle()?;
                self.board_mut()?
                    .merge_conflicted(task, conflicts, follow_up)?;
            }
            // A record: the commit already exists in the shadow repository when it is journaled.
            Event::SnapshotTaken {
                snapshot,
                reason,
                task,
            } => self.snapshots.push(SnapshotRecord {
                seq,
                snapshot: snapshot.clone(),
                reason: *reason,
                task: task.clone(),
            }),
            Event::TextEndAccepted { turn, summary } => {
                require_running(running)?;
                match &mut self.phase {
                    Phase::RunningTools {
                        turn: current,
                        in_flight: None,
                        after,
                        ..
                    } if *current == *turn && matches!(after, Some(AfterReply::Claim { .. })) => {
                        *after = None;
                    }
                    _ => return Err("no text reply is waiting to be accepted".into()),
                }
                self.endings.no_tool_replies = 0;
                self.endings.nudged = false;
                self.claim_end(summary, FinishedBy::Text);
            }
            Event::RunPaused { reason, detail } => {
                // The pause an ending decided is carried out by this event (another pause — a
                // Ctrl-C, say — leaves it due, so the resumed run still makes it).
                if let Phase::RunningTools { after, .. } = &mut self.phase {
                    after.take_if(|a| {
                        matches!(
                            (a, reason),
                            (AfterReply::PauseForPerson, PauseReason::TextReply)
                                | (AfterReply::PauseLoop { .. }, PauseReason::Loop)
                                | (AfterReply::PauseNoPlan, PauseReason::NoPlan)
                        )
                    });
                }
                if *reason == PauseReason::PlanReview
                    && let Some(board) = &mut self.board
                {
                    board.plan_reviewed = true;
                }
                self.pause = Some((*reason, detail.clone()));
            }
            Event::RunFinished { summary, .. } => {
                self.finish_summary = Some(summary.clone());
            }
            Event::RunFailed { error } => {
                self.failure = Some(error.clone());
            }
        }
        Ok(())
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
