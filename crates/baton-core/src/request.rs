use serde::{Deserialize, Serialize};

use crate::message::{AssistantMessage, Message, ToolSpec, Usage};
use crate::settings::{ReasoningSettings, ResponseMode, ToolChoice};

/// A provider-neutral model request. Built deterministically from run state by baton-context;
/// providers translate it to their wire format.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    pub model: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub response_mode: ResponseMode,
    #[serde(default, skip_serializing_if = "ToolChoice::is_auto")]
    pub tool_choice: ToolChoice,
    /// How to ask for reasoning and what of earlier reasoning to send back: part of the
    /// request (and its digest), so the wire body is a function of the request alone.
    #[serde(default, skip_serializing_if = "ReasoningSettings::is_default")]
    pub reasoning: ReasoningSettings,
    /// With provider-side compaction: the prompt size, in tokens, at which the provider
    /// compacts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_compaction_at: Option<u64>,
}

/// A model's complete, successful answer to one request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelReply {
    pub message: AssistantMessage,
    /// `None` when the server did not report usage (some local servers omit it from streams):
    /// unknown is recorded as unknown, never as zero.
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    /// Model name the server reported, which may differ from the one requested.
    pub served_model: Option<String>,
}
