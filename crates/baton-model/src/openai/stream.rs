//! Accumulating a streamed (SSE) Chat Completions response into one [`ModelReply`].

use std::collections::BTreeMap;

use baton_core::{
    AssistantMessage, ErrorClass, ModelReply, Reasoning, ReasoningField, ToolCall, Usage,
};
use serde::Deserialize;
use serde_json::Value;

use super::response::{WireUsage, arguments_text, content_text, in_band_error, reasoning_text};
use crate::error::{classify_error_payload, excerpt};
use crate::provider::StreamFold;
use crate::{ModelError, StreamDelta, StreamObserver};

#[derive(Deserialize)]
struct StreamChunk {
    model: Option<String>,
    choices: Option<Vec<StreamChoice>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct StreamChoice {
    index: Option<u32>,
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    content: Option<Value>,
    tool_calls: Option<Vec<DeltaToolCall>>,
    reasoning_content: Option<Value>,
    reasoning: Option<Value>,
}

#[derive(Deserialize)]
struct DeltaToolCall {
    index: Option<u32>,
    id: Option<String>,
    function: Option<DeltaFunction>,
}

#[derive(Deserialize)]
struct DeltaFunction {
    name: Option<String>,
    arguments: Option<Value>,
}

#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// What the stream said so far.
#[derive(Default)]
pub struct StreamAccumulator {
    text: String,
    /// Reasoning text so far and the field it comes in (the first piece's).
    reasoning: String,
    reasoning_field: Option<ReasoningField>,
    /// Keyed by the server's `index`; a map so that a wild index cannot force a huge allocation.
    calls: BTreeMap<u32, PartialCall>,
    finish_reason: Option<String>,
    model: Option<String>,
    usage: Option<Usage>,
    saw_choice: bool,
    done: bool,
}

impl StreamAccumulator {
    fn apply_delta(&mut self, delta: Delta, observer: &mut dyn StreamObserver) {
        if let Some((text, field)) =
            reasoning_text(delta.reasoning_content.as_ref(), delta.reasoning.as_ref())
        {
            self.reasoning.push_str(&text);
            self.reasoning_field.get_or_insert(field);
            observer.on_delta(&StreamDelta::Reasoning(text));
        }
        if let Some(text) = delta
            .content
            .as_ref()
            .and_then(content_text)
            .filter(|t| !t.is_empty())
        {
            self.text.push_str(&text);
            observer.on_delta(&StreamDelta::Text(text));
        }
        for piece in delta.tool_calls.into_iter().flatten() {
            let index = self.call_index(&piece);
            let call = self.calls.entry(index).or_default();
            if let Some(id) = piece.id.filter(|id| !id.is_empty()) {
                call.id = id;
            }
            let (name, arguments) = match piece.function {
                Some(f) => (f.name.filter(|n| !n.is_empty()), f.arguments),
                None => (None, None),
            };
            if let (Some(name), true) = (&name, call.name.is_empty()) {
                call.name.clone_from(name);
            }
            let arguments = arguments.as_ref().map(arguments_text).unwrap_or_default();
            call.arguments.push_str(&arguments);
            if name.is_some() || !arguments.is_empty() {
                observer.on_delta(&StreamDelta::ToolCall {
                    index,
                    name,
                    arguments,
                });
            }
        }
    }

    /// The call a piece belongs to. Servers that omit `index` send each call whole or start a
    /// new call with a new id; an id-less piece continues the latest call.
    fn call_index(&self, piece: &DeltaToolCall) -> u32 {
        let last = self.calls.last_key_value().map(|(k, _)| *k);
        let new_id = piece.id.as_deref().filter(|id| !id.is_empty());
        if let Some(index) = piece.index {
            // Some servers (Ollama) number every parallel call 0: a piece that brings a new id to
            // an index already holding another call starts a new call instead of merging.
            let clash = new_id.is_some_and(|id| {
                self.calls
                    .get(&index)
                    .is_some_and(|c| !c.id.is_empty() && c.id != id)
            });
            if !clash {
                return index;
            }
            return last.map_or(0, |k| k.saturating_add(1));
        }
        match piece.id.as_deref().filter(|id| !id.is_empty()) {
            Some(id) => self
                .calls
                .iter()
                .find(|(_, c)| c.id == id)
                .map(|(k, _)| *k)
                .unwrap_or_else(|| last.map_or(0, |k| k.saturating_add(1))),
            None => last.unwrap_or(0),
        }
    }
}

impl StreamFold for StreamAccumulator {
    /// Takes one SSE event. Returns `true` once the stream says it is complete (`[DONE]`).
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
        if data == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        if event_type == "error" {
            let value = serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.into()));
            let error = value.get("error").unwrap_or(&value);
            return Err(classify_error_payload(error, data));
        }
        let chunk: StreamChunk = serde_json::from_str(data).map_err(|e| {
            ModelError::new(
                ErrorClass::BadResponse,
                format!("unparseable stream chunk ({e}): {}", excerpt(data)),
            )
        })?;
        if let Some(error) = in_band_error(chunk.error.as_ref()) {
            return Err(classify_error_payload(error, data));
        }
        if self.model.is_none() {
            self.model = chunk.model.filter(|m| !m.is_empty());
        }
        if let Some(usage) = &chunk.usage {
            // Some servers repeat cumulative usage in every chunk: the last one is the total.
            self.usage = Some(usage.to_usage());
        }
        // Only one choice is asked for; a server that numbers choices is read at index 0.
        let choice = chunk
            .choices
            .into_iter()
            .flatten()
            .find(|c| c.index.unwrap_or(0) == 0);
        if let Some(choice) = choice {
            self.saw_choice = true;
            if let Some(delta) = choice.delta {
                self.apply_delta(delta, observer);
            }
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
        }
        Ok(false)
    }

    /// The reply, once the stream has ended. A stream that ends without `[DONE]` is accepted
    /// only if it said why the model stopped; otherwise the connection was cut mid-answer.
    fn finish(self) -> Result<ModelReply, ModelError> {
        // Complete means the model said why it stopped. A bare `[DONE]` is accepted only for a
        // text answer: with tool calls in flight it may mark a stream cut mid-arguments, and a
        // half-built call must never be committed.
        let complete = self.finish_reason.is_some() || (self.done && self.calls.is_empty());
        if !complete {
            return Err(ModelError::new(
                ErrorClass::Transient,
                format!(
                    "stream cut: the connection closed before the response was complete \
                     ({} chars of text and {} tool calls received)",
                    self.text.chars().count(),
                    self.calls.len()
                ),
            ));
        }
        if !self.saw_choice {
            return Err(ModelError::new(
                ErrorClass::BadResponse,
                "the stream carried no choice",
            ));
        }
        if self.usage.is_none() {
            tracing::info!("streamed response carries no usage; recorded as unreported");
        }
        let tool_calls = self
            .calls
            .into_values()
            .map(|c| ToolCall {
                id: c.id,
                name: c.name,
                arguments: c.arguments,
            })
            .collect();
        Ok(ModelReply {
            message: AssistantMessage {
                content: (!self.text.is_empty()).then_some(self.text),
                tool_calls,
                reasoning: match self.reasoning_field {
                    Some(field) if !self.reasoning.is_empty() => vec![Reasoning::Text {
                        text: self.reasoning,
                        field,
                    }],
                    _ => Vec::new(),
                },
            },
            usage: self.usage,
            finish_reason: self.finish_reason,
            served_model: self.model,
        })
    }
}

crate::provider::read_stream_with!(StreamAccumulator);

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "stream_tests.rs"]
mod tests;
