//! A provider that replays prepared answers, for tests of engines built on these crates.
//!
//! It is a library type only: no configuration or command-line option selects it, so a real run
//! can never be served canned answers.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use baton_core::{ErrorClass, ModelReply, ModelRequest};

use crate::{ModelError, ModelProvider, StreamDelta, StreamObserver};

/// Replays its responses in order and records every request it receives.
pub struct ScriptedProvider {
    responses: Mutex<VecDeque<Result<ModelReply, ModelError>>>,
    requests: Mutex<Vec<ModelRequest>>,
}

impl ScriptedProvider {
    pub fn new(responses: Vec<Result<ModelReply, ModelError>>) -> Self {
        ScriptedProvider {
            responses: Mutex::new(responses.into()),
            requests: Mutex::new(Vec::new()),
        }
    }

    /// Every request received so far, in order (including those answered with an error).
    pub fn requests(&self) -> Vec<ModelRequest> {
        lock(&self.requests).clone()
    }

    /// Responses not yet handed out.
    pub fn remaining(&self) -> usize {
        lock(&self.responses).len()
    }
}

/// A test that panicked while holding a lock leaves plain data behind, still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[async_trait]
impl ModelProvider for ScriptedProvider {
    fn describe(&self) -> String {
        format!("scripted ({} responses left)", self.remaining())
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        observer: &mut dyn StreamObserver,
    ) -> Result<ModelReply, ModelError> {
        lock(&self.requests).push(request.clone());
        let next = lock(&self.responses).pop_front();
        let reply = next.unwrap_or_else(|| {
            Err(ModelError::new(
                ErrorClass::InvalidRequest,
                "scripted provider has no more responses",
            ))
        })?;
        // Show the answer to the observer as a provider would, so display code is exercised.
        if let Some(text) = reply.message.content.as_ref().filter(|t| !t.is_empty()) {
            observer.on_delta(&StreamDelta::Text(text.clone()));
        }
        for (index, call) in (0u32..).zip(&reply.message.tool_calls) {
            observer.on_delta(&StreamDelta::ToolCall {
                index,
                name: Some(call.name.clone()),
                arguments: call.arguments.clone(),
            });
        }
        Ok(reply)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use baton_core::{AssistantMessage, Message, ResponseMode, ToolCall, Usage};

    struct Recorder(Vec<StreamDelta>);

    impl StreamObserver for Recorder {
        fn on_delta(&mut self, delta: &StreamDelta) {
            self.0.push(delta.clone());
        }
    }

    fn request(text: &str) -> ModelRequest {
        ModelRequest {
            model: "m".into(),
            messages: vec![Message::User {
                content: text.into(),
            }],
            tools: vec![],
            response_mode: ResponseMode::Streaming,
            tool_choice: Default::default(),
            reasoning: Default::default(),
            provider_compaction_at: Default::default(),
        }
    }

    #[tokio::test]
    async fn replays_in_order_records_requests_and_reports_exhaustion() {
        let first = ModelReply {
            message: AssistantMessage {
                content: Some("hello".into()),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "read".into(),
                    arguments: "{}".into(),
                }],
                ..Default::default()
            },
            usage: Some(Usage {
                prompt_tokens: 3,
                completion_tokens: 2,
                cached_prompt_tokens: None,
                ..Default::default()
            }),
            finish_reason: Some("tool_calls".into()),
            served_model: Some("m".into()),
        };
        let failure = ModelError::new(ErrorClass::RateLimited, "slow").with_status(429);
        let provider = ScriptedProvider::new(vec![Ok(first.clone()), Err(failure.clone())]);
        assert_eq!(provider.describe(), "scripted (2 responses left)");

        let mut rec = Recorder(Vec::new());
        assert_eq!(
            provider.complete(&request("one"), &mut rec).await,
            Ok(first)
        );
        assert_eq!(
            rec.0,
            vec![
                StreamDelta::Text("hello".into()),
                StreamDelta::ToolCall {
                    index: 0,
                    name: Some("read".into()),
                    arguments: "{}".into()
                },
            ]
        );
        assert_eq!(
            provider.complete(&request("two"), &mut rec).await,
            Err(failure)
        );
        let exhausted = provider
            .complete(&request("three"), &mut rec)
            .await
            .unwrap_err();
        assert_eq!(exhausted.class, ErrorClass::InvalidRequest);
        assert!(
            exhausted
                .to_string()
                .contains("scripted provider has no more responses")
        );

        assert_eq!(
            provider.requests(),
            vec![request("one"), request("two"), request("three")]
        );
        assert_eq!(provider.remaining(), 0);
    }
}
