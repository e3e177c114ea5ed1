//! A model provider answering with a function of the request: tests and benchmarks of the
//! context layer need answers that depend on what was asked (a summary for a compaction
//! request, a `recall` of a handle the prompt shows), which a fixed script cannot give.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_core::{
    AssistantMessage, Message, ModelReply, ModelRequest, ToolCall, ToolChoice, Usage,
};
use baton_model::{ModelError, ModelProvider, StreamObserver};

pub type Respond = dyn Fn(&ModelRequest, usize) -> Result<ModelReply, ModelError> + Send + Sync;

pub struct FnProvider {
    respond: Box<Respond>,
    pub requests: Arc<Mutex<Vec<ModelRequest>>>,
}

impl FnProvider {
    pub fn new(
        respond: impl Fn(&ModelRequest, usize) -> Result<ModelReply, ModelError> + Send + Sync + 'static,
    ) -> FnProvider {
        FnProvider {
            respond: Box::new(respond),
            requests: Arc::default(),
        }
    }
}

#[async_trait]
impl ModelProvider for FnProvider {
    fn describe(&self) -> String {
        "function provider".into()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        _observer: &mut dyn StreamObserver,
    ) -> Result<ModelReply, ModelError> {
        let n = {
            let mut requests = self.requests.lock().unwrap_or_else(|e| e.into_inner());
            requests.push(request.clone());
            requests.len() - 1
        };
        (self.respond)(request, n)
    }
}

/// Whether `request` is a compaction's summary request.
#[allow(dead_code)]
pub fn is_summary_request(request: &ModelRequest) -> bool {
    request.tool_choice == ToolChoice::None
}

/// All text of a request, for "does the prompt still say X" checks.
#[allow(dead_code)]
pub fn prompt_text(request: &ModelRequest) -> String {
    request
        .messages
        .iter()
        .map(|m| match m {
            Message::System { content } | Message::User { content } => content.clone(),
            Message::Tool { content, .. } => content.clone(),
            Message::Assistant(a) => {
                let mut text = a.content.clone().unwrap_or_default();
                for call in &a.tool_calls {
                    text.push_str(&call.arguments);
                }
                text
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A reply calling one tool, with a usage report of `prompt_tokens`.
#[allow(dead_code)]
pub fn call(
    name: &str,
    arguments: serde_json::Value,
    prompt_tokens: u64,
) -> Result<ModelReply, ModelError> {
    Ok(ModelReply {
        message: AssistantMessage {
            content: None,
            tool_calls: vec![ToolCall {
                id: String::new(),
                name: name.into(),
                arguments: arguments.to_string(),
            }],
            ..Default::default()
        },
        usage: Some(Usage {
            prompt_tokens,
            completion_tokens: 20,
            ..Default::default()
        }),
        finish_reason: Some("tool_calls".into()),
        served_model: None,
    })
}

/// A text-only reply (a compaction summary).
#[allow(dead_code)]
pub fn text(content: &str, prompt_tokens: u64) -> Result<ModelReply, ModelError> {
    Ok(ModelReply {
        message: AssistantMessage {
            content: Some(content.into()),
            tool_calls: vec![],
            ..Default::default()
        },
        usage: Some(Usage {
            prompt_tokens,
            completion_tokens: 200,
            ..Default::default()
        }),
        finish_reason: Some("stop".into()),
        served_model: None,
    })
}
