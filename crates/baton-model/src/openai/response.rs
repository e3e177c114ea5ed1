//! What Chat Completions servers answer, read leniently: compatible servers differ in which
//! fields they send, send `null` for absent ones, and sometimes use other shapes (content as a
//! list of parts, tool arguments as an object).

use baton_core::{
    AssistantMessage, ErrorClass, ModelReply, Reasoning, ReasoningField, ToolCall, Usage,
};
use serde::Deserialize;
use serde_json::Value;

use crate::ModelError;
use crate::error::{classify_error_payload, excerpt};

#[derive(Deserialize)]
pub(crate) struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptTokensDetails>,
    /// DeepSeek's name for cached prompt tokens.
    prompt_cache_hit_tokens: Option<u64>,
    completion_tokens_details: Option<CompletionTokensDetails>,
}

#[derive(Deserialize)]
struct CompletionTokensDetails {
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct PromptTokensDetails {
    cached_tokens: Option<u64>,
}

impl WireUsage {
    pub(crate) fn to_usage(&self) -> Usage {
        let cached = self
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens);
        Usage {
            prompt_tokens: self.prompt_tokens.unwrap_or(0),
            completion_tokens: self.completion_tokens.unwrap_or(0),
            cached_prompt_tokens: cached.or(self.prompt_cache_hit_tokens),
            // OpenAI-compatible servers do not bill cache writes separately.
            cache_write_tokens: None,
            reasoning_tokens: self
                .completion_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens)
                .filter(|&n| n > 0),
        }
    }
}

#[derive(Deserialize)]
struct ChatCompletion {
    model: Option<String>,
    choices: Option<Vec<Choice>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    index: Option<u32>,
    message: Option<ResponseMessage>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ResponseMessage {
    content: Option<Value>,
    tool_calls: Option<Vec<ResponseToolCall>>,
    reasoning_content: Option<Value>,
    reasoning: Option<Value>,
}

/// Reasoning text from the two names servers give it — `reasoning_content` (DeepSeek, Kimi,
/// GLM, older vLLM) and `reasoning` (newer vLLM, OpenRouter, Ollama) — with the field it came
/// in; `reasoning_content` wins when a server sends both (the alias then repeats it).
pub(crate) fn reasoning_text(
    reasoning_content: Option<&Value>,
    reasoning: Option<&Value>,
) -> Option<(String, ReasoningField)> {
    let text = |v: Option<&Value>| v.and_then(content_text).filter(|t| !t.is_empty());
    text(reasoning_content)
        .map(|t| (t, ReasoningField::ReasoningContent))
        .or_else(|| text(reasoning).map(|t| (t, ReasoningField::Reasoning)))
}

#[derive(Deserialize)]
struct ResponseToolCall {
    id: Option<String>,
    function: Option<ResponseFunction>,
}

#[derive(Deserialize)]
struct ResponseFunction {
    name: Option<String>,
    arguments: Option<Value>,
}

/// Text of a `content` field: a string, or the `text` of each part of a list of parts.
pub(crate) fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => {
            let text: String = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            Some(text)
        }
        _ => None,
    }
}

/// Tool arguments as raw text. Some servers send an object instead of the JSON string the spec
/// asks for; it is re-encoded so the tool sees the same text either way.
pub(crate) fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// An `error` member that is present and not `null`.
pub(crate) fn in_band_error(error: Option<&Value>) -> Option<&Value> {
    error.filter(|e| !e.is_null())
}

/// Parses a whole (non-streamed) response body.
pub(crate) fn parse_whole(body: &[u8]) -> Result<ModelReply, ModelError> {
    let text = String::from_utf8_lossy(body);
    let completion: ChatCompletion = serde_json::from_slice(body).map_err(|e| {
        ModelError::new(
            ErrorClass::BadResponse,
            format!(
                "response is not a chat completion ({e}): {}",
                excerpt(&text)
            ),
        )
    })?;
    if let Some(error) = in_band_error(completion.error.as_ref()) {
        return Err(classify_error_payload(error, &text));
    }
    let choices = completion.choices.unwrap_or_default();
    // Only one choice is asked for; a server that numbers choices is read at index 0.
    let choice = choices
        .into_iter()
        .find(|c| c.index.unwrap_or(0) == 0)
        .ok_or_else(|| {
            ModelError::new(
                ErrorClass::BadResponse,
                format!("response has no choice: {}", excerpt(&text)),
            )
        })?;
    let message = choice.message.map(|m| {
        let tool_calls = m
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .map(|call| {
                let function = call.function;
                ToolCall {
                    // A missing id is left empty: the engine gives such calls ids of its own.
                    id: call.id.unwrap_or_default(),
                    name: function
                        .as_ref()
                        .and_then(|f| f.name.clone())
                        .unwrap_or_default(),
                    arguments: function
                        .as_ref()
                        .and_then(|f| f.arguments.as_ref())
                        .map(arguments_text)
                        .unwrap_or_default(),
                }
            })
            .collect();
        AssistantMessage {
            content: m
                .content
                .as_ref()
                .and_then(content_text)
                .filter(|t| !t.is_empty()),
            tool_calls,
            reasoning: reasoning_text(m.reasoning_content.as_ref(), m.reasoning.as_ref())
                .map(|(text, field)| vec![Reasoning::Text { text, field }])
                .unwrap_or_default(),
        }
    });
    if completion.usage.is_none() {
        tracing::info!("chat completion response carries no usage; recorded as unreported");
    }
    Ok(ModelReply {
        message: message.unwrap_or_default(),
        usage: completion.usage.as_ref().map(WireUsage::to_usage),
        finish_reason: choice.finish_reason,
        served_model: completion.model.filter(|m| !m.is_empty()),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_text_tool_calls_usage_and_model() {
        let body = serde_json::json!({
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-test-2024",
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [
                        {"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}},
                        {"type": "function", "function": {"name": "shell", "arguments": {"command": "ls"}}}
                    ]
                },
                "finish_reason": "tool_calls"
            }],
            "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150,
                      "prompt_tokens_details": {"cached_tokens": 100}}
        });
        let reply = parse_whole(body.to_string().as_bytes()).unwrap();
        assert_eq!(reply.message.content, None);
        assert_eq!(
            reply.message.tool_calls,
            vec![
                ToolCall {
                    id: "call_a".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"a"}"#.into()
                },
                ToolCall {
                    id: String::new(),
                    name: "shell".into(),
                    arguments: r#"{"command":"ls"}"#.into()
                },
            ]
        );
        assert_eq!(
            reply.usage,
            Some(Usage {
                prompt_tokens: 120,
                completion_tokens: 30,
                cached_prompt_tokens: Some(100),
                ..Default::default()
            })
        );
        assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(reply.served_model.as_deref(), Some("gpt-test-2024"));
    }

    #[test]
    fn lenient_shapes() {
        let body = r#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"tool_calls":null},"finish_reason":"stop"}],
                       "usage":{"prompt_tokens":5,"completion_tokens":1,"prompt_cache_hit_tokens":4}}"#;
        let reply = parse_whole(body.as_bytes()).unwrap();
        assert_eq!(reply.message.content.as_deref(), Some("ab"));
        assert!(reply.message.tool_calls.is_empty());
        assert_eq!(reply.usage.unwrap().cached_prompt_tokens, Some(4));
        assert_eq!(reply.served_model, None);

        let no_usage =
            r#"{"model":"m","choices":[{"message":{"content":"hi"},"finish_reason":null}]}"#;
        let reply = parse_whole(no_usage.as_bytes()).unwrap();
        assert_eq!(reply.usage, None);
        assert_eq!(reply.message.content.as_deref(), Some("hi"));
        assert_eq!(reply.finish_reason, None);
    }

    #[test]
    fn errors_and_garbage() {
        let err = parse_whole(b"not json").unwrap_err();
        assert_eq!(err.class, ErrorClass::BadResponse);
        assert!(err.message.contains("not json"));

        let err = parse_whole(br#"{"choices":[]}"#).unwrap_err();
        assert_eq!(err.class, ErrorClass::BadResponse);

        let err = parse_whole(br#"{"error":{"type":"insufficient_quota","message":"pay up"}}"#)
            .unwrap_err();
        assert_eq!(err.class, ErrorClass::QuotaExhausted);

        let err = parse_whole(b"\xff\xfe{").unwrap_err();
        assert_eq!(err.class, ErrorClass::BadResponse);

        // `"error": null` is not an error.
        let ok = parse_whole(br#"{"error":null,"choices":[{"message":{"content":"x"}}]}"#).unwrap();
        assert_eq!(ok.message.content.as_deref(), Some("x"));
    }

    #[test]
    fn arguments_and_content_helpers() {
        assert_eq!(
            arguments_text(&Value::String("{\"a\":1".into())),
            "{\"a\":1"
        );
        assert_eq!(arguments_text(&Value::Null), "");
        assert_eq!(
            arguments_text(&serde_json::json!({"a": [1, 2]})),
            r#"{"a":[1,2]}"#
        );
        assert_eq!(content_text(&Value::Null), None);
        assert_eq!(content_text(&serde_json::json!(7)), None);
    }

    #[test]
    fn reasoning_comes_from_either_name_and_reasoning_content_wins() {
        let reply = |message: serde_json::Value| {
            let body = serde_json::json!({"choices": [{"index": 0, "message": message,
                "finish_reason": "stop"}]});
            parse_whole(body.to_string().as_bytes())
                .unwrap()
                .message
                .reasoning
        };
        let text = |t: &str, field| {
            vec![Reasoning::Text {
                text: t.into(),
                field,
            }]
        };
        assert_eq!(
            reply(serde_json::json!({"content": "a", "reasoning_content": "r1"})),
            text("r1", ReasoningField::ReasoningContent)
        );
        assert_eq!(
            reply(serde_json::json!({"content": "a", "reasoning": "r2"})),
            text("r2", ReasoningField::Reasoning)
        );
        assert_eq!(
            reply(
                serde_json::json!({"content": "a", "reasoning_content": "r1", "reasoning": "r1"})
            ),
            text("r1", ReasoningField::ReasoningContent)
        );
        // Absent, null, empty or an object (OpenRouter's details live elsewhere): none.
        for message in [
            serde_json::json!({"content": "a"}),
            serde_json::json!({"content": "a", "reasoning_content": null}),
            serde_json::json!({"content": "a", "reasoning_content": ""}),
            serde_json::json!({"content": "a", "reasoning": {"effort": "high"}}),
        ] {
            assert_eq!(reply(message), vec![]);
        }
    }
}
