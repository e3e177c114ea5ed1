use serde::{Deserialize, Serialize};

use crate::governance::{Budget, LoopPolicy};

/// Everything a run needs to be resumed the same way, recorded in its first event.
/// Secrets are deliberately absent: keys are read from the environment on every start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    pub model: ModelSettings,
    pub limits: Limits,
    /// Ceilings that pause the run; absent when none is set.
    #[serde(default, skip_serializing_if = "Budget::is_unlimited")]
    pub budget: Budget,
    #[serde(default)]
    pub loop_detection: LoopPolicy,
    /// How the prompt is kept inside the model's context window. Runs journaled before this
    /// setting existed read as the default profile.
    #[serde(default)]
    pub context: ContextSettings,
    /// How a run with a task graph verifies, retries and plans. Runs journaled before task
    /// graphs existed read as the defaults (and have no plan).
    #[serde(default)]
    pub tasks: TaskSettings,
    /// What a reply without a tool call means, and whether open todo items are named before
    /// an ending. Runs journaled before this setting existed read as
    /// [`EndingPolicy::journaled_before`].
    #[serde(default = "EndingPolicy::journaled_before")]
    pub endings: EndingPolicy,
}

/// The task-graph policy of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskSettings {
    pub planning: Planning,
    /// Failed checks a task may fix within one approach before it is rolled back.
    pub fix_attempts: u32,
    /// Approaches per task (each after a rollback) before the task fails.
    pub approaches: u32,
    /// Rounds of fix tasks after a failed final check.
    pub final_fix_rounds: u32,
    pub on_failure: OnTaskFailure,
    /// Ceilings for each task (USD, tokens, running time, over all its approaches): a task
    /// that reaches one pauses the run (`budget`), and `resume --task-budget-*` /
    /// `--task-max-time` raise it.
    #[serde(default, skip_serializing_if = "Budget::is_unlimited")]
    pub budget: Budget,
    /// Turns per task; a task that reaches it pauses the run (`max_turns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Independent tasks worked on at once, each in its own worktree (`--parallel`).
    #[serde(default = "one")]
    pub parallel: u32,
}

fn one() -> u32 {
    1
}

impl Default for TaskSettings {
    fn default() -> Self {
        TaskSettings {
            planning: Planning::None,
            fix_attempts: 3,
            approaches: 2,
            final_fix_rounds: 2,
            on_failure: OnTaskFailure::Continue,
            budget: Budget::default(),
            max_turns: None,
            parallel: 1,
        }
    }
}

/// Where a run's task graph comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Planning {
    /// No task graph unless one is journaled (`--plan FILE`): the goal is one conversation.
    #[default]
    None,
    /// The model first splits the goal into tasks with `submit_plan`.
    Planner,
    /// Like `planner`, then pause (`plan_review`) so a person can read and edit the plan.
    PlannerThenReview,
}

/// What a run does when a task fails for good.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnTaskFailure {
    /// Go on with the tasks that do not depend on it, then end with a report (run failed).
    #[default]
    Continue,
    /// Pause (`task_failed`) for a person; `baton resume` goes on as `continue` would.
    Pause,
}

/// The context policy of a run (its "compensation layers"): chosen from the model's profile at
/// start, recorded with the run so that replay rebuilds the same prompts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextSettings {
    /// The model's context window, in tokens.
    pub window_tokens: u64,
    /// Compaction starts when the estimated prompt passes this share of the window.
    pub compact_at_percent: u8,
    pub masking: Masking,
    pub compaction: Compaction,
}

impl Default for ContextSettings {
    fn default() -> Self {
        ContextSettings {
            window_tokens: 32_768,
            compact_at_percent: 80,
            masking: Masking::default(),
            compaction: Compaction::default(),
        }
    }
}

impl ContextSettings {
    /// The estimated prompt size, in tokens, above which the run compacts.
    pub fn compaction_threshold(&self) -> u64 {
        self.window_tokens
            .saturating_mul(u64::from(self.compact_at_percent.min(100)))
            / 100
    }
}

/// Observation masking: old tool outputs are replaced in the prompt by a placeholder naming
/// their handle. The journal keeps them whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Masking {
    Off,
    /// Outputs of turns older than the last `keep_turns` are masked, `batch_turns` turns at a
    /// time (so the prompt prefix changes once per batch, not on every turn). Outputs shorter
    /// than `min_bytes` stay: their placeholder would save nothing.
    OlderThan {
        keep_turns: u32,
        batch_turns: u32,
        min_bytes: u32,
    },
}

impl Default for Masking {
    fn default() -> Self {
        Masking::OlderThan {
            keep_turns: 4,
            batch_turns: 12,
            min_bytes: 400,
        }
    }
}

/// Whether the run summarises old history when the prompt grows past the threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Compaction {
    /// Never: a run that outgrows the window pauses with `context_overflow`.
    Off,
    /// The model writes a handoff summary that replaces all but the last `keep_recent_turns`.
    Summarize { keep_recent_turns: u32 },
    /// The provider compacts on its side (OpenAI Responses `context_management`) once the
    /// prompt passes the compaction threshold; its opaque compaction item is journaled and sent
    /// back. baton writes no summary itself (an overflow pauses, as with `off`).
    Provider,
}

impl Default for Compaction {
    fn default() -> Self {
        Compaction::Summarize {
            keep_recent_turns: 2,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelSettings {
    pub provider: ProviderKind,
    pub base_url: String,
    pub model: String,
    pub response_mode: ResponseMode,
    /// Whether the model may answer without a tool call. Runs journaled before this setting
    /// existed read as `auto`.
    #[serde(default, skip_serializing_if = "ToolChoice::is_auto")]
    pub tool_choice: ToolChoice,
    /// Reasoning asked for and carried through the history; runs journaled before this setting
    /// existed read as the defaults.
    #[serde(default, skip_serializing_if = "ReasoningSettings::is_default")]
    pub reasoning: ReasoningSettings,
    /// Which OpenAI wire an OpenAI-compatible provider speaks; runs journaled before this
    /// setting existed read as `chat`.
    #[serde(default, skip_serializing_if = "WireApi::is_chat")]
    pub wire_api: WireApi,
}

/// The two OpenAI wires.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireApi {
    /// Chat Completions (`/chat/completions`): OpenAI and every server that copies it.
    #[default]
    Chat,
    /// Responses (`/responses`): the only wire of the `gpt-5*-codex` models.
    Responses,
}

impl WireApi {
    pub fn is_chat(&self) -> bool {
        *self == WireApi::Chat
    }
}

/// How a model is asked to reason and to answer, and what of its earlier reasoning goes back to
/// the server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasoningSettings {
    #[serde(default)]
    pub history: ReasoningHistory,
    /// The effort word as the provider documents it (`low`, `medium`, `high`, …): Chat
    /// Completions `reasoning_effort`, Anthropic `output_config.effort`, Responses
    /// `reasoning.effort`. Absent: not sent (the server's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<String>,
    /// The thinking switch: Chat Completions `thinking: {"type": …}` (DeepSeek, GLM), Anthropic
    /// `thinking`. Absent: not sent (the server's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Thinking>,
    /// Anthropic `thinking.budget_tokens` with `thinking = "enabled"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// How much the model writes (`low`, `medium`, `high`): Responses `text.verbosity` (GPT-5
    /// family). Absent: not sent (the server's default, `medium`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verbosity: Option<Verbosity>,
}

impl ReasoningSettings {
    pub fn is_default(&self) -> bool {
        *self == ReasoningSettings::default()
    }
}

/// What becomes of the model's reasoning in later requests of a Chat Completions run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningHistory {
    /// Sent back with every assistant message that carries it — what DeepSeek, Kimi and GLM
    /// require in a tool loop (a 400 otherwise); they ignore it where it is not needed.
    #[default]
    Preserve,
    /// Never sent back, for servers that reject the field.
    Drop,
}

/// How much the model writes in its answers (OpenAI Responses `text.verbosity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verbosity {
    Low,
    Medium,
    High,
}

impl Verbosity {
    /// The word the API takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Verbosity::Low => "low",
            Verbosity::Medium => "medium",
            Verbosity::High => "high",
        }
    }
}

/// Whether and how the model thinks before answering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Thinking {
    /// The model decides how much to think (Anthropic `adaptive`; elsewhere `enabled`).
    Adaptive,
    /// Thinking on (Anthropic: with `thinking_budget` tokens).
    Enabled,
    /// Thinking off.
    Off,
}

/// What the model is asked to do about tools on each call.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides (the servers' default; nothing is sent).
    #[default]
    Auto,
    /// The model must call some tool.
    Required,
    /// The model must call this tool (useful to drive small models, and in tests).
    Function(String),
    /// The model must answer in text (compaction summaries: the tools stay in the request so
    /// that the provider's prompt cache still matches its prefix).
    None,
}

impl ToolChoice {
    /// `auto`, `required`, or a tool name.
    pub fn parse(text: &str) -> ToolChoice {
        match text.trim() {
            "" | "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            "none" => ToolChoice::None,
            name => ToolChoice::Function(name.to_string()),
        }
    }

    pub fn is_auto(&self) -> bool {
        *self == ToolChoice::Auto
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// Chat Completions: OpenAI and every server that copies its API.
    OpenAiCompatible,
    /// Anthropic's Messages API, spoken natively.
    Anthropic,
}

/// Whether to ask the server for a streamed (SSE) or a whole response.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseMode {
    #[default]
    Streaming,
    Whole,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Turns (model call + its tool calls) after which the run pauses.
    pub max_turns: u32,
    /// Wall-clock limit of one shell command, in seconds, when the model gives none.
    pub shell_timeout_secs: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_turns: 200,
            shell_timeout_secs: 120,
        }
    }
}

/// What a text reply (after its nudge) means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnTextReply {
    /// The model is done: the text is the summary, exactly as if it had called `finish`.
    #[default]
    Finish,
    /// Keep nudging the model to use tools (bounded by the loop rule).
    Nudge,
    /// Pause the run (`text_reply`) so a person can decide.
    Pause,
}

impl OnTextReply {
    pub fn as_str(self) -> &'static str {
        match self {
            OnTextReply::Finish => "finish",
            OnTextReply::Nudge => "nudge",
            OnTextReply::Pause => "pause",
        }
    }

    pub fn parse(text: &str) -> Option<OnTextReply> {
        match text.trim() {
            "finish" => Some(OnTextReply::Finish),
            "nudge" => Some(OnTextReply::Nudge),
            "pause" => Some(OnTextReply::Pause),
            _ => None,
        }
    }
}

/// Whether an ending with open todo items is answered with the list once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpenItems {
    /// Endings take effect at once (runs journaled before this rule existed: their journals
    /// were written without the reminder, so replaying them must not expect one).
    Ignore,
    #[default]
    RemindOnce,
}

/// The ending policy of a run, recorded with its settings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndingPolicy {
    #[serde(default)]
    pub on_text_reply: OnTextReply,
    #[serde(default)]
    pub open_items: OpenItems,
}

impl EndingPolicy {
    /// What a run journaled before endings were configurable reads as: text endings as now,
    /// no open-items reminder (its journal has none).
    pub fn journaled_before() -> EndingPolicy {
        EndingPolicy {
            on_text_reply: OnTextReply::Finish,
            open_items: OpenItems::Ignore,
        }
    }
}
