use serde::{Deserialize, Serialize};

/// Everything a run needs to be resumed the same way, recorded in its first event.
/// Secrets are deliberately absent: keys are read from the environment on every start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSettings {
    pub model: ModelSettings,
    pub limits: Limits,
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
}

impl ToolChoice {
    /// `auto`, `required`, or a tool name.
    pub fn parse(text: &str) -> ToolChoice {
        match text.trim() {
            "" | "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
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
