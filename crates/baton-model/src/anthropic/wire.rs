//! The Messages API request body.
//!
//! Typed structs with a fixed field order and sorted keys inside JSON values, so the same
//! [`ModelRequest`] always serializes to the same bytes: Anthropic's prompt cache matches exact
//! prefixes, and tests can compare bytes.
//!
//! The neutral history does not map one to one: the API has no system role (system text goes in
//! the top-level `system`), tool results are `tool_result` blocks inside a user message, roles
//! must alternate, and empty text blocks are rejected. See [`request_body`].

use baton_core::{
    AssistantMessage, ErrorClass, Message, ModelRequest, Reasoning, ResponseMode, Thinking,
    ToolChoice,
};
use serde::{Serialize, Serializer};
use serde_json::Value;

use crate::ModelError;
use crate::canonical::Canonical;

/// Stands in for text that is empty or only whitespace: the API rejects empty text blocks and
/// messages without content (the same words Anthropic's own clients use).
pub const EMPTY_TEXT: &str = "(no content)";

/// Key under which tool arguments that are not a JSON object are sent (see [`request_body`]).
pub const UNPARSED_ARGUMENTS_KEY: &str = "_unparsed_arguments";

#[derive(Serialize)]
struct MessagesRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<Block<'a>>,
    messages: Vec<Turn<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<WireThinking>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<OutputConfig<'a>>,
    /// Server-side context editing (`[context] compaction = "provider"`).
    #[serde(skip_serializing_if = "Option::is_none")]
    context_management: Option<ContextManagement>,
    stream: bool,
}

#[derive(Serialize)]
struct ContextManagement {
    edits: [Edit; 1],
}

/// One context-management edit, applied by the API once the input passes `trigger` tokens.
/// - `compact_20260112` (the models [`server_compaction`] names): the API summarises the
///   history into a `compaction` block, which the answer carries; it is journaled and sent
///   back, and the API ignores every block before it.
/// - `clear_tool_uses_20250919` (other models): the oldest tool results are replaced by
///   placeholders before the model sees them; the request (and the journal) keep everything.
#[derive(Serialize)]
struct Edit {
    #[serde(rename = "type")]
    kind: &'static str,
    trigger: InputTokens,
}

/// Anthropic's smallest compaction trigger, in input tokens.
const MIN_COMPACTION_TRIGGER: u64 = 50_000;

/// Whether the API compacts `model`'s history server-side (`compact_20260112`): the models
/// Anthropic's compaction page lists.
pub(crate) fn server_compaction(model: &str) -> bool {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    [
        "claude-opus-4-6",
        "claude-sonnet-4-6",
        "claude-opus-4-7",
        "claude-mythos",
    ]
    .iter()
    .any(|prefix| name.starts_with(prefix))
}

#[derive(Serialize)]
struct InputTokens {
    #[serde(rename = "type")]
    kind: &'static str,
    value: u64,
}

#[derive(Serialize)]
struct WireThinking {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    budget_tokens: Option<u32>,
}

#[derive(Serialize)]
struct OutputConfig<'a> {
    effort: &'a str,
}

/// `budget_tokens` when `thinking = "enabled"` names none (the API's minimum is 1024).
pub const DEFAULT_THINKING_BUDGET: u32 = 8192;
/// The API refuses a smaller budget.
pub const MIN_THINKING_BUDGET: u32 = 1024;

/// The `thinking` object, and the `max_tokens` to send with it: the budget must stay below
/// `max_tokens`, so a budget that reaches it gets `max_tokens` of room on top.
fn thinking(request: &ModelRequest, max_tokens: u32) -> (Option<WireThinking>, u32) {
    match request.reasoning.thinking {
        None => (None, max_tokens),
        Some(Thinking::Adaptive) => (
            Some(WireThinking {
                kind: "adaptive",
                budget_tokens: None,
            }),
            max_tokens,
        ),
        Some(Thinking::Off) => (
            Some(WireThinking {
                kind: "disabled",
                budget_tokens: None,
            }),
            max_tokens,
        ),
        Some(Thinking::Enabled) => {
            let budget = request
                .reasoning
                .thinking_budget
                .unwrap_or(DEFAULT_THINKING_BUDGET)
                .max(MIN_THINKING_BUDGET);
            let max_tokens = if budget >= max_tokens {
                budget.saturating_add(max_tokens)
            } else {
                max_tokens
            };
            (
                Some(WireThinking {
                    kind: "enabled",
                    budget_tokens: Some(budget),
                }),
                max_tokens,
            )
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Role {
    User,
    Assistant,
}

#[derive(Serialize)]
struct Turn<'a> {
    role: Role,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

/// The only cache type there is: about five minutes, refreshed on every hit.
const EPHEMERAL: Option<CacheControl> = Some(CacheControl { kind: "ephemeral" });

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: ToolInput<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolResult {
        tool_use_id: &'a str,
        /// Left out when empty: `content` is optional, and an empty text would be rejected.
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    /// Returned verbatim, signature and all: the API checks it in a tool loop.
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
    /// Server-side compaction's summary, returned as it came (the API then ignores every
    /// block before it).
    Compaction {
        content: Option<&'a str>,
        encrypted_content: Option<&'a str>,
    },
}

impl Block<'_> {
    fn mark_cache_breakpoint(&mut self) {
        match self {
            Block::Text { cache_control, .. }
            | Block::ToolUse { cache_control, .. }
            | Block::ToolResult { cache_control, .. } => *cache_control = EPHEMERAL,
            // Thinking blocks cannot carry a breakpoint; the breakpoints sit on user turns.
            Block::Thinking { .. } | Block::RedactedThinking { .. } | Block::Compaction { .. } => {}
        }
    }

    fn is_tool_result(&self) -> bool {
        matches!(self, Block::ToolResult { .. })
    }
}

/// A tool call's arguments as the `input` object the API requires.
enum ToolInput<'a> {
    Object(Value),
    Unparsed(&'a str),
}

impl Serialize for ToolInput<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            ToolInput::Object(value) => Canonical(value).serialize(serializer),
            ToolInput::Unparsed(raw) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry(UNPARSED_ARGUMENTS_KEY, raw)?;
                map.end()
            }
        }
    }
}

fn tool_input(arguments: &str) -> ToolInput<'_> {
    if arguments.trim().is_empty() {
        // Some servers stream no argument text for a call without parameters.
        return ToolInput::Object(Value::Object(serde_json::Map::new()));
    }
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => ToolInput::Object(value),
        // Sending `{}` would silently drop what the model wrote; the wrapper keeps it visible to
        // the model, which can see and correct its own malformed call.
        _ => ToolInput::Unparsed(arguments),
    }
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: Canonical<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireToolChoice<'a> {
    Any,
    None,
    Tool { name: &'a str },
}

fn wire_tool_choice(request: &ModelRequest) -> Option<WireToolChoice<'_>> {
    if request.tools.is_empty() {
        return None;
    }
    match &request.tool_choice {
        // `auto` is the API's default.
        ToolChoice::Auto => None,
        ToolChoice::Required => Some(WireToolChoice::Any),
        ToolChoice::None => Some(WireToolChoice::None),
        ToolChoice::Function(name) => Some(WireToolChoice::Tool { name }),
    }
}

fn text_or_placeholder(text: &str) -> &str {
    if text.trim().is_empty() {
        EMPTY_TEXT
    } else {
        text
    }
}

fn assistant_blocks(message: &AssistantMessage) -> Vec<Block<'_>> {
    let mut blocks = Vec::with_capacity(message.tool_calls.len() + message.reasoning.len() + 1);
    // Thinking first, as the model produced it; other wires' reasoning has no form here.
    for part in &message.reasoning {
        match part {
            Reasoning::Thinking {
                thinking,
                signature,
            } => blocks.push(Block::Thinking {
                thinking,
                signature,
            }),
            Reasoning::RedactedThinking { data } => blocks.push(Block::RedactedThinking { data }),
            Reasoning::Compaction {
                content,
                encrypted_content,
            } => blocks.push(Block::Compaction {
                content: content.as_deref(),
                encrypted_content: encrypted_content.as_deref(),
            }),
            Reasoning::Text { .. } | Reasoning::Item { .. } => {}
        }
    }
    if let Some(text) = message.content.as_deref().filter(|t| !t.trim().is_empty()) {
        blocks.push(Block::Text {
            text,
            cache_control: None,
        });
    }
    for call in &message.tool_calls {
        blocks.push(Block::ToolUse {
            id: &call.id,
            name: &call.name,
            input: tool_input(&call.arguments),
            cache_control: None,
        });
    }
    if blocks.is_empty() {
        // Only a final assistant message may be empty, and baton never ends with one.
        blocks.push(Block::Text {
            text: EMPTY_TEXT,
            cache_control: None,
        });
    }
    blocks
}

/// Splits the neutral history into the system blocks and alternating user/assistant turns.
fn turns(messages: &[Message]) -> (Vec<Block<'_>>, Vec<Turn<'_>>) {
    fn push<'a>(turns: &mut Vec<Turn<'a>>, role: Role, blocks: Vec<Block<'a>>) {
        match turns.last_mut() {
            // The API requires alternating roles: consecutive messages of one role become one.
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => turns.push(Turn {
                role,
                content: blocks,
            }),
        }
    }
    let mut system = Vec::new();
    let mut turns: Vec<Turn<'_>> = Vec::new();
    for message in messages {
        match message {
            Message::System { content } => {
                if !content.trim().is_empty() {
                    system.push(Block::Text {
                        text: content,
                        cache_control: None,
                    });
                }
            }
            Message::User { content } => push(
                &mut turns,
                Role::User,
                vec![Block::Text {
                    text: text_or_placeholder(content),
                    cache_control: None,
                }],
            ),
            Message::Assistant(assistant) => {
                push(&mut turns, Role::Assistant, assistant_blocks(assistant));
            }
            // The tool's name is not part of the wire format: the id links result and call.
            Message::Tool {
                call_id,
                name: _,
                content,
            } => push(
                &mut turns,
                Role::User,
                vec![Block::ToolResult {
                    tool_use_id: call_id,
                    content: (!content.is_empty()).then_some(content.as_str()),
                    cache_control: None,
                }],
            ),
        }
    }
    for turn in &mut turns {
        // Tool results must open the user message that answers the calls; a note that arrived
        // between the calls and their results moves behind them (a stable sort keeps the rest).
        turn.content.sort_by_key(|block| !block.is_tool_result());
    }
    (system, turns)
}

/// Places the prompt-cache breakpoints (the API allows at most 4).
///
/// A breakpoint caches the whole prefix up to and including its block, and baton's requests only
/// ever grow at the end: the tools and system prompt never change during a run, and each request
/// is the previous one plus the model's answer and the tool results. So:
/// - the last tool and the last system block cache the fixed prefix on their own, which still
///   hits when the history changes in ways the other breakpoints do not cover;
/// - the last block of the last message writes the full request to the cache, so the next
///   request reads everything up to here;
/// - the last block of the user message before the last one is where the previous request put
///   its final breakpoint, so this request reads that entry even when the new turn added more
///   blocks than the API looks back for a cache hit (about 20).
fn place_cache_breakpoints(
    system: &mut [Block<'_>],
    turns: &mut [Turn<'_>],
    tools: &mut [WireTool<'_>],
) {
    if let Some(tool) = tools.last_mut() {
        tool.cache_control = EPHEMERAL;
    }
    if let Some(block) = system.last_mut() {
        block.mark_cache_breakpoint();
    }
    let mut user_turns = turns
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, turn)| turn.role == Role::User)
        .map(|(index, _)| index);
    let previous_user = user_turns.nth(1);
    if let Some(block) = turns.last_mut().and_then(|turn| turn.content.last_mut()) {
        block.mark_cache_breakpoint();
    }
    if let Some(block) = previous_user.and_then(|i| turns[i].content.last_mut()) {
        block.mark_cache_breakpoint();
    }
}

/// The exact bytes sent as the body of a Messages request.
///
/// How the neutral request is mapped:
/// - every system message becomes a text block of the top-level `system` (blank ones are left
///   out);
/// - a tool result becomes a `tool_result` block of a user message; consecutive messages of one
///   role are merged into one message (results and a following note become one user message,
///   with the results first), since the API requires alternating roles;
/// - a tool call's `arguments` text is sent as the `input` object it encodes; blank arguments as
///   `{}`; arguments that are not a JSON object as `{"_unparsed_arguments": "<raw text>"}`, so
///   nothing the model wrote is silently lost;
/// - blank text is replaced by [`EMPTY_TEXT`] where a block is needed, and omitted otherwise;
/// - prompt-cache breakpoints as described at [`place_cache_breakpoints`].
pub fn request_body(request: &ModelRequest, max_tokens: u32) -> Result<Vec<u8>, ModelError> {
    let (mut system, mut messages) = turns(&request.messages);
    let mut tools: Vec<WireTool<'_>> = request
        .tools
        .iter()
        // `effect` is baton's own business (resume policy); the model does not need it.
        .map(|tool| WireTool {
            name: &tool.name,
            description: &tool.description,
            input_schema: Canonical(&tool.parameters),
            cache_control: None,
        })
        .collect();
    place_cache_breakpoints(&mut system, &mut messages, &mut tools);
    let (thinking, max_tokens) = thinking(request, max_tokens);
    let body = MessagesRequest {
        model: &request.model,
        max_tokens,
        system,
        messages,
        tools,
        tool_choice: wire_tool_choice(request),
        thinking,
        output_config: request
            .reasoning
            .effort
            .as_deref()
            .map(|effort| OutputConfig { effort }),
        context_management: request.provider_compaction_at.map(|value| {
            let (kind, value) = if server_compaction(&request.model) {
                ("compact_20260112", value.max(MIN_COMPACTION_TRIGGER))
            } else {
                ("clear_tool_uses_20250919", value)
            };
            ContextManagement {
                edits: [Edit {
                    kind,
                    trigger: InputTokens {
                        kind: "input_tokens",
                        value,
                    },
                }],
            }
        }),
        stream: request.response_mode == ResponseMode::Streaming,
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
#[path = "wire_tests.rs"]
mod tests;
