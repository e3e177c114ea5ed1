//! Accumulating a streamed (SSE) Messages API response into one [`ModelReply`].
//!
//! The stream is `message_start`, then per content block `content_block_start`,
//! `content_block_delta`s and `content_block_stop`, then `message_delta` (stop reason, cumulative
//! usage) and `message_stop`; `ping` and `error` events may come at any point.

use std::collections::BTreeMap;

use baton_core::{AssistantMessage, ErrorClass, ModelReply, Reasoning, ToolCall};
use serde::Deserialize;
use serde_json::Value;

use super::errors::classify_error_event;
use super::response::{BlockPart, ContentBlock, TEXT_BLOCK_SEPARATOR, WireUsage, input_text};
use crate::error::excerpt;
use crate::provider::StreamFold;
use crate::{ModelError, StreamDelta, StreamObserver};

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEvent {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: u32,
        content_block: ContentBlock,
    },
    ContentBlockDelta {
        index: u32,
        delta: BlockDelta,
    },
    ContentBlockStop {},
    MessageDelta {
        delta: MessageDeltaBody,
        usage: Option<WireUsage>,
    },
    MessageStop {},
    Ping {},
    Error {
        error: Value,
    },
    /// Event types added after this was written; the API documents that clients should skip them.
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize)]
struct StartMessage {
    model: Option<String>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    ThinkingDelta {
        thinking: String,
    },
    SignatureDelta {
        signature: String,
    },
    CompactionDelta {
        #[serde(default)]
        content: Option<String>,
        #[serde(default)]
        encrypted_content: Option<String>,
    },
    /// `citations_delta`, …
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct MessageDeltaBody {
    stop_reason: Option<String>,
}

enum PartialBlock {
    Text,
    ToolUse {
        /// Position among the answer's tool calls, as shown to the observer.
        call: u32,
        id: String,
        name: String,
        /// What `content_block_start` carried; the real input arrives as deltas.
        start_input: Value,
        json: String,
    },
    /// Thinking (whole with its signature, which the API checks when the block comes back),
    /// redacted thinking or compaction, its deltas appended in place.
    Reasoning(Reasoning),
    Ignored,
}

/// What the stream said so far.
#[derive(Default)]
pub struct StreamAccumulator {
    text: String,
    /// Keyed by the server's block index; a map so that a wild index cannot force a huge
    /// allocation.
    blocks: BTreeMap<u32, PartialBlock>,
    calls: u32,
    /// Whether the text block being streamed has said anything yet.
    block_has_text: bool,
    model: Option<String>,
    usage: Option<WireUsage>,
    stop_reason: Option<String>,
    started: bool,
    done: bool,
}

fn bad(message: String) -> ModelError {
    ModelError::new(ErrorClass::BadResponse, message)
}

impl StreamAccumulator {
    fn start_block(
        &mut self,
        index: u32,
        block: ContentBlock,
        observer: &mut dyn StreamObserver,
    ) -> Result<(), ModelError> {
        if self.blocks.contains_key(&index) {
            return Err(bad(format!("content block {index} started twice")));
        }
        let partial = match block.part() {
            BlockPart::Text(text) => {
                self.block_has_text = false;
                self.push_text(&text, observer);
                PartialBlock::Text
            }
            BlockPart::ToolUse { id, name, input } => {
                let call = self.calls;
                self.calls += 1;
                observer.on_delta(&StreamDelta::ToolCall {
                    index: call,
                    name: Some(name.clone()),
                    arguments: String::new(),
                });
                PartialBlock::ToolUse {
                    call,
                    id,
                    name,
                    start_input: input,
                    json: String::new(),
                }
            }
            BlockPart::Reasoning(reasoning) => {
                if let Reasoning::Thinking { thinking, .. } = &reasoning
                    && !thinking.is_empty()
                {
                    observer.on_delta(&StreamDelta::Reasoning(thinking.clone()));
                }
                PartialBlock::Reasoning(reasoning)
            }
            BlockPart::Other => PartialBlock::Ignored,
        };
        self.blocks.insert(index, partial);
        Ok(())
    }

    fn apply_delta(
        &mut self,
        index: u32,
        delta: BlockDelta,
        observer: &mut dyn StreamObserver,
    ) -> Result<(), ModelError> {
        let Some(block) = self.blocks.get_mut(&index) else {
            return Err(bad(format!(
                "delta for content block {index}, which never started"
            )));
        };
        let mismatch = || bad(format!("content block {index} got a delta of another type"));
        match (block, delta) {
            (_, BlockDelta::Other) | (PartialBlock::Ignored, _) => {}
            (PartialBlock::Text, BlockDelta::TextDelta { text }) => self.push_text(&text, observer),
            (
                PartialBlock::ToolUse { call, json, .. },
                BlockDelta::InputJsonDelta { partial_json },
            ) => {
                json.push_str(&partial_json);
                if !partial_json.is_empty() {
                    observer.on_delta(&StreamDelta::ToolCall {
                        index: *call,
                        name: None,
                        arguments: partial_json,
                    });
                }
            }
            (
                PartialBlock::Reasoning(Reasoning::Thinking { thinking, .. }),
                BlockDelta::ThinkingDelta { thinking: piece },
            ) => {
                thinking.push_str(&piece);
                if !piece.is_empty() {
                    observer.on_delta(&StreamDelta::Reasoning(piece));
                }
            }
            (
                PartialBlock::Reasoning(Reasoning::Thinking { signature, .. }),
                BlockDelta::SignatureDelta { signature: piece },
            ) => signature.push_str(&piece),
            (
                PartialBlock::Reasoning(Reasoning::Compaction {
                    content,
                    encrypted_content,
                }),
                BlockDelta::CompactionDelta {
                    content: new_content,
                    encrypted_content: new_encrypted,
                },
            ) => {
                // Documented as one delta carrying the whole block; pieces, should a server
                // split it, are joined.
                if let Some(piece) = new_content {
                    if !piece.is_empty() {
                        observer.on_delta(&StreamDelta::Reasoning(piece.clone()));
                    }
                    content.get_or_insert_with(String::new).push_str(&piece);
                }
                if let Some(piece) = new_encrypted {
                    encrypted_content
                        .get_or_insert_with(String::new)
                        .push_str(&piece);
                }
            }
            _ => return Err(mismatch()),
        }
        Ok(())
    }

    /// Appends text of the current text block. The first text of a block after an earlier one
    /// that said something is preceded by [`TEXT_BLOCK_SEPARATOR`], also in what the observer
    /// sees, so the live display shows what the reply will hold.
    fn push_text(&mut self, text: &str, observer: &mut dyn StreamObserver) {
        if text.is_empty() {
            return;
        }
        let mut piece = String::new();
        if !self.text.is_empty() && !self.block_has_text {
            piece.push_str(TEXT_BLOCK_SEPARATOR);
        }
        piece.push_str(text);
        self.block_has_text = true;
        self.text.push_str(&piece);
        observer.on_delta(&StreamDelta::Text(piece));
    }
}

impl StreamFold for StreamAccumulator {
    /// Takes one SSE event. Returns `true` once the stream says it is complete (`message_stop`).
    fn on_event(
        &mut self,
        event_type: &str,
        data: &str,
        observer: &mut dyn StreamObserver,
    ) -> Result<bool, ModelError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        let event: StreamEvent = match serde_json::from_str(data) {
            Ok(event) => event,
            // An error event whose data is not the documented JSON is still an error.
            Err(_) if event_type == "error" => {
                return Err(classify_error_event(&Value::String(data.into()), data));
            }
            Err(e) => {
                return Err(bad(format!(
                    "unparseable stream event ({e}): {}",
                    excerpt(data)
                )));
            }
        };
        match event {
            StreamEvent::MessageStart { message } => {
                self.started = true;
                self.model = message.model.filter(|m| !m.is_empty());
                self.usage = message.usage;
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => self.start_block(index, content_block, observer)?,
            StreamEvent::ContentBlockDelta { index, delta } => {
                self.apply_delta(index, delta, observer)?;
            }
            StreamEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                if let Some(later) = usage {
                    self.usage.get_or_insert_default().update(&later);
                }
            }
            StreamEvent::MessageStop {} => {
                self.done = true;
                return Ok(true);
            }
            StreamEvent::Error { error } => return Err(classify_error_event(&error, data)),
            StreamEvent::ContentBlockStop {} | StreamEvent::Ping {} | StreamEvent::Unknown => {}
        }
        Ok(false)
    }

    /// The reply, once the stream has ended. Anthropic always ends a complete answer with
    /// `message_stop`; without it the connection was cut mid-answer.
    fn finish(self) -> Result<ModelReply, ModelError> {
        if !self.done {
            let calls = self.calls;
            return Err(ModelError::new(
                ErrorClass::Transient,
                format!(
                    "stream cut: the connection closed before the response was complete \
                     ({} chars of text and {calls} tool calls received)",
                    self.text.chars().count(),
                ),
            ));
        }
        if !self.started {
            return Err(bad("the stream ended without a message_start event".into()));
        }
        if self.usage.is_none() {
            tracing::info!("streamed response carries no usage; recorded as unreported");
        }
        // Thinking blocks in the order they came, each whole with its signature.
        let reasoning = self
            .blocks
            .values()
            .filter_map(|block| match block {
                PartialBlock::Reasoning(reasoning) => Some(reasoning.clone()),
                _ => None,
            })
            .collect();
        let tool_calls = self
            .blocks
            .into_values()
            .filter_map(|block| match block {
                PartialBlock::ToolUse {
                    id,
                    name,
                    start_input,
                    json,
                    ..
                } => Some(ToolCall {
                    id,
                    name,
                    arguments: arguments_text(json, &start_input),
                }),
                _ => None,
            })
            .collect();
        Ok(ModelReply {
            message: AssistantMessage {
                content: (!self.text.is_empty()).then_some(self.text),
                tool_calls,
                reasoning,
            },
            usage: self.usage.map(WireUsage::into_usage),
            finish_reason: self.stop_reason,
            served_model: self.model,
        })
    }
}

/// The arguments text of a streamed call: the `partial_json` pieces as sent (the tool reports
/// it if they are not valid JSON). A call without parameters streams no pieces; some
/// compatible servers send the whole input in `content_block_start` instead.
fn arguments_text(json: String, start_input: &Value) -> String {
    if !json.is_empty() {
        return json;
    }
    match start_input {
        Value::Object(map) if !map.is_empty() => input_text(start_input),
        _ => "{}".into(),
    }
}

crate::provider::read_stream_with!(StreamAccumulator);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "stream_tests.rs"]
mod tests;
