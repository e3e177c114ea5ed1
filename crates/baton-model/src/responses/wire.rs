//! The Responses API request body (`POST /v1/responses`), stateless: `store: false`, the whole
//! input array every turn, and the reasoning items of earlier answers sent back in order with
//! their encrypted content (`include: ["reasoning.encrypted_content"]`), so no state lives on
//! the server and a resumed run rebuilds the same bytes.

use baton_core::{AssistantMessage, ErrorClass, Message, ModelRequest, Reasoning, ResponseMode};
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use sha2::{Digest, Sha256};

use crate::ModelError;
use crate::canonical::Canonical;
use crate::tool_choice::{OpenAiToolChoice, openai_tool_choice};

#[derive(Serialize)]
struct ResponsesRequest<'a> {
    model: &'a str,
    input: Vec<InputItem<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<OpenAiToolChoice<ResponsesNamedTool<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<WireReasoning<'a>>,
    /// `verbosity` (GPT-5 family), when configured; absent, the server's default (`medium`).
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<WireText>,
    /// Server-side compaction once the input passes the threshold.
    #[serde(skip_serializing_if = "Option::is_none")]
    context_management: Option<[ContextManagement; 1]>,
    /// Nothing is kept on the server: every request carries the whole history.
    store: bool,
    include: [&'static str; 1],
    /// Routes requests with the same prefix to the same prompt cache.
    prompt_cache_key: String,
    stream: bool,
}

#[derive(Serialize)]
struct ContextManagement {
    #[serde(rename = "type")]
    kind: &'static str,
    compact_threshold: u64,
}

#[derive(Serialize)]
struct WireText {
    verbosity: &'static str,
}

#[derive(Serialize)]
struct WireReasoning<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    effort: Option<&'a str>,
    /// Readable summaries of the reasoning (shown in the progress lines and transcript).
    summary: &'static str,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum InputItem<'a> {
    Message {
        role: &'static str,
        content: [Content<'a>; 1],
    },
    FunctionCall {
        call_id: &'a str,
        name: &'a str,
        arguments: &'a str,
    },
    FunctionCallOutput {
        call_id: &'a str,
        output: &'a str,
    },
    /// A reasoning (or compaction) item of an earlier answer, as the server sent it.
    #[serde(untagged)]
    Verbatim(Box<RawValue>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Content<'a> {
    InputText { text: &'a str },
    OutputText { text: &'a str },
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: Canonical<'a>,
    /// baton's schemas are not written for strict mode (optional fields are optional).
    strict: bool,
}

/// A named function in the Responses `tool_choice`: `{"name": …}` beside its `type`.
#[derive(Serialize)]
struct ResponsesNamedTool<'a> {
    name: &'a str,
}

/// An earlier output item as input: the server's JSON with the fields that only describe the
/// stored output (`id`, `status`) left out — with `store: false` there is nothing stored to
/// refer to — and everything else, the encrypted content above all, unchanged. Keys come out
/// sorted, so the same item always gives the same bytes.
fn verbatim_item(json: &str) -> Result<(Box<RawValue>, bool), ModelError> {
    let mut item: serde_json::Map<String, Value> = serde_json::from_str(json).map_err(|e| {
        ModelError::new(
            ErrorClass::InvalidRequest,
            format!("a journaled reasoning item is not a JSON object ({e})"),
        )
    })?;
    item.remove("id");
    item.remove("status");
    let compaction = matches!(
        item.get("type").and_then(Value::as_str),
        Some("compaction" | "compaction_summary")
    );
    let text = serde_json::to_string(&Canonical(&Value::Object(item)))
        .map_err(|e| ModelError::new(ErrorClass::InvalidRequest, e.to_string()))?;
    let raw = RawValue::from_string(text)
        .map_err(|e| ModelError::new(ErrorClass::InvalidRequest, e.to_string()))?;
    Ok((raw, compaction))
}

/// Appends an assistant message's items; returns the position of its last compaction item.
fn assistant_items<'a>(
    assistant: &'a AssistantMessage,
    items: &mut Vec<InputItem<'a>>,
) -> Result<Option<usize>, ModelError> {
    let mut compaction = None;
    // Reasoning first, in order: each reasoning item must come before the item it led to.
    for part in &assistant.reasoning {
        if let Reasoning::Item { json, .. } = part {
            let (raw, is_compaction) = verbatim_item(json)?;
            if is_compaction {
                compaction = Some(items.len());
            }
            items.push(InputItem::Verbatim(raw));
        }
    }
    if let Some(text) = assistant.content.as_deref().filter(|t| !t.is_empty()) {
        items.push(InputItem::Message {
            role: "assistant",
            content: [Content::OutputText { text }],
        });
    }
    for call in &assistant.tool_calls {
        items.push(InputItem::FunctionCall {
            call_id: &call.id,
            name: &call.name,
            arguments: &call.arguments,
        });
    }
    Ok(compaction)
}

/// After a provider compaction, the items before its compaction item are left out, as OpenAI
/// documents ("drop items that came before the most recent compaction item"): the item
/// carries their context. System messages stay — they are the run's instructions and the
/// prefix the prompt cache keys on.
fn after_last_compaction(input: Vec<InputItem<'_>>, at: Option<usize>) -> Vec<InputItem<'_>> {
    let Some(at) = at else {
        return input;
    };
    input
        .into_iter()
        .enumerate()
        .filter(|(i, item)| *i >= at || matches!(item, InputItem::Message { role: "system", .. }))
        .map(|(_, item)| item)
        .collect()
}

/// `baton-` and 16 hex digits of the model and the first messages (system prompt and goal):
/// stable for a run, shared by runs that start alike — which is what the cache can reuse.
fn cache_key(request: &ModelRequest) -> String {
    let mut hash = Sha256::new();
    hash.update(request.model.as_bytes());
    for message in request.messages.iter().take(2) {
        if let Message::System { content } | Message::User { content } = message {
            hash.update([0]);
            hash.update(content.as_bytes());
        }
    }
    let digest = hash.finalize();
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("baton-{hex}")
}

/// The exact bytes sent as the body of a Responses request.
pub fn request_body(request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
    let mut input = Vec::with_capacity(request.messages.len() + 4);
    let mut last_compaction = None;
    for message in &request.messages {
        match message {
            Message::System { content } => input.push(InputItem::Message {
                role: "system",
                content: [Content::InputText { text: content }],
            }),
            Message::User { content } => input.push(InputItem::Message {
                role: "user",
                content: [Content::InputText { text: content }],
            }),
            Message::Assistant(assistant) => {
                if let Some(at) = assistant_items(assistant, &mut input)? {
                    last_compaction = Some(at);
                }
            }
            Message::Tool {
                call_id, content, ..
            } => input.push(InputItem::FunctionCallOutput {
                call_id,
                output: content,
            }),
        }
    }
    let input = after_last_compaction(input, last_compaction);
    let tools: Vec<WireTool<'_>> = request
        .tools
        .iter()
        .map(|tool| WireTool {
            kind: "function",
            name: &tool.name,
            description: &tool.description,
            parameters: Canonical(&tool.parameters),
            strict: false,
        })
        .collect();
    let body = ResponsesRequest {
        model: &request.model,
        parallel_tool_calls: (!tools.is_empty()).then_some(true),
        input,
        tools,
        tool_choice: openai_tool_choice(request, |name| ResponsesNamedTool { name }),
        // Asked for unless thinking is off: the models this wire exists for all reason.
        reasoning: (request.reasoning.thinking != Some(baton_core::Thinking::Off)).then_some(
            WireReasoning {
                effort: request.reasoning.effort.as_deref(),
                summary: "auto",
            },
        ),
        text: request.reasoning.verbosity.map(|v| WireText {
            verbosity: v.as_str(),
        }),
        context_management: request.provider_compaction_at.map(|threshold| {
            [ContextManagement {
                kind: "compaction",
                compact_threshold: threshold,
            }]
        }),
        store: false,
        include: ["reasoning.encrypted_content"],
        prompt_cache_key: cache_key(request),
        stream: request.response_mode == ResponseMode::Streaming,
    };
    serde_json::to_vec(&body).map_err(|e| {
        ModelError::new(
            ErrorClass::InvalidRequest,
            format!("could not encode the request: {e}"),
        )
    })
}
