//! The Chat Completions request body.
//!
//! Typed structs with a fixed field order, so the same [`ModelRequest`] always serializes to the
//! same bytes: provider prompt caches match on exact prefixes, and tests can compare bytes.

use baton_core::{
    AssistantMessage, ErrorClass, Message, ModelRequest, Reasoning, ReasoningField,
    ReasoningHistory, ResponseMode, Thinking, ToolSpec,
};
use serde::Serialize;

use crate::ModelError;
use crate::canonical::Canonical;
use crate::tool_choice::{OpenAiToolChoice, openai_tool_choice};

#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<OpenAiToolChoice<ChatNamedTool<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
    /// DeepSeek's and GLM's switch: `{"type": "enabled" | "disabled"}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<WireThinking>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

/// A named function in Chat's `tool_choice`: `{"function": {"name": …}}`.
#[derive(Serialize)]
struct ChatNamedTool<'a> {
    function: WireToolName<'a>,
}

#[derive(Serialize)]
struct WireToolName<'a> {
    name: &'a str,
}

#[derive(Serialize)]
struct WireThinking {
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct StreamOptions {
    /// Asks for a final chunk carrying token usage, which streams otherwise omit.
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        content: &'a str,
        /// Reasoning sent back (rule `preserve`), under the name it came in.
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: Canonical<'a>,
}

/// The reasoning text an assistant message sends back, and under which name: with rule
/// `preserve`, on every assistant message that has some. DeepSeek answers 400 ("The
/// `reasoning_content` in the thinking mode must be passed back to the API.") when it is
/// missing from the messages of a stretch with tool calls, including that stretch's final text
/// reply, and ignores it elsewhere; sending it wherever it exists is right in both cases.
fn returned_reasoning(
    assistant: &AssistantMessage,
    history: ReasoningHistory,
) -> Option<(String, ReasoningField)> {
    if history == ReasoningHistory::Drop {
        return None;
    }
    let mut field = None;
    let text: String = assistant
        .reasoning
        .iter()
        .filter_map(|r| match r {
            Reasoning::Text { text, field: f } => {
                field.get_or_insert(*f);
                Some(text.as_str())
            }
            // Other wires' reasoning cannot be expressed on this one.
            _ => None,
        })
        .collect();
    field.map(|f| (text, f))
}

fn wire_message(message: &Message, history: ReasoningHistory) -> WireMessage<'_> {
    match message {
        Message::System { content } => WireMessage::System { content },
        Message::User { content } => WireMessage::User { content },
        Message::Assistant(assistant) => {
            let reasoning = returned_reasoning(assistant, history);
            let (reasoning_content, reasoning) = match reasoning {
                Some((text, ReasoningField::ReasoningContent)) => (Some(text), None),
                Some((text, ReasoningField::Reasoning)) => (None, Some(text)),
                None => (None, None),
            };
            wire_assistant(assistant, reasoning_content, reasoning)
        }
        // The tool's name is not part of the wire format: the call id links result and call.
        Message::Tool {
            call_id,
            name: _,
            content,
        } => WireMessage::Tool {
            tool_call_id: call_id,
            content,
        },
    }
}

fn wire_assistant<'a>(
    assistant: &'a AssistantMessage,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
) -> WireMessage<'a> {
    WireMessage::Assistant {
        // Always a string: "" when the model said nothing. `null` is what OpenAI documents for
        // tool-call-only answers, but llama.cpp's server (llama-cpp-python) rejects it with a
        // 500, and strict servers reject an assistant message with neither text nor calls.
        content: assistant.content.as_deref().unwrap_or(""),
        reasoning_content,
        reasoning,
        tool_calls: assistant
            .tool_calls
            .iter()
            .map(|call| WireToolCall {
                id: &call.id,
                kind: "function",
                function: WireFunctionCall {
                    name: &call.name,
                    arguments: &call.arguments,
                },
            })
            .collect(),
    }
}

fn wire_tool(tool: &ToolSpec) -> WireTool<'_> {
    // `effect` is baton's own business (resume policy); the model does not need it.
    WireTool {
        kind: "function",
        function: WireFunction {
            name: &tool.name,
            description: &tool.description,
            parameters: Canonical(&tool.parameters),
        },
    }
}

/// The exact bytes sent as the body of a Chat Completions request.
pub fn request_body(request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
    let streaming = request.response_mode == ResponseMode::Streaming;
    let history = request.reasoning.history;
    let body = ChatRequest {
        model: &request.model,
        messages: request
            .messages
            .iter()
            .map(|m| wire_message(m, history))
            .collect(),
        tools: request.tools.iter().map(wire_tool).collect(),
        tool_choice: openai_tool_choice(request, |name| ChatNamedTool {
            function: WireToolName { name },
        }),
        reasoning_effort: request.reasoning.effort.as_deref(),
        thinking: request.reasoning.thinking.map(|t| WireThinking {
            kind: match t {
                Thinking::Adaptive | Thinking::Enabled => "enabled",
                Thinking::Off => "disabled",
            },
        }),
        stream: streaming,
        stream_options: streaming.then_some(StreamOptions {
            include_usage: true,
        }),
    };
    // Only string-keyed maps and plain values are serialized, so this cannot fail in practice;
    // if it ever does, the request is ours to fix, not the server's.
    serde_json::to_vec(&body).map_err(|e| {
        ModelError::new(
            ErrorClass::InvalidRequest,
            format!("could not encode the request: {e}"),
        )
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use baton_core::{AssistantMessage, ToolCall, ToolChoice, ToolEffect};

    fn sample(mode: ResponseMode) -> ModelRequest {
        ModelRequest {
            model: "gpt-test".into(),
            messages: vec![
                Message::System {
                    content: "You are baton.".into(),
                },
                Message::User {
                    content: "Fix the build.".into(),
                },
                Message::Assistant(AssistantMessage {
                    content: Some("Looking.".into()),
                    tool_calls: vec![
                        ToolCall {
                            id: "call_1".into(),
                            name: "read_file".into(),
                            arguments: r#"{"path":"Cargo.toml"}"#.into(),
                        },
                        ToolCall {
                            id: "call_2".into(),
                            name: "shell".into(),
                            arguments: r#"{"command":"cargo build"}"#.into(),
                        },
                    ],
                    ..Default::default()
                }),
                Message::Tool {
                    call_id: "call_1".into(),
                    name: "read_file".into(),
                    content: "[package]\nname = \"x\"".into(),
                },
                Message::Tool {
                    call_id: "call_2".into(),
                    name: "shell".into(),
                    content: "ok".into(),
                },
                Message::Assistant(AssistantMessage {
                    content: None,
                    tool_calls: vec![],
                    ..Default::default()
                }),
            ],
            tools: vec![
                ToolSpec {
                    name: "read_file".into(),
                    description: "Read a file.".into(),
                    parameters: serde_json::json!({
                        "type": "object",
                        "properties": {"path": {"type": "string"}},
                        "required": ["path"]
                    }),
                    effect: ToolEffect::ReadOnly,
                },
                ToolSpec {
                    name: "shell".into(),
                    description: "Run a command.".into(),
                    parameters: serde_json::json!({
                        "type": "object",
                        "properties": {"command": {"type": "string"}, "timeout_secs": {"type": "integer"}},
                        "required": ["command"]
                    }),
                    effect: ToolEffect::Mutating,
                },
            ],
            response_mode: mode,
            tool_choice: Default::default(),
            reasoning: Default::default(),
            provider_compaction_at: Default::default(),
        }
    }

    fn body_text(request: &ModelRequest) -> String {
        String::from_utf8(request_body(request).unwrap()).unwrap()
    }

    #[test]
    fn streaming_body_snapshot() {
        insta::assert_snapshot!(body_text(&sample(ResponseMode::Streaming)));
    }

    #[test]
    fn whole_body_differs_only_in_stream_fields() {
        let streaming: serde_json::Value =
            serde_json::from_str(&body_text(&sample(ResponseMode::Streaming))).unwrap();
        let whole: serde_json::Value =
            serde_json::from_str(&body_text(&sample(ResponseMode::Whole))).unwrap();
        assert_eq!(whole["stream"], serde_json::json!(false));
        assert!(whole.get("stream_options").is_none());
        assert_eq!(
            streaming["stream_options"],
            serde_json::json!({"include_usage": true})
        );
        assert_eq!(whole["messages"], streaming["messages"]);
        assert_eq!(whole["tools"], streaming["tools"]);
    }

    #[test]
    fn same_request_gives_identical_bytes() {
        let a = request_body(&sample(ResponseMode::Streaming)).unwrap();
        let b = request_body(&sample(ResponseMode::Streaming).clone()).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn tools_key_is_omitted_when_there_are_none() {
        let mut request = sample(ResponseMode::Whole);
        request.tools.clear();
        request.messages.truncate(2);
        assert_eq!(
            body_text(&request),
            r#"{"model":"gpt-test","messages":[{"role":"system","content":"You are baton."},{"role":"user","content":"Fix the build."}],"stream":false}"#
        );
    }

    #[test]
    fn effect_is_not_sent() {
        let text = body_text(&sample(ResponseMode::Streaming));
        assert!(!text.contains("effect"));
        assert!(!text.contains("read_only"));
        assert!(!text.contains("mutating"));
    }

    #[test]
    fn tool_choice_is_sent_only_when_not_auto_and_tools_exist() {
        let body = |choice: ToolChoice, with_tools: bool| {
            let mut request = sample(ResponseMode::Whole);
            request.tool_choice = choice;
            if !with_tools {
                request.tools.clear();
            }
            serde_json::from_str::<serde_json::Value>(&body_text(&request)).unwrap()["tool_choice"]
                .clone()
        };
        assert_eq!(body(ToolChoice::Auto, true), serde_json::Value::Null);
        assert_eq!(
            body(ToolChoice::Required, true),
            serde_json::json!("required")
        );
        assert_eq!(
            body(ToolChoice::Function("shell".into()), true),
            serde_json::json!({"type": "function", "function": {"name": "shell"}})
        );
        assert_eq!(body(ToolChoice::Required, false), serde_json::Value::Null);
    }

    #[test]
    fn a_tool_call_only_answer_is_sent_with_empty_content_not_null() {
        let mut request = sample(ResponseMode::Whole);
        request.messages = vec![Message::Assistant(AssistantMessage {
            content: None,
            tool_calls: vec![ToolCall {
                id: "c".into(),
                name: "shell".into(),
                arguments: "{}".into(),
            }],
            ..Default::default()
        })];
        let body: serde_json::Value = serde_json::from_str(&body_text(&request)).unwrap();
        assert_eq!(body["messages"][0]["content"], serde_json::json!(""));
        assert_eq!(body["messages"][0]["tool_calls"][0]["id"], "c");
    }

    fn with_reasoning(field: ReasoningField, calls: bool) -> AssistantMessage {
        AssistantMessage {
            content: Some("ok".into()),
            tool_calls: if calls {
                vec![ToolCall {
                    id: "c".into(),
                    name: "shell".into(),
                    arguments: "{}".into(),
                }]
            } else {
                vec![]
            },
            reasoning: vec![
                Reasoning::Text {
                    text: "first \"part\"\n".into(),
                    field,
                },
                // Another wire's reasoning has no form here and is left out.
                Reasoning::Thinking {
                    thinking: "t".into(),
                    signature: "s".into(),
                },
            ],
        }
    }

    #[test]
    fn reasoning_goes_back_under_its_own_name_unless_the_rule_drops_it() {
        let body = |history: ReasoningHistory, field: ReasoningField, calls: bool| {
            let mut request = sample(ResponseMode::Whole);
            request.tools.clear();
            request.messages = vec![Message::Assistant(with_reasoning(field, calls))];
            request.reasoning.history = history;
            serde_json::from_str::<serde_json::Value>(&body_text(&request)).unwrap()["messages"][0]
                .clone()
        };
        use ReasoningField::*;
        use ReasoningHistory::*;
        let m = body(Preserve, ReasoningContent, true);
        assert_eq!(m["reasoning_content"], "first \"part\"\n");
        assert!(m.get("reasoning").is_none());
        let m = body(Preserve, Reasoning, true);
        assert_eq!(m["reasoning"], "first \"part\"\n");
        assert!(m.get("reasoning_content").is_none());
        // A final text reply of a tool-calling stretch needs it too.
        assert_eq!(
            body(Preserve, ReasoningContent, false)["reasoning_content"],
            "first \"part\"\n"
        );
        let m = body(Drop, ReasoningContent, true);
        assert!(m.get("reasoning_content").is_none() && m.get("reasoning").is_none());
    }

    #[test]
    fn effort_and_thinking_are_sent_only_when_set() {
        let mut request = sample(ResponseMode::Whole);
        let plain = body_text(&request);
        assert!(!plain.contains("reasoning_effort") && !plain.contains("thinking"));
        request.reasoning.effort = Some("max".into());
        request.reasoning.thinking = Some(Thinking::Off);
        let body: serde_json::Value = serde_json::from_str(&body_text(&request)).unwrap();
        assert_eq!(body["reasoning_effort"], "max");
        assert_eq!(body["thinking"], serde_json::json!({"type": "disabled"}));
    }
}
