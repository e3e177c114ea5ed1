//! How a run ends. Real models end their work the way their documentation allows: with a final
//! message that calls no tool ("Done: the tests pass"), not only with baton's `finish` tool.
//! This module decides what a reply without a tool call means, and what an ending means while
//! the model's own todo list still has open items. It is pure: the reducer asks it when the
//! reply is journaled, so replay, resume and the live run all decide the same way.
//!
//! The rules, in order (see README "How a run ends"):
//! 1. While a planning run has no plan, a reply without a plan gets one nudge, then the run
//!    pauses (`no_plan`).
//! 2. A text reply after a nudge is the model's claim that it is done (`on_text_reply =
//!    finish`, the default), or pauses the run for a person (`pause`); with `nudge`, or when the
//!    run forces tool calls (`--tool-choice required` / a tool name), it is nudged again.
//! 3. An empty reply is never a claim: it is nudged.
//! 4. Whatever the mode, the `no_tool_turns`-th reply in a row without a tool call pauses the
//!    run (`loop`) instead of being nudged again.
//! 5. An ending (by text or `finish`) while the todo list has open items is answered once with
//!    the list; the next ending is accepted and its summary names what is still open.

use serde::{Deserialize, Serialize};

use crate::memory::{PlanItem, PlanStatus};
use crate::settings::ToolChoice;
// The policy is a setting of the run (recorded with the others); its old path stays.
pub use crate::settings::{EndingPolicy, OnTextReply, OpenItems};

/// How the model ended a run that finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishedBy {
    /// It called the `finish` tool.
    Tool,
    /// It replied with plain text (after one nudge).
    Text,
}

impl FinishedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishedBy::Tool => "tool",
            FinishedBy::Text => "text",
        }
    }
}

/// Why the model is nudged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NudgeKind {
    /// A text reply: if it is done, one more reply ends it (`finish` mode).
    Text,
    /// A text reply where text cannot end the run (`nudge` mode).
    UseTools,
    /// The run forces tool calls (`--tool-choice required` or a tool name).
    ToolRequired,
    /// No text and no tool call.
    Empty,
    /// A planning run's reply without a plan.
    Planning,
}

/// What the run does next about a reply without a tool call, or an ending: decided by the
/// reducer when the reply (or the `finish` result) is journaled, carried out by the engine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum AfterReply {
    /// A note tells the model what to do; it gets another turn.
    Nudge { kind: NudgeKind },
    /// The text is the model's claim that it is done (journaled as `text_end_accepted`).
    Claim { summary: String },
    /// The model ended while these todo items are open: it is told once.
    RemindOpenItems { items: Vec<String> },
    /// Pause for a person (`text_reply`).
    PauseForPerson,
    /// Too many replies in a row without a tool call (`loop`).
    PauseLoop { replies: u32 },
    /// A planning run's model did not plan after being told (`no_plan`).
    PauseNoPlan,
}

/// What the reducer remembers about endings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndingTrack {
    /// Model replies in a row without a tool call (a reply with one, a check's result, a new
    /// task or a person's resume after such a pause starts the count again).
    pub no_tool_replies: u32,
    /// The model was nudged since its last reply with a tool call.
    pub nudged: bool,
    /// The model was told about its open todo items (once per task, or per run without tasks).
    pub open_items_reminded: bool,
    /// A planning run's model was told to submit a plan.
    pub planning_nudged: bool,
}

/// A reply without tool calls, reduced to what the decision needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply<'a> {
    Empty,
    Text(&'a str),
}

impl<'a> Reply<'a> {
    /// Whitespace-only text counts as empty: nothing was said.
    pub fn of(content: Option<&'a str>) -> Reply<'a> {
        match content.map(str::trim) {
            Some(text) if !text.is_empty() => Reply::Text(text),
            _ => Reply::Empty,
        }
    }
}

/// Everything a decision depends on besides the reply.
#[derive(Clone, Copy, Debug)]
pub struct Situation<'a> {
    pub policy: EndingPolicy,
    pub tool_choice: &'a ToolChoice,
    /// `LoopPolicy::no_tool_turns`.
    pub no_tool_limit: u32,
    /// The run plans and has no plan yet.
    pub planning: bool,
    /// The model's todo list.
    pub todo: &'a [PlanItem],
    /// `track.no_tool_replies` already counts this reply.
    pub track: &'a EndingTrack,
}

/// The smallest loop limit that still leaves room for the one nudge before a claim.
pub const MIN_NO_TOOL_TURNS: u32 = 2;

/// Decides what a reply without a tool call means.
pub fn after_reply(reply: Reply<'_>, s: &Situation<'_>) -> AfterReply {
    if s.planning {
        return if s.track.planning_nudged {
            AfterReply::PauseNoPlan
        } else {
            AfterReply::Nudge {
                kind: NudgeKind::Planning,
            }
        };
    }
    let forced = matches!(
        s.tool_choice,
        ToolChoice::Required | ToolChoice::Function(_)
    );
    if let (Reply::Text(text), false, true) = (reply, forced, s.track.nudged) {
        match s.policy.on_text_reply {
            OnTextReply::Finish => return ending(text, s),
            OnTextReply::Pause => return AfterReply::PauseForPerson,
            OnTextReply::Nudge => {}
        }
    }
    if s.track.no_tool_replies >= s.no_tool_limit.max(MIN_NO_TOOL_TURNS) {
        return AfterReply::PauseLoop {
            replies: s.track.no_tool_replies,
        };
    }
    let kind = match reply {
        Reply::Empty => NudgeKind::Empty,
        Reply::Text(_) if forced => NudgeKind::ToolRequired,
        Reply::Text(_) if s.policy.on_text_reply == OnTextReply::Nudge => NudgeKind::UseTools,
        Reply::Text(_) => NudgeKind::Text,
    };
    AfterReply::Nudge { kind }
}

/// An ending by text: a claim, unless the open todo items are due to be named first.
fn ending(text: &str, s: &Situation<'_>) -> AfterReply {
    match open_items_due(s.policy, s.todo, s.track) {
        Some(items) => AfterReply::RemindOpenItems { items },
        None => AfterReply::Claim {
            summary: with_open_items(text, s.todo),
        },
    }
}

/// The open todo items the model must be told about before an ending takes effect, if any.
pub fn open_items_due(
    policy: EndingPolicy,
    todo: &[PlanItem],
    track: &EndingTrack,
) -> Option<Vec<String>> {
    if policy.open_items == OpenItems::Ignore || track.open_items_reminded {
        return None;
    }
    let open = open_items(todo);
    (!open.is_empty()).then_some(open)
}

/// The todo items not marked done, numbered as the model sees them.
pub fn open_items(todo: &[PlanItem]) -> Vec<String> {
    todo.iter()
        .enumerate()
        .filter(|(_, item)| item.status != PlanStatus::Done)
        .map(|(i, item)| format!("{}. [{}] {}", i + 1, item.status.as_str(), item.step))
        .collect()
}

/// An accepted ending's summary: the model's words, and what its todo list still has open.
pub fn with_open_items(summary: &str, todo: &[PlanItem]) -> String {
    let open = open_items(todo);
    if open.is_empty() {
        return summary.to_string();
    }
    format!(
        "{}\n\nStill open in the agent's plan when it ended:\n{}",
        summary.trim_end(),
        open.join("\n")
    )
}

/// What the model is told for a nudge. `in_task`: it works on a task of a plan (its ending
/// claims the task done, and the task's check decides).
pub fn nudge_text(kind: NudgeKind, in_task: bool) -> String {
    let work = if in_task { "task" } else { "goal" };
    match kind {
        NudgeKind::Text => format!(
            "You replied without calling a tool. If the {work} is done and verified, reply once \
             more with a short summary of what you did and how you checked it (or call \
             `finish`){}. Otherwise keep working with the tools.",
            if in_task {
                ": baton then runs the task's check"
            } else {
                ": that ends the run"
            }
        ),
        NudgeKind::UseTools => format!(
            "You replied without calling a tool. Keep working towards the {work} using the \
             tools; when it is done and verified, call `finish` with a summary."
        ),
        NudgeKind::ToolRequired => format!(
            "This run requires a tool call in every reply. Keep working towards the {work} with \
             the tools; when it is done and verified, call `finish` with a summary."
        ),
        NudgeKind::Empty => format!(
            "Your reply was empty: no text and no tool call. Continue working towards the {work} \
             with the tools, or, if it is done, reply with a short summary (or call `finish`)."
        ),
        NudgeKind::Planning => "No plan yet: this run starts with a plan. Explore with the \
             read-only tools if you need to, then call `submit_plan` with the tasks. The run \
             pauses if the next reply has no plan either."
            .to_string(),
    }
}

/// What the model is told when it ends while its todo list has open items.
pub fn open_items_text(items: &[String]) -> String {
    format!(
        "You ended your work, but your plan (`update_plan`) still has open items:\n{}\nFinish \
         them, or update the plan if they are no longer needed. If you end again as things are, \
         baton accepts it and reports these items as open.",
        items.join("\n")
    )
}

/// What the model is told when it calls `finish` while the run still plans.
pub const FINISH_WHILE_PLANNING: &str = "Not finished: this run starts with a plan and has \
none yet. Call `submit_plan` with the tasks (explore with the read-only tools first if you \
need to). The run pauses if you end again without a plan.";

#[cfg(test)]
mod tests;
