//! What a Responses server answers: a response object whose `output` is a list of items
//! (reasoning, message, function_call, …), read whole or assembled from a stream's
//! `response.output_item.done` events. Reasoning and compaction items are kept as the exact JSON
//! text the server sent.

use baton_core::{AssistantMessage, ErrorClass, ModelReply, Reasoning, ToolCall, Usage};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::ModelError;
use crate::error::{classify_error_payload, excerpt};

#[derive(Deserialize)]
pub(crate) struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    input_tokens_details: Option<InputDetails>,
    output_tokens_details: Option<OutputDetails>,
}

#[derive(Deserialize)]
struct InputDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct OutputDetails {
    reasoning_tokens: Option<u64>,
}

impl WireUsage {
    fn to_usage(&self) -> Usage {
        Usage {
            // `input_tokens` counts cached tokens too, as the neutral `prompt_tokens` does.
            prompt_tokens: self.input_tokens.unwrap_or(0),
            completion_tokens: self.output_tokens.unwrap_or(0),
            cached_prompt_tokens: self
                .input_tokens_details
                .as_ref()
                .and_then(|d| d.cached_tokens),
            cache_write_tokens: None,
            reasoning_tokens: self
                .output_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens)
                .filter(|n| *n > 0),
        }
    }
}

/// A response object (whole, or inside `response.completed` / `.incomplete` / `.failed`).
#[derive(Deserialize)]
pub(crate) struct WireResponse {
    pub(crate) status: Option<String>,
    model: Option<String>,
    #[serde(default)]
    pub(crate) output: Vec<Box<RawValue>>,
    usage: Option<WireUsage>,
    pub(crate) error: Option<Value>,
    incomplete_details: Option<IncompleteDetails>,
}

#[derive(Deserialize)]
struct IncompleteDetails {
    reason: Option<String>,
}

/// The fields of an output item baton reads; the item's own text is kept for reasoning.
#[derive(Deserialize)]
struct ItemHead {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    content: Vec<Value>,
    call_id: Option<String>,
    name: Option<String>,
    arguments: Option<Value>,
    #[serde(default)]
    summary: Vec<Value>,
}

/// Adds one output item to the reply being built.
fn add_item(item: &RawValue, message: &mut AssistantMessage) -> Result<(), ModelError> {
    let head: ItemHead = serde_json::from_str(item.get()).map_err(|e| {
        ModelError::new(
            ErrorClass::BadResponse,
            format!("unreadable output item ({e}): {}", excerpt(item.get())),
        )
    })?;
    let texts = |parts: &[Value], kind: &str| -> String {
        parts
            .iter()
            .filter(|p| p["type"] == kind)
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    match head.kind.as_str() {
        "message" => {
            let mut text = texts(&head.content, "output_text");
            let refusal = head
                .content
                .iter()
                .filter(|p| p["type"] == "refusal")
                .filter_map(|p| p["refusal"].as_str())
                .collect::<Vec<_>>()
                .join("\n");
            if !refusal.is_empty() {
                text = if text.is_empty() {
                    refusal
                } else {
                    format!("{text}\n\n{refusal}")
                };
            }
            if !text.is_empty() {
                let content = message.content.get_or_insert_default();
                if !content.is_empty() {
                    content.push_str("\n\n");
                }
                content.push_str(&text);
            }
        }
        "function_call" => message.tool_calls.push(ToolCall {
            id: head.call_id.unwrap_or_default(),
            name: head.name.unwrap_or_default(),
            arguments: match head.arguments {
                Some(Value::String(s)) => s,
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            },
        }),
        // Sent back as they came: the encrypted content carries the model's reasoning (and a
        // compaction item the history before it) into later requests.
        "reasoning" | "compaction" | "compaction_summary" => {
            message.reasoning.push(Reasoning::Item {
                json: item.get().to_string(),
                summary: texts(&head.summary, "summary_text"),
            })
        }
        // Hosted tools baton does not ask for; nothing of the reply.
        _ => {}
    }
    Ok(())
}

impl WireResponse {
    /// The reply of a finished response: `completed`, or `incomplete` (cut by
    /// `max_output_tokens` or a filter: what came is kept, the reason is the finish reason).
    pub(crate) fn into_reply(self, raw: &str) -> Result<ModelReply, ModelError> {
        if let Some(error) = self.error.as_ref().filter(|e| !e.is_null()) {
            return Err(classify_error_payload(error, raw));
        }
        let finish_reason = match self.status.as_deref() {
            Some("completed") | None => "completed".to_string(),
            Some("incomplete") => format!(
                "incomplete: {}",
                self.incomplete_details
                    .and_then(|d| d.reason)
                    .unwrap_or_else(|| "unknown".into())
            ),
            Some("failed") => {
                return Err(ModelError::new(
                    ErrorClass::Transient,
                    format!("the response failed without an error: {}", excerpt(raw)),
                ));
            }
            Some(other) => {
                return Err(ModelError::new(
                    ErrorClass::BadResponse,
                    format!("the response is still {other}: {}", excerpt(raw)),
                ));
            }
        };
        let mut message = AssistantMessage::default();
        for item in &self.output {
            add_item(item, &mut message)?;
        }
        Ok(ModelReply {
            message,
            usage: self.usage.as_ref().map(WireUsage::to_usage),
            finish_reason: Some(finish_reason),
            served_model: self.model.filter(|m| !m.is_empty()),
        })
    }
}

/// Parses a whole (non-streamed) response body.
pub(crate) fn parse_whole(body: &[u8]) -> Result<ModelReply, ModelError> {
    let text = String::from_utf8_lossy(body);
    let response: WireResponse = serde_json::from_slice(body).map_err(|e| {
        ModelError::new(
            ErrorClass::BadResponse,
            format!(
                "response is not a Responses object ({e}): {}",
                excerpt(&text)
            ),
        )
    })?;
    response.into_reply(&text)
}
