use serde::{Deserialize, Serialize};

use crate::ending::FinishedBy;
use crate::governance::{BudgetResource, LoopPattern};
use crate::message::{AssistantMessage, ToolResult, ToolSpec, Usage};
use crate::settings::RunSettings;
use crate::task::{PlanSource, SnapshotReason, TaskSpec};
use crate::{RunId, ToolEffect};

/// One journal entry: an event with its position in the run and the time it was recorded.
/// `seq` starts at 0 and has no gaps; the store refuses anything else.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    pub run_id: RunId,
    pub seq: u64,
    pub at: jiff::Timestamp,
    #[serde(flatten)]
    pub event: Event,
}

/// Everything that happens to a run. Intents (`*Started`) are journaled before their effect,
/// outcomes (`*Finished`, `*Failed`) right after it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    RunStarted {
        goal: String,
        workspace: String,
        settings: RunSettings,
        system_prompt: String,
        /// Contents of the workspace's AGENTS.md at start; captured so that a resumed run builds
        /// byte-identical prompts even if the file changes.
        project_instructions: Option<String>,
        tools: Vec<ToolSpec>,
    },
    /// A process took the run over again; `settings` are the effective ones from now on.
    RunResumed {
        settings: RunSettings,
    },
    /// The supervisor restarted the agent process after it died (a signal, a panic, an
    /// unexpected exit code); the next process resumes by replay. `attempt` counts from 1.
    SupervisorRestarted {
        attempt: u32,
        /// What happened to the previous process, e.g. "killed by signal 9 (SIGKILL)".
        cause: String,
        /// How long the supervisor waits before starting the next process.
        backoff_ms: u64,
    },
    TurnStarted {
        turn: u32,
    },
    ModelCallStarted {
        turn: u32,
        call: u32,
        attempt: u32,
        request_sha256: String,
        /// How the request sits in the context window; absent in runs journaled before these
        /// metrics existed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<RequestMetrics>,
    },
    ModelCallFailed {
        turn: u32,
        call: u32,
        attempt: u32,
        class: ErrorClass,
        message: String,
        /// Delay before the next attempt, if there will be one.
        retry_in_ms: Option<u64>,
    },
    ModelCallFinished {
        turn: u32,
        call: u32,
        message: AssistantMessage,
        /// What the server reported; `null` if it reported nothing.
        usage: Option<Usage>,
        /// USD, priced when the call finished; `null` when the model's price is unknown.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        finish_reason: Option<String>,
        /// Model name the server reported.
        served_model: Option<String>,
        duration_ms: u64,
    },
    ToolCallStarted {
        turn: u32,
        call_id: String,
        name: String,
        arguments: String,
        effect: ToolEffect,
    },
    ToolCallFinished {
        turn: u32,
        call_id: String,
        result: ToolResult,
        duration_ms: u64,
    },
    /// The prompt passed its threshold (or the server said it overflowed): the first
    /// `replaced` history entries are about to be summarised.
    CompactionStarted {
        turn: u32,
        replaced: u32,
        trigger: CompactionTrigger,
        estimated_prompt_tokens: u64,
    },
    CompactionFailed {
        turn: u32,
        attempt: u32,
        class: ErrorClass,
        message: String,
        retry_in_ms: Option<u64>,
    },
    /// The handoff summary that from now on stands for the replaced entries (journal
    /// sequence numbers `first_seq..=last_seq`; `recall` still reaches each of them).
    CompactionFinished {
        turn: u32,
        summary: String,
        replaced: u32,
        first_seq: u64,
        last_seq: u64,
        /// Oldest entries left out of the summary request because it overflowed too.
        left_out: u32,
        usage: Option<Usage>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        served_model: Option<String>,
        duration_ms: u64,
    },
    /// A configured MCP server did not start for this process of the run (at its start or a
    /// resume): its tools are missing, and their calls return errors, until a later resume
    /// starts it.
    McpServerFailed {
        server: String,
        error: String,
    },
    /// A configured MCP server started for this process of the run: its name and version from
    /// its handshake, and the tools it offers now (as the run names them).
    McpServerStarted {
        server: String,
        version: String,
        tools: Vec<String>,
    },
    /// The repo map placed in the model's brief (the workspace's most used definitions),
    /// rendered once when a run without a plan starts (`task` absent) or when a task starts.
    /// Journaled, so a resumed run shows the model byte-identical text.
    RepoMapRendered {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        map: String,
    },
    /// Embedding calls made for the run's code index since the last such event (searches'
    /// queries, and the background embedding of changed code), summed per embedder model. Their
    /// cost counts against the run's budget.
    EmbeddingsUsed {
        model: String,
        calls: u32,
        inputs: u64,
        input_tokens: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
    },
    /// A budget passed its warning share (once per budget and process).
    BudgetWarning {
        resource: BudgetResource,
        used: f64,
        limit: f64,
    },
    /// The agent is going in circles: first it is told (a note in its history), then the run
    /// pauses.
    LoopDetected {
        pattern: LoopPattern,
        detail: String,
        response: LoopResponse,
    },
    /// A message from the harness to the model (for example a nudge to use tools).
    NoteAdded {
        text: String,
    },
    TurnFinished {
        turn: u32,
    },
    /// The run's task graph (validated): from a plan file, the planner or baton's own
    /// follow-ups. A later `plan_set` adds tasks to the graph; it never removes any.
    PlanSet {
        source: PlanSource,
        tasks: Vec<TaskSpec>,
        /// The run-level check after all tasks; absent: none, or keep the current one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        final_check: Option<String>,
    },
    /// Work on a task begins in a fresh context. `approach` counts from 1 and grows after a
    /// rollback; `attempt` counts fix attempts within an approach.
    TaskStarted {
        task: String,
        approach: u32,
        attempt: u32,
    },
    /// The agent said the task is done: its acceptance check runs (journaled before it runs).
    /// `task` is absent for the run-level final check.
    CheckStarted {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        attempt: u32,
        command: String,
    },
    CheckFinished {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        attempt: u32,
        passed: bool,
        /// `null` when the command was killed (timeout) or could not start.
        exit_code: Option<i32>,
        /// Combined stdout/stderr, capped (head and tail kept).
        output: String,
        duration_ms: u64,
    },
    /// The task's check passed; `summary` is the agent's account of the work, handed to later
    /// tasks.
    TaskFinished {
        task: String,
        summary: String,
    },
    /// The task used up its approaches; tasks depending on it are skipped.
    TaskFailed {
        task: String,
        reason: String,
    },
    TaskSkipped {
        task: String,
        reason: String,
    },
    /// `--parallel`: the task is worked on by run `child_run` in a worktree made from
    /// `base_snapshot` (under `.baton/worktrees/CHILD_RUN`), at the same time as others.
    TaskDelegated {
        task: String,
        child_run: String,
        base_snapshot: String,
    },
    /// The child run of a delegated task ended; what it cost is added to this run's.
    TaskReturned {
        task: String,
        child_run: String,
        result: DelegatedResult,
        cost_usd: f64,
        /// The child's model calls of unknown cost (`cost_usd` is then a lower bound).
        #[serde(default)]
        unpriced_calls: u32,
        prompt_tokens: u64,
        completion_tokens: u64,
        turns: u32,
    },
    /// A returned task's work merges into the workspace: `snapshot` is the merge commit
    /// (already in the shadow repository); the workspace is being made that snapshot (redone on
    /// resume). `task_finished` follows once it is.
    MergeStarted {
        task: String,
        snapshot: String,
    },
    /// Merging a returned task's work conflicted with work merged before it: the workspace is
    /// unchanged, and `follow_up` (a new task, which the task's dependents now wait for too)
    /// redoes the change on the merged workspace.
    MergeConflicted {
        task: String,
        conflicts: Vec<String>,
        follow_up: TaskSpec,
    },
    /// A snapshot of the workspace was committed to the run's shadow git repository.
    SnapshotTaken {
        snapshot: String,
        reason: SnapshotReason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
    },
    /// The workspace is being restored to `snapshot` (journaled before the restore, which is
    /// redone on resume if the process dies during it).
    /// `task` is absent for a rollback a person asked for (`baton rollback`).
    RollbackStarted {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        snapshot: String,
        /// Why: the failed approach (as the next approach is told), or the person's request.
        reason: String,
    },
    RollbackFinished {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task: Option<String>,
        snapshot: String,
    },
    /// The model's plain-text reply (after its nudge) is taken as its claim that it is done,
    /// exactly as if it had called `finish` with `summary`: inside a task the task's check runs,
    /// otherwise the run finishes (`run_finished` with `finished_by = "text"`).
    TextEndAccepted {
        turn: u32,
        summary: String,
    },
    RunPaused {
        reason: PauseReason,
        detail: String,
    },
    RunFinished {
        summary: String,
        /// How the model ended: its `finish` tool or a plain-text reply; absent when the run
        /// ended by its task graph (or was journaled before this field existed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        finished_by: Option<FinishedBy>,
    },
    RunFailed {
        error: String,
    },
}

/// Milliseconds of running time an event at `at` adds: the time since the previous event
/// `last`, if the run was running in between and this event is not a process taking it over
/// (downtime before a resume does not count). The reducer and every read model count time
/// with this one rule, so `status`, `ls`, the dashboard and the wall-time budget agree.
pub fn running_time(
    event: &Event,
    last: Option<jiff::Timestamp>,
    at: jiff::Timestamp,
    was_running: bool,
) -> u64 {
    let restart = matches!(event, Event::RunStarted { .. } | Event::RunResumed { .. });
    match (restart, was_running, last) {
        // A clock that went backwards adds nothing rather than subtracting.
        (false, true, Some(last)) => at
            .as_millisecond()
            .saturating_sub(last.as_millisecond())
            .max(0) as u64,
        _ => 0,
    }
}

impl Event {
    /// The snake_case name used as `type` in the journal and the JSONL stream.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::RunStarted { .. } => "run_started",
            Event::RunResumed { .. } => "run_resumed",
            Event::SupervisorRestarted { .. } => "supervisor_restarted",
            Event::TurnStarted { .. } => "turn_started",
            Event::ModelCallStarted { .. } => "model_call_started",
            Event::ModelCallFailed { .. } => "model_call_failed",
            Event::ModelCallFinished { .. } => "model_call_finished",
            Event::ToolCallStarted { .. } => "tool_call_started",
            Event::ToolCallFinished { .. } => "tool_call_finished",
            Event::CompactionStarted { .. } => "compaction_started",
            Event::CompactionFailed { .. } => "compaction_failed",
            Event::CompactionFinished { .. } => "compaction_finished",
            Event::BudgetWarning { .. } => "budget_warning",
            Event::McpServerFailed { .. } => "mcp_server_failed",
            Event::McpServerStarted { .. } => "mcp_server_started",
            Event::RepoMapRendered { .. } => "repo_map_rendered",
            Event::EmbeddingsUsed { .. } => "embeddings_used",
            Event::LoopDetected { .. } => "loop_detected",
            Event::NoteAdded { .. } => "note_added",
            Event::TurnFinished { .. } => "turn_finished",
            Event::PlanSet { .. } => "plan_set",
            Event::TaskStarted { .. } => "task_started",
            Event::CheckStarted { .. } => "check_started",
            Event::CheckFinished { .. } => "check_finished",
            Event::TaskFinished { .. } => "task_finished",
            Event::TaskFailed { .. } => "task_failed",
            Event::TaskSkipped { .. } => "task_skipped",
            Event::TaskDelegated { .. } => "task_delegated",
            Event::TaskReturned { .. } => "task_returned",
            Event::MergeStarted { .. } => "merge_started",
            Event::MergeConflicted { .. } => "merge_conflicted",
            Event::SnapshotTaken { .. } => "snapshot_taken",
            Event::RollbackStarted { .. } => "rollback_started",
            Event::RollbackFinished { .. } => "rollback_finished",
            Event::TextEndAccepted { .. } => "text_end_accepted",
            Event::RunPaused { .. } => "run_paused",
            Event::RunFinished { .. } => "run_finished",
            Event::RunFailed { .. } => "run_failed",
        }
    }

    /// The run status this event moves to, if it changes it.
    pub fn status_change(&self) -> Option<RunStatus> {
        match self {
            Event::RunStarted { .. } | Event::RunResumed { .. } => Some(RunStatus::Running),
            Event::RunPaused { .. } => Some(RunStatus::Paused),
            Event::RunFinished { .. } => Some(RunStatus::Finished),
            Event::RunFailed { .. } => Some(RunStatus::Failed),
            _ => None,
        }
    }
}

/// How the child run of a delegated task ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum DelegatedResult {
    /// Its check passed in the worktree; `snapshot` holds the worktree's final state.
    Verified { summary: String, snapshot: String },
    /// It used up its approaches (or its run failed).
    Failed { reason: String },
}

/// Why a compaction started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionTrigger {
    /// The estimated prompt passed the profile's threshold.
    Threshold,
    /// The server rejected the request as too long.
    Overflow,
}

/// Context metrics of one model request, journaled with the call.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestMetrics {
    /// baton's estimate of the prompt's tokens (calibrated by the previous call's reported
    /// usage where no exact tokenizer is known).
    pub estimated_prompt_tokens: u64,
    /// The local tokenizer's count, before calibration.
    pub counted_prompt_tokens: u64,
    pub window_tokens: u64,
    /// Share of this request's prompt identical to the start of the previous request (what a
    /// provider's prompt cache can reuse); absent for the first request of a process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_stability: Option<f64>,
    /// Tool outputs shown as placeholders in this request.
    pub masked_outputs: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    #[default]
    Created,
    Running,
    Paused,
    Finished,
    Failed,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Created => "created",
            RunStatus::Running => "running",
            RunStatus::Paused => "paused",
            RunStatus::Finished => "finished",
            RunStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<RunStatus> {
        Some(match s {
            "created" => RunStatus::Created,
            "running" => RunStatus::Running,
            "paused" => RunStatus::Paused,
            "finished" => RunStatus::Finished,
            "failed" => RunStatus::Failed,
            _ => return None,
        })
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, RunStatus::Finished | RunStatus::Failed)
    }
}

/// Why a run stopped without finishing. Every pause is resumable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PauseReason {
    MaxTurns,
    ModelUnavailable,
    ModelAuth,
    /// The server refused the request as invalid (wrong model name, unsupported parameter):
    /// fixable by resuming with other settings, so never a terminal failure.
    ModelRejected,
    ContextOverflow,
    Interrupted,
    /// A budget (USD, tokens, running time) is used up; resume with a raised one.
    Budget,
    /// The loop detector saw the agent repeat itself after it had been told.
    Loop,
    /// The execution policy says a command needs a person's approval (`ask = "pause"`).
    NeedsApproval,
    /// `--plan-only`: the plan is written for a person to review.
    PlanReview,
    /// A task failed and the run is set to wait for a person rather than go on without it.
    TaskFailed,
    /// A parallel task's worktree could not be made, snapshotted or restored (disk full, git
    /// failing): fix the cause and resume.
    Workspace,
    /// `--on-text-reply pause`: the model ended with a plain-text reply; a person decides.
    TextReply,
    /// A planning run's model replied without a plan after being told to submit one.
    NoPlan,
    /// The first model call of a run could not connect at all (refused, unknown host, TLS):
    /// almost always a wrong base URL or a server that is not running.
    Unreachable,
}

impl PauseReason {
    /// The name used in the journal, the event stream and `--json` output.
    pub fn as_str(self) -> &'static str {
        match self {
            PauseReason::MaxTurns => "max_turns",
            PauseReason::ModelUnavailable => "model_unavailable",
            PauseReason::ModelAuth => "model_auth",
            PauseReason::ModelRejected => "model_rejected",
            PauseReason::ContextOverflow => "context_overflow",
            PauseReason::Interrupted => "interrupted",
            PauseReason::Budget => "budget",
            PauseReason::Loop => "loop",
            PauseReason::NeedsApproval => "needs_approval",
            PauseReason::PlanReview => "plan_review",
            PauseReason::TaskFailed => "task_failed",
            PauseReason::Workspace => "workspace",
            PauseReason::TextReply => "text_reply",
            PauseReason::NoPlan => "no_plan",
            PauseReason::Unreachable => "unreachable",
        }
    }

    /// Whether a person must decide or fix something before the run can go on (a key, a
    /// model name, an approval, a plan, a failed task, the workspace), as opposed to a limit
    /// being reached (turns, budget, time, the context, a loop) or an interruption, which a
    /// plain `resume` (perhaps with a raised limit) continues.
    pub fn needs_person(self) -> bool {
        match self {
            PauseReason::ModelAuth
            | PauseReason::ModelRejected
            | PauseReason::NeedsApproval
            | PauseReason::PlanReview
            | PauseReason::TaskFailed
            | PauseReason::Workspace
            | PauseReason::TextReply
            | PauseReason::NoPlan
            | PauseReason::Unreachable => true,
            PauseReason::MaxTurns
            | PauseReason::ModelUnavailable
            | PauseReason::ContextOverflow
            | PauseReason::Interrupted
            | PauseReason::Budget
            | PauseReason::Loop => false,
        }
    }
}

/// What the run does about a detected loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopResponse {
    Nudge,
    Pause,
}

/// How a failed model call is classified. Shared by all providers so that retry and pause
/// policy live in one place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    RateLimited,
    Overloaded,
    Transient,
    ContextOverflow,
    Auth,
    InvalidRequest,
    QuotaExhausted,
    /// The server answered 2xx with something we could not understand.
    BadResponse,
    /// No connection could be made: refused, unknown host, TLS handshake failed.
    Unreachable,
}

impl ErrorClass {
    /// Whether the same request may succeed if sent again later.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorClass::RateLimited
                | ErrorClass::Overloaded
                | ErrorClass::Transient
                | ErrorClass::BadResponse
                | ErrorClass::Unreachable
        )
    }
}
