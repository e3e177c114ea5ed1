//! A whole (non-streamed) Messages API response, and the token usage both modes report.

use baton_core::{AssistantMessage, ErrorClass, ModelReply, Reasoning, ToolCall, Usage};
use serde::Deserialize;
use serde_json::Value;

use super::errors::classify_error_event;
use crate::ModelError;
use crate::error::excerpt;

/// Separates the texts of two text blocks of one answer (e.g. text, a tool call, more text),
/// which would otherwise run together when joined into the one text the neutral reply has.
pub(crate) const TEXT_BLOCK_SEPARATOR: &str = "\n\n";

/// Token counts as Anthropic reports them. `input_tokens` excludes the cached and cache-written
/// tokens, unlike the neutral [`Usage::prompt_tokens`].
///
/// With server-side compaction, `iterations` lists each sampling step (the compaction, then the
/// message) with its own counts, and the top-level counts cover the message step only; the
/// call is billed for all of them, so the sum of `iterations` is what is reported then.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
pub(crate) struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    iterations: Option<Vec<IterationUsage>>,
}

/// One entry of `usage.iterations`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub(crate) struct IterationUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
}

impl WireUsage {
    /// Takes the counts `later` reports. A stream's `message_delta` counts are cumulative, so
    /// they replace the `message_start` ones; counts it leaves out keep their earlier value.
    pub(crate) fn update(&mut self, later: &WireUsage) {
        let keep = |old: &mut Option<u64>, new: Option<u64>| {
            if new.is_some() {
                *old = new;
            }
        };
        keep(&mut self.input_tokens, later.input_tokens);
        keep(&mut self.output_tokens, later.output_tokens);
        keep(
            &mut self.cache_creation_input_tokens,
            later.cache_creation_input_tokens,
        );
        keep(
            &mut self.cache_read_input_tokens,
            later.cache_read_input_tokens,
        );
        if later.iterations.is_some() {
            self.iterations.clone_from(&later.iterations);
        }
    }

    pub(crate) fn into_usage(self) -> Usage {
        if let Some(iterations) = self.iterations.filter(|i| !i.is_empty()) {
            let sum = |field: fn(&IterationUsage) -> u64| {
                iterations.iter().map(field).fold(0u64, u64::saturating_add)
            };
            return WireUsage {
                input_tokens: Some(sum(|i| i.input_tokens)),
                output_tokens: Some(sum(|i| i.output_tokens)),
                cache_creation_input_tokens: Some(sum(|i| i.cache_creation_input_tokens)),
                cache_read_input_tokens: Some(sum(|i| i.cache_read_input_tokens)),
                iterations: None,
            }
            .into_usage();
        }
        let read = self.cache_read_input_tokens;
        let write = self.cache_creation_input_tokens;
        Usage {
            prompt_tokens: self
                .input_tokens
                .unwrap_or(0)
                .saturating_add(read.unwrap_or(0))
                .saturating_add(write.unwrap_or(0)),
            completion_tokens: self.output_tokens.unwrap_or(0),
            cached_prompt_tokens: read,
            cache_write_tokens: write,
            // Thinking tokens are part of `output_tokens` and not reported apart.
            reasoning_tokens: None,
        }
    }
}

#[derive(Deserialize)]
struct WholeMessage {
    #[serde(rename = "type")]
    kind: Option<String>,
    model: Option<String>,
    content: Option<Vec<ContentBlock>>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

/// A content block as the Messages API sends it: whole in a response's `content`, or as a
/// streamed block's `content_block_start` (where text and thinking start empty and grow by
/// deltas, `stream.rs`). One parser for both, so the two modes read a block alike.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum ContentBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    /// Kept with its signature: the API checks it when the block comes back in a tool loop.
    Thinking {
        #[serde(default)]
        thinking: String,
        #[serde(default)]
        signature: String,
    },
    RedactedThinking {
        data: String,
    },
    /// Server-side compaction's summary (`compact_20260112`); streamed, it starts empty and its
    /// content arrives in one `compaction_delta`.
    Compaction {
        #[serde(default)]
        content: Option<String>,
        #[serde(default)]
        encrypted_content: Option<String>,
    },
    /// Block types added later: read past, not part of the neutral reply.
    #[serde(other)]
    Other,
}

/// What a content block is in the neutral reply.
pub(crate) enum BlockPart {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    /// Thinking (with its signature), redacted thinking and compaction, kept verbatim.
    Reasoning(Reasoning),
    Other,
}

impl ContentBlock {
    pub(crate) fn part(self) -> BlockPart {
        match self {
            ContentBlock::Text { text } => BlockPart::Text(text),
            ContentBlock::ToolUse { id, name, input } => BlockPart::ToolUse { id, name, input },
            ContentBlock::Thinking {
                thinking,
                signature,
            } => BlockPart::Reasoning(Reasoning::Thinking {
                thinking,
                signature,
            }),
            ContentBlock::RedactedThinking { data } => {
                BlockPart::Reasoning(Reasoning::RedactedThinking { data })
            }
            ContentBlock::Compaction {
                content,
                encrypted_content,
            } => BlockPart::Reasoning(Reasoning::Compaction {
                content,
                encrypted_content,
            }),
            ContentBlock::Other => BlockPart::Other,
        }
    }
}

/// Tool input as the raw arguments text the neutral reply carries.
pub(crate) fn input_text(input: &Value) -> String {
    match input {
        Value::Null => "{}".into(),
        other => other.to_string(),
    }
}

/// Parses a whole Messages API response body.
pub(crate) fn parse_whole(body: &[u8]) -> Result<ModelReply, ModelError> {
    let text = String::from_utf8_lossy(body);
    let message: WholeMessage = serde_json::from_slice(body).map_err(|e| {
        ModelError::new(
            ErrorClass::BadResponse,
            format!("response is not a message ({e}): {}", excerpt(&text)),
        )
    })?;
    if message.kind.as_deref() == Some("error") {
        let error = message.error.unwrap_or(Value::Null);
        return Err(classify_error_event(&error, &text));
    }
    let blocks = message.content.ok_or_else(|| {
        ModelError::new(
            ErrorClass::BadResponse,
            format!("response has no content: {}", excerpt(&text)),
        )
    })?;
    let mut content = String::new();
    let mut tool_calls = Vec::new();
    let mut reasoning = Vec::new();
    for block in blocks {
        match block.part() {
            BlockPart::Text(text) if !text.is_empty() => {
                if !content.is_empty() {
                    content.push_str(TEXT_BLOCK_SEPARATOR);
                }
                content.push_str(&text);
            }
            BlockPart::ToolUse { id, name, input } => tool_calls.push(ToolCall {
                id,
                name,
                arguments: input_text(&input),
            }),
            BlockPart::Reasoning(part) => reasoning.push(part),
            BlockPart::Text(_) | BlockPart::Other => {}
        }
    }
    if message.usage.is_none() {
        tracing::info!("message response carries no usage; recorded as unreported");
    }
    Ok(ModelReply {
        message: AssistantMessage {
            content: (!content.is_empty()).then_some(content),
            tool_calls,
            reasoning,
        },
        usage: message.usage.map(WireUsage::into_usage),
        finish_reason: message.stop_reason,
        served_model: message.model.filter(|m| !m.is_empty()),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_text_tool_use_thinking_and_usage() {
        let body = json!({
            "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-served",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "Reading both."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.rs"}},
                {"type": "text", "text": "And this one."},
                {"type": "tool_use", "id": "toolu_2", "name": "ls", "input": {}}
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 12, "cache_creation_input_tokens": 100,
                      "cache_read_input_tokens": 2000, "output_tokens": 40}
        });
        let reply = parse_whole(body.to_string().as_bytes()).unwrap();
        assert_eq!(
            reply.message.content.as_deref(),
            Some("Reading both.\n\nAnd this one.")
        );
        assert_eq!(
            reply.message.reasoning,
            vec![Reasoning::Thinking {
                thinking: "hmm".into(),
                signature: "sig".into()
            }]
        );
        assert_eq!(
            reply.message.tool_calls,
            vec![
                ToolCall {
                    id: "toolu_1".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"a.rs"}"#.into()
                },
                ToolCall {
                    id: "toolu_2".into(),
                    name: "ls".into(),
                    arguments: "{}".into()
                },
            ]
        );
        assert_eq!(
            reply.usage,
            Some(Usage {
                prompt_tokens: 2112,
                completion_tokens: 40,
                cached_prompt_tokens: Some(2000),
                cache_write_tokens: Some(100),
                reasoning_tokens: None,
            })
        );
        assert_eq!(reply.finish_reason.as_deref(), Some("tool_use"));
        assert_eq!(reply.served_model.as_deref(), Some("claude-served"));
    }

    #[test]
    fn usage_without_cache_fields_and_without_usage() {
        let body = br#"{"type":"message","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":1}}"#;
        let reply = parse_whole(body).unwrap();
        assert_eq!(
            reply.usage,
            Some(Usage {
                prompt_tokens: 5,
                completion_tokens: 1,
                ..Default::default()
            })
        );
        let body = br#"{"type":"message","content":[],"stop_reason":"end_turn"}"#;
        let reply = parse_whole(body).unwrap();
        assert_eq!(reply.usage, None);
        assert_eq!(reply.message, AssistantMessage::default());
        assert_eq!(reply.served_model, None);
    }

    #[test]
    fn usage_updates_keep_what_later_counts_leave_out() {
        let mut usage: WireUsage = serde_json::from_value(json!({"input_tokens": 10,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 90, "output_tokens": 1}))
        .unwrap();
        usage.update(&serde_json::from_value(json!({"output_tokens": 33})).unwrap());
        assert_eq!(
            usage.into_usage(),
            Usage {
                prompt_tokens: 100,
                completion_tokens: 33,
                cached_prompt_tokens: Some(90),
                cache_write_tokens: Some(0),
                reasoning_tokens: None,
            }
        );
    }

    #[test]
    fn errors_and_garbage() {
        let err = parse_whole(b"not json").unwrap_err();
        assert_eq!(err.class, ErrorClass::BadResponse);
        assert!(err.message.contains("not json"));

        let err = parse_whole(br#"{"type":"message","model":"m"}"#).unwrap_err();
        assert_eq!(err.class, ErrorClass::BadResponse);

        let err = parse_whole(br#"{"type":"message","content":[{"type":"tool_use","id":"x"}]}"#)
            .unwrap_err();
        assert_eq!(err.class, ErrorClass::BadResponse);

        let err = parse_whole(
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )
        .unwrap_err();
        assert_eq!(err.class, ErrorClass::Overloaded);
    }

    #[test]
    fn a_compaction_block_is_kept_and_every_iteration_is_billed() {
        let body = serde_json::json!({
            "type": "message", "model": "claude-opus-4-6", "stop_reason": "end_turn",
            "content": [
                {"type": "compaction", "content": "so far: x", "encrypted_content": "e=="},
                {"type": "text", "text": "Done."}
            ],
            "usage": {"input_tokens": 30, "output_tokens": 5, "cache_read_input_tokens": 0,
                "iterations": [
                    {"type": "compaction", "input_tokens": 900, "output_tokens": 100,
                     "cache_read_input_tokens": 50, "cache_creation_input_tokens": 0},
                    {"type": "message", "input_tokens": 30, "output_tokens": 5,
                     "cache_read_input_tokens": 0, "cache_creation_input_tokens": 10}]}
        });
        let reply = parse_whole(body.to_string().as_bytes()).unwrap();
        assert_eq!(
            reply.message.reasoning,
            vec![Reasoning::Compaction {
                content: Some("so far: x".into()),
                encrypted_content: Some("e==".into()),
            }]
        );
        assert_eq!(reply.message.reasoning_text(), "so far: x");
        let usage = reply.usage.unwrap();
        assert_eq!(
            (usage.prompt_tokens, usage.completion_tokens),
            (900 + 50 + 30 + 10, 105)
        );
        assert_eq!(
            (usage.cached_prompt_tokens, usage.cache_write_tokens),
            (Some(50), Some(10))
        );
        // A failed compaction (no content) is kept as it came, too.
        let failed = serde_json::json!({"type": "message", "content": [
            {"type": "compaction", "content": null}, {"type": "text", "text": "ok"}]});
        let reply = parse_whole(failed.to_string().as_bytes()).unwrap();
        assert_eq!(
            reply.message.reasoning,
            vec![Reasoning::Compaction {
                content: None,
                encrypted_content: None
            }]
        );
    }
}
