//! OpenAI's `tool_choice`, one decision for both of its wires (Chat Completions and Responses):
//! the modes are the same; only where a named function's name goes differs, so each wire gives
//! that part's shape.

use baton_core::{ModelRequest, ToolChoice};
use serde::Serialize;

/// `"required"` / `"none"`, or `{"type": "function", …the wire's named-function fields}`.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum OpenAiToolChoice<F> {
    Mode(&'static str),
    Function {
        #[serde(rename = "type")]
        kind: &'static str,
        #[serde(flatten)]
        function: F,
    },
}

/// What to send as `tool_choice`; `None` sends nothing: `auto` is the servers' default, and a
/// request without tools must not name a choice among them. `named` makes a wire's fields for
/// a tool the run names.
pub(crate) fn openai_tool_choice<'a, F>(
    request: &'a ModelRequest,
    named: impl FnOnce(&'a str) -> F,
) -> Option<OpenAiToolChoice<F>> {
    if request.tools.is_empty() {
        return None;
    }
    match &request.tool_choice {
        ToolChoice::Auto => None,
        ToolChoice::Required => Some(OpenAiToolChoice::Mode("required")),
        ToolChoice::None => Some(OpenAiToolChoice::Mode("none")),
        ToolChoice::Function(name) => Some(OpenAiToolChoice::Function {
            kind: "function",
            function: named(name),
        }),
    }
}
