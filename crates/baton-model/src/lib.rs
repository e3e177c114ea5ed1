//! Model providers of baton: the [`ModelProvider`] seam, an OpenAI-compatible Chat Completions
//! client, a native Anthropic Messages client (both streaming and whole responses) and a scripted
//! provider for tests.

pub mod anthropic;
mod body;
mod canonical;
mod error;
mod http;
pub mod openai;
pub mod pricing;
mod provider;
pub mod ratelimit;
pub mod responses;
mod retry;
mod retry_after;
mod scripted;
mod tool_choice;

/// Live stream pieces are a core type (run observers see them); re-exported for providers.
pub use baton_core::StreamDelta;
pub use error::{
    BODY_EXCERPT_CHARS, ModelError, classify_error_payload, classify_http_error,
    classify_http_error_at, classify_transport_error,
};
pub use provider::{Dialect, Endpoint, HttpProvider, MAX_RESPONSE_BYTES};
pub use retry::{RetryPolicy, RetrySchedule};
pub use retry_after::{
    MAX_HEADER_WAIT, parse_reset_duration, parse_retry_after_value, retry_after_from_headers,
};
pub use scripted::ScriptedProvider;

use async_trait::async_trait;
use baton_core::{ModelReply, ModelRequest};

pub trait StreamObserver: Send {
    fn on_delta(&mut self, delta: &StreamDelta);
}

/// Shows a whole reply to the observer as if it had streamed in one piece, so that display code
/// works the same in both modes.
pub(crate) fn announce(reply: &ModelReply, observer: &mut dyn StreamObserver) {
    let reasoning = reply.message.reasoning_text();
    if !reasoning.is_empty() {
        observer.on_delta(&StreamDelta::Reasoning(reasoning));
    }
    if let Some(text) = reply.message.content.as_ref() {
        observer.on_delta(&StreamDelta::Text(text.clone()));
    }
    for (index, call) in (0u32..).zip(&reply.message.tool_calls) {
        observer.on_delta(&StreamDelta::ToolCall {
            index,
            name: Some(call.name.clone()),
            arguments: call.arguments.clone(),
        });
    }
}

/// Ignores deltas.
pub struct NoObserver;

impl StreamObserver for NoObserver {
    fn on_delta(&mut self, _delta: &StreamDelta) {}
}

#[async_trait]
pub trait ModelProvider: Send + Sync {
    /// Short description for logs, e.g. `openai-compatible http://127.0.0.1:8080/v1`.
    fn describe(&self) -> String;

    /// Sends one request (one attempt: retries are the caller's, so each attempt is journaled).
    async fn complete(
        &self,
        request: &ModelRequest,
        observer: &mut dyn StreamObserver,
    ) -> Result<ModelReply, ModelError>;
}
