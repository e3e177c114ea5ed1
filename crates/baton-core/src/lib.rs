//! Domain types of baton: journal events, messages, settings and the pure run-state reducer.
//!
//! Nothing here does IO. A run's state is `events.fold(RunState::default(), reduce)`, so resume is
//! replay and replay is testable without a database, a model or a workspace.

pub mod board;
pub mod ending;
mod event;
pub mod governance;
pub mod handle;
mod ids;
pub mod memory;
mod message;
mod next;
pub mod observe;
mod redact;
mod request;
mod settings;
mod state;
pub mod task;

pub use ending::{EndingPolicy, FinishedBy, OnTextReply};
pub use event::{
    CompactionTrigger, DelegatedResult, ErrorClass, Event, EventRecord, LoopResponse, PauseReason,
    RequestMetrics, RunStatus, running_time,
};
pub use ids::RunId;
pub use message::{
    AssistantMessage, Message, Reasoning, ReasoningField, ToolCall, ToolEffect, ToolOutcome,
    ToolResult, ToolSpec, Usage,
};
pub use next::{NextAction, next_action};
pub use observe::{Fanout, RunObserver, StreamDelta};
pub use redact::Redactor;
pub use request::{ModelReply, ModelRequest};
pub use settings::{
    Compaction, ContextSettings, Limits, Masking, ModelSettings, OnTaskFailure, Planning,
    ProviderKind, ReasoningHistory, ReasoningSettings, ResponseMode, RunSettings, TaskSettings,
    Thinking, ToolChoice, Verbosity, WireApi,
};
pub use state::{
    EmbeddingTotals, HistoryEntry, PendingCompaction, Phase, ReplayError, RepoMap, RunState,
    STATE_FORMAT, SnapshotRecord, UsageTotals, replay, summary_message,
};

/// Name of the tool the model calls to end a run. The reducer treats its successful completion
/// as the run's finish request, so the name is part of the domain, not only of the tool crate.
pub const FINISH_TOOL: &str = "finish";

/// Name of the planner's tool: its validated plan becomes the run's task graph (`plan_set`).
pub const SUBMIT_PLAN_TOOL: &str = "submit_plan";

/// Name of the shell tool: a planning run offers it in the `read-only` sandbox mode.
pub const SHELL_TOOL: &str = "shell";

/// Whether a planning run (a planner with no plan yet) offers this tool: read-only tools, the
/// shell (run in the `read-only` sandbox mode) and `submit_plan` — never `finish` or a tool that
/// changes the workspace, so a planning run cannot do the work before it is planned.
pub fn offered_while_planning(name: &str, effect: ToolEffect) -> bool {
    match name {
        SUBMIT_PLAN_TOOL | SHELL_TOOL => true,
        FINISH_TOOL => false,
        _ => effect == ToolEffect::ReadOnly,
    }
}
