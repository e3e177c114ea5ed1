//! Context layer of baton: turns run state into a model request and keeps it inside the
//! model's window for hundreds of turns.
//!
//! Same journal → same state → byte-identical request (invariant 4). The prefix (system prompt,
//! project instructions, goal, tool definitions in registry order) never changes during a run,
//! so providers' prompt caches keep hitting; history only grows after it, except when a batch
//! of old outputs is masked ([`mask`]) or the older history is compacted into a handoff
//! summary ([`compact`]). The plan and durable facts come last in every request.

pub mod assembler;
pub mod compact;
pub mod encoder;
pub mod mask;
pub mod metrics;
pub mod profile;
pub mod tokens;

pub use assembler::{Assembled, Assembler};

use baton_core::{Message, ModelRequest, RunState};

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
- On long work keep a plan with `update_plan` and record decisions and findings with `remember`:
  both stay visible when older conversation is compacted. Old tool outputs may be shown as
  placeholders: `recall` fetches them exactly; `search_memory` finds earlier work and files.
- When the goal is met and verified, call `finish` with a short summary of what you did and how you
  checked it (a final reply without a tool call ends the work too). Do not end before that.";

/// Heading under which the workspace's AGENTS.md is shown to the model.
const PROJECT_INSTRUCTIONS_HEADING: &str = "# Project instructions (from AGENTS.md)";

/// The parts a request is made of, before the working-memory tail.
pub(crate) struct Parts {
    /// The run's model and options, without messages or tools.
    pub request: ModelRequest,
    /// System prompt and goal: identical for the whole run.
    pub prefix: Vec<Message>,
    /// The history as shown (masked).
    pub history: Vec<Message>,
    pub masked_outputs: u32,
}

pub(crate) fn assemble_parts(state: &RunState) -> Option<Parts> {
    let settings = state.settings.as_ref()?;
    let (history, masked_outputs) = mask::masked_history(
        &state.history,
        &settings.context.masking,
        state.turns_started,
    );
    Some(Parts {
        request: empty_request(settings),
        prefix: prefix(state),
        history,
        masked_outputs,
    })
}

/// A request for the run's model with its options, and no messages or tools yet.
pub(crate) fn empty_request(settings: &baton_core::RunSettings) -> ModelRequest {
    ModelRequest {
        model: settings.model.model.clone(),
        messages: Vec::new(),
        tools: Vec::new(),
        response_mode: settings.model.response_mode,
        tool_choice: settings.model.tool_choice.clone(),
        reasoning: settings.model.reasoning.clone(),
        provider_compaction_at: (settings.context.compaction == baton_core::Compaction::Provider)
            .then(|| settings.context.compaction_threshold()),
    }
}

/// The messages before the history: system prompt (with the project's instructions), goal, the
/// task's brief and the repo map. They stay the same for a whole task, so providers' prompt
/// caches keep hitting.
pub(crate) fn prefix(state: &RunState) -> Vec<Message> {
    let mut system = state.system_prompt.clone();
    if let Some(instructions) = &state.project_instructions {
        system.push_str("\n\n");
        system.push_str(PROJECT_INSTRUCTIONS_HEADING);
        system.push_str("\n\n");
        system.push_str(instructions.trim_end());
    }
    let mut prefix = vec![
        Message::System { content: system },
        Message::User {
            content: format!("Goal:\n{}", state.goal),
        },
    ];
    // The task's brief is fixed for the whole approach, so it belongs to the cached prefix.
    if let Some(brief) = task_brief(state) {
        prefix.push(Message::User { content: brief });
    }
    // Rendered once per task (or run start), so it too stays fixed for the whole task.
    if let Some(map) = repo_map(state) {
        prefix.push(Message::User {
            content: format!("{REPO_MAP_HEADING}\n\n{map}"),
        });
    }
    prefix
}

/// Heading of the repo map message.
pub const REPO_MAP_HEADING: &str = "Repository map: the workspace's most used definitions, by \
file (line│ signature). Read or search the code for the rest.";

/// The journaled repo map that belongs to where the run is: the current task's, or the run's
/// own while it has no task graph.
pub fn repo_map(state: &RunState) -> Option<&str> {
    let map = state.repo_map.as_ref()?;
    let current = state.board.as_ref().and_then(|b| b.current.as_deref());
    let belongs = match (&state.board, &map.task) {
        (Some(_), Some(task)) => current == Some(task.as_str()),
        (None, None) => true,
        _ => false,
    };
    (belongs && !map.text.trim().is_empty()).then_some(map.text.as_str())
}

/// What the model is told before its history: the current task's brief (handoff of earlier
/// tasks, the task, its check), or the planning instructions while a planning run has no plan.
pub fn task_brief(state: &RunState) -> Option<String> {
    if let Some(board) = &state.board {
        return board.current.as_deref().and_then(|task| board.brief(task));
    }
    let planning = state.settings.as_ref()?.tasks.planning;
    (planning != baton_core::Planning::None).then(|| PLANNING_BRIEF.to_string())
}

/// The planner's instructions.
pub const PLANNING_BRIEF: &str = "\
Before any work, plan: split the goal into small tasks and submit them with `submit_plan`.
- Each task is a step one engineer can finish and verify in a short session, with clear
  instructions that make sense without the other tasks' conversations.
- Each task has a `check`: a shell command run from the workspace root whose exit code 0 means
  the task is done (a test, a build, `test -f FILE`, `grep -q TEXT FILE`).
- `deps` lists the ids of tasks that must be done first; independent tasks have none.
- Explore the workspace first if you need to (list, read, grep, the shell): while planning only
  read-only tools are offered and commands cannot change files.
Each task will be worked on in a fresh context after the plan is accepted. The run does not go on
without a plan: end your planning by calling `submit_plan`.";

/// A request and what the context layer did to build it.
#[derive(Clone, Debug, PartialEq)]
pub struct Assembly {
    pub request: ModelRequest,
    /// Tool outputs shown as placeholders.
    pub masked_outputs: u32,
}

/// Builds the request for the next model call from the run's state: the stable prefix, the
/// history (old outputs masked), and the working memory (plan, durable facts) last. This builds
/// it from scratch; a run builds one request after another with an [`Assembler`], which gives
/// the same request in time proportional to what changed.
pub fn assemble_with_report(state: &RunState) -> Option<Assembly> {
    let parts = assemble_parts(state)?;
    let mut messages = parts.prefix;
    messages.extend(parts.history);
    if let Some(tail) = working_memory(state) {
        messages.push(Message::User { content: tail });
    }
    Some(Assembly {
        request: ModelRequest {
            messages,
            tools: offered_tools(state),
            ..parts.request
        },
        masked_outputs: parts.masked_outputs,
    })
}

/// The tools the next request offers: all the run's tools, or while it plans only those
/// [`baton_core::offered_while_planning`] allows (a planner explores, it does not work yet).
pub fn offered_tools(state: &RunState) -> Vec<baton_core::ToolSpec> {
    if !state.is_planning() {
        return state.tools.clone();
    }
    state
        .tools
        .iter()
        .filter(|t| baton_core::offered_while_planning(&t.name, t.effect))
        .cloned()
        .collect()
}

/// Builds the request for the next model call from the run's state.
pub fn assemble(state: &RunState) -> Option<ModelRequest> {
    assemble_with_report(state).map(|a| a.request)
}

/// The plan and durable facts, re-sent at the end of every request: they survive every
/// compaction, and sitting last they never disturb the cached prefix.
pub fn working_memory(state: &RunState) -> Option<String> {
    if state.plan.is_empty() && state.facts.is_empty() {
        return None;
    }
    let mut text = String::from(
        "Working memory (kept across compactions; change the plan with `update_plan`, record \
         decisions and findings with `remember`).",
    );
    if !state.plan.is_empty() {
        text.push_str("\n\nPlan:");
        for (i, item) in state.plan.iter().enumerate() {
            text.push_str(&format!(
                "\n{}. [{}] {}",
                i + 1,
                item.status.as_str(),
                item.step
            ));
        }
    }
    if !state.facts.is_empty() {
        text.push_str("\n\nDurable facts:");
        for (i, fact) in state.facts.iter().enumerate() {
            text.push_str(&format!("\n{}. {fact}", i + 1));
        }
    }
    Some(text)
}

/// Hex SHA-256 of the request (the framing is in [`encoder`]'s doc): journaled with each model
/// call so that a resent request can be checked against the original. A run computes it with a
/// [`encoder::PromptEncoder`], which gives the same digest in time proportional to what changed.
pub fn request_digest(request: &ModelRequest) -> String {
    encoder::PromptEncoder::default().encode(request).digest
}

#[cfg(test)]
mod tests;
