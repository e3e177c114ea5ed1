//! Deterministic prompt assembly for baton: turns run state into a model request.
//!
//! Same journal → same state → byte-identical request (invariant 4). The prefix (system prompt,
//! project instructions, goal, tool definitions in registry order) never changes during a run,
//! so providers' prompt caches keep hitting; history only grows after it.

use baton_core::{Message, ModelRequest, RunState};
use sha2::{Digest, Sha256};

/// The system prompt every run starts with. Recorded in the run's first event, so changing this
/// text in a later baton version does not change the prompts of runs already under way.
pub const SYSTEM_PROMPT: &str = "\
You are baton, an autonomous coding agent working in a software project on the user's machine.
You work towards the user's goal by calling tools. Every tool call runs for real in the workspace.

How to work:
- Explore before you change: list and read the files that matter, search with grep.
- Make small, deliberate edits (edit_file for precise changes, write_file for new files).
- Check your work by running the project's build or tests with the shell tool, and fix what fails.
- Tool results are the truth: if a call reports an error, read it and adjust; do not repeat a
  failing call unchanged.
- Paths are relative to the workspace root; you cannot leave the workspace.
- When the goal is met and verified, call `finish` with a short summary of what you did and how you
  checked it. Do not call `finish` before that, and do not stop without calling it.";

/// Heading under which the workspace's AGENTS.md is shown to the model.
const PROJECT_INSTRUCTIONS_HEADING: &str = "# Project instructions (from AGENTS.md)";

/// Builds the request for the next model call from the run's state.
pub fn assemble(state: &RunState) -> Option<ModelRequest> {
    let settings = state.settings.as_ref()?;
    let mut system = state.system_prompt.clone();
    if let Some(instructions) = &state.project_instructions {
        system.push_str("\n\n");
        system.push_str(PROJECT_INSTRUCTIONS_HEADING);
        system.push_str("\n\n");
        system.push_str(instructions.trim_end());
    }
    let mut messages = Vec::with_capacity(state.history.len() + 2);
    messages.push(Message::System { content: system });
    messages.push(Message::User {
        content: format!("Goal:\n{}", state.goal),
    });
    messages.extend(state.history.iter().cloned());
    Some(ModelRequest {
        model: settings.model.model.clone(),
        messages,
        tools: state.tools.clone(),
        response_mode: settings.model.response_mode,
        tool_choice: settings.model.tool_choice.clone(),
    })
}

/// Hex SHA-256 of the request's canonical JSON: journaled with each model call so that a resent
/// request can be checked against the original.
pub fn request_digest(request: &ModelRequest) -> String {
    // Serializing plain structs and enums of strings cannot fail; fall back to Debug just in case
    // so that the digest is still deterministic.
    let bytes = serde_json::to_vec(request).unwrap_or_else(|_| format!("{request:?}").into_bytes());
    let digest = Sha256::digest(&bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The nudge sent when the model answers without calling a tool.
pub const NUDGE: &str = "You answered without calling a tool. Keep working towards the goal using the tools. \
When the goal is met and verified, call `finish` with a summary.";

#[cfg(test)]
mod tests;
