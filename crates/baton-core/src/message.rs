use serde::{Deserialize, Serialize};

/// One message of the conversation the model sees, in provider-neutral form.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant(AssistantMessage),
    Tool {
        call_id: String,
        name: String,
        content: String,
    },
}

/// What the model answered: its reasoning (when the server shows any), optional text and the
/// tool calls it asked for, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssistantMessage {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The model's reasoning, in the order it came, each part exactly as the server sent it:
    /// several APIs require it back in later requests (DeepSeek, Kimi and GLM `reasoning_content`
    /// in a tool loop; Anthropic thinking blocks with their signatures; OpenAI Responses
    /// reasoning items), so it is journaled verbatim and a resumed run sends the same bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<Reasoning>,
}

/// One part of a model's reasoning, in the form of the wire it came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Reasoning {
    /// Chat Completions reasoning text: `reasoning_content` (DeepSeek, Kimi, GLM, older vLLM) or
    /// `reasoning` (newer vLLM, OpenRouter, Ollama), named by `field` so it goes back the same.
    Text {
        text: String,
        #[serde(default)]
        field: ReasoningField,
    },
    /// An Anthropic `thinking` block: its text and the signature the API checks when it is
    /// sent back.
    Thinking { thinking: String, signature: String },
    /// An Anthropic `redacted_thinking` block: encrypted; returned as it came.
    RedactedThinking { data: String },
    /// An OpenAI Responses output item that is not text or a call (`reasoning`, `compaction`):
    /// the item's JSON text exactly as the server sent it, and its readable summary (if any).
    Item {
        json: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        summary: String,
    },
    /// An Anthropic `compaction` block (server-side compaction): the summary that replaces
    /// the history before it, and its opaque metadata, both returned verbatim. A `None`
    /// content is a compaction that failed, which the API treats as no block.
    Compaction {
        content: Option<String>,
        encrypted_content: Option<String>,
    },
}

/// The message field Chat Completions reasoning text came in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningField {
    #[default]
    ReasoningContent,
    Reasoning,
}

impl Reasoning {
    /// What a person can read of it (empty for encrypted reasoning).
    pub fn readable(&self) -> &str {
        match self {
            Reasoning::Text { text, .. } => text,
            Reasoning::Thinking { thinking, .. } => thinking,
            Reasoning::RedactedThinking { .. } => "",
            Reasoning::Item { summary, .. } => summary,
            Reasoning::Compaction { content, .. } => content.as_deref().unwrap_or_default(),
        }
    }
}

impl AssistantMessage {
    /// The readable reasoning of all parts, joined by blank lines.
    pub fn reasoning_text(&self) -> String {
        self.reasoning
            .iter()
            .map(Reasoning::readable)
            .filter(|t| !t.trim().is_empty())
            .collect::<Vec<_>>()
            .join("\n\n")
    }
}

/// A tool call as the model sent it. `arguments` is kept as the raw text the model produced:
/// it may not be valid JSON, and that is the tool's error to report, not the journal's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A tool as offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: serde_json::Value,
    pub effect: ToolEffect,
}

/// Whether running a tool can change the workspace. Decides what resume does with a call that
/// started but has no recorded result: read-only calls are re-run, mutating ones are not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolEffect {
    ReadOnly,
    Mutating,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolOutcome {
    Success,
    /// The tool ran (or refused to) and reports an error the model should see.
    Error,
    /// The process died while the call ran; its effect may be partial.
    Interrupted,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    pub outcome: ToolOutcome,
    pub content: String,
    /// Exit code, for tools that run a process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

impl ToolResult {
    pub fn success(content: impl Into<String>) -> Self {
        ToolResult {
            outcome: ToolOutcome::Success,
            content: content.into(),
            exit_code: None,
        }
    }

    pub fn error(content: impl Into<String>) -> Self {
        ToolResult {
            outcome: ToolOutcome::Error,
            content: content.into(),
            exit_code: None,
        }
    }

    pub fn interrupted() -> Self {
        ToolResult {
            outcome: ToolOutcome::Interrupted,
            content: "This call was interrupted: baton stopped while it ran and did not record a \
                      result. Its effect on the workspace may be partial; check the state before \
                      relying on it or repeating it."
                .into(),
            exit_code: None,
        }
    }
}

/// Token usage of one model call as the server reported it, normalized across providers:
/// `prompt_tokens` counts every input token (cached, cache-written and plain alike), as OpenAI's
/// `prompt_tokens` does; the optional fields say how many of them were cache reads or writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Prompt tokens served from the provider's prompt cache, when the server says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_prompt_tokens: Option<u64>,
    /// Prompt tokens written to the provider's prompt cache (Anthropic bills these extra).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Completion tokens spent on hidden reasoning, when the server says (part of
    /// `completion_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}
