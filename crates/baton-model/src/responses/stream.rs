//! Reading a streamed Responses answer. The reply is built from the finished items
//! (`response.output_item.done`, each whole) once `response.completed` (or `.incomplete`) says
//! the response is over; the deltas are only shown live. A stream that ends before that is a
//! cut — an error, never half a reply.

use std::collections::BTreeMap;

use baton_core::{ErrorClass, ModelReply};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::response::WireResponse;
use crate::error::{classify_error_payload, excerpt};
use crate::provider::StreamFold;
use crate::{ModelError, StreamDelta, StreamObserver};

#[derive(Deserialize)]
struct StreamEvent<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    output_index: Option<u32>,
    delta: Option<String>,
    #[serde(borrow)]
    item: Option<&'a RawValue>,
    response: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct AddedItem {
    #[serde(rename = "type")]
    kind: String,
    name: Option<String>,
}

#[derive(Default)]
pub struct StreamAccumulator {
    /// Finished items by their place in the output.
    items: BTreeMap<u32, Box<RawValue>>,
    /// Output index of each function call → its position among the calls (for the display).
    calls: BTreeMap<u32, u32>,
    /// The final response object (`response.completed` / `.incomplete`).
    end: Option<(WireResponse, String)>,
    text_chars: usize,
}

fn bad(message: String) -> ModelError {
    ModelError::new(ErrorClass::BadResponse, message)
}

impl StreamAccumulator {}

impl StreamFold for StreamAccumulator {
    /// Takes one SSE event. Returns `true` once the response is over.
    fn on_event(
        &mut self,
        _kind: &str,
        data: &str,
        observer: &mut dyn StreamObserver,
    ) -> Result<bool, ModelError> {
        let data = data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(false);
        }
        let event: StreamEvent<'_> = serde_json::from_str(data)
            .map_err(|e| bad(format!("unparseable stream event ({e}): {}", excerpt(data))))?;
        match event.kind {
            "response.output_item.added" => {
                let added: Option<AddedItem> =
                    event.item.and_then(|i| serde_json::from_str(i.get()).ok());
                if let (Some(item), Some(index)) = (added, event.output_index)
                    && item.kind == "function_call"
                {
                    let call = u32::try_from(self.calls.len()).unwrap_or(u32::MAX);
                    self.calls.insert(index, call);
                    observer.on_delta(&StreamDelta::ToolCall {
                        index: call,
                        name: item.name,
                        arguments: String::new(),
                    });
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                if let Some(text) = event.delta.filter(|d| !d.is_empty()) {
                    self.text_chars += text.chars().count();
                    observer.on_delta(&StreamDelta::Text(text));
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let Some(text) = event.delta.filter(|d| !d.is_empty()) {
                    observer.on_delta(&StreamDelta::Reasoning(text));
                }
            }
            "response.function_call_arguments.delta" => {
                let call = event.output_index.and_then(|i| self.calls.get(&i).copied());
                if let (Some(call), Some(delta)) = (call, event.delta.filter(|d| !d.is_empty())) {
                    observer.on_delta(&StreamDelta::ToolCall {
                        index: call,
                        name: None,
                        arguments: delta,
                    });
                }
            }
            "response.output_item.done" => {
                let (Some(index), Some(item)) = (event.output_index, event.item) else {
                    return Err(bad(format!(
                        "an output item without its index: {}",
                        excerpt(data)
                    )));
                };
                self.items.insert(index, item.to_owned());
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                let raw = event.response.ok_or_else(|| {
                    bad(format!(
                        "{} without its response: {}",
                        event.kind,
                        excerpt(data)
                    ))
                })?;
                let response: WireResponse = serde_json::from_str(raw.get()).map_err(|e| {
                    bad(format!(
                        "unreadable final response ({e}): {}",
                        excerpt(data)
                    ))
                })?;
                if event.kind == "response.failed" {
                    let error = response.error.clone().unwrap_or(Value::Null);
                    return Err(classify_error_payload(&error, data));
                }
                self.end = Some((response, data.to_string()));
                return Ok(true);
            }
            "error" => {
                let value: Value = serde_json::from_str(data).unwrap_or(Value::Null);
                let error = value
                    .get("error")
                    .filter(|e| e.is_object())
                    .unwrap_or(&value);
                return Err(classify_error_payload(error, data));
            }
            // response.created, .in_progress, content_part.*, *.done of text, … carry nothing
            // the finished items do not.
            _ => {}
        }
        Ok(false)
    }

    fn finish(self) -> Result<ModelReply, ModelError> {
        let Some((mut response, raw)) = self.end else {
            return Err(ModelError::new(
                ErrorClass::Transient,
                format!(
                    "stream cut: the connection closed before the response was complete \
                     ({} chars of text and {} finished items received)",
                    self.text_chars,
                    self.items.len()
                ),
            ));
        };
        // The items as they finished during the stream; a server that sends none lists them
        // in the final response instead.
        if !self.items.is_empty() {
            response.output = self.items.into_values().collect();
        }
        response.into_reply(&raw)
    }
}

crate::provider::read_stream_with!(StreamAccumulator);
