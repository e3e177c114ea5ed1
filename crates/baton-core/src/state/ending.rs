//! The reducer's side of endings (the rules themselves are `crate::ending`): what applying a
//! reply or an ending does to the run state.

use super::*;
use crate::ending::{Reply, Situation, after_reply};
use crate::message::AssistantMessage;
use crate::settings::EndingPolicy;

impl RunState {
    /// The model says it is done: inside a task that claims the task done (its check decides),
    /// otherwise the run is to finish.
    pub(crate) fn claim_end(&mut self, summary: &str, by: FinishedBy) {
        let claimed = self
            .board
            .as_mut()
            .is_some_and(|board| board.claim_done(summary));
        if !claimed {
            self.finish_summary = Some(summary.to_string());
            self.finished_by = Some(by);
        }
    }

    /// Decides what a reply without tool calls means (and counts it); a reply with tool calls
    /// starts the counts afresh.
    pub(crate) fn reply_without_tools(
        &mut self,
        turn: u32,
        message: &AssistantMessage,
    ) -> Option<AfterReply> {
        if !message.tool_calls.is_empty() {
            self.endings.no_tool_replies = 0;
            self.endings.nudged = false;
            return None;
        }
        self.endings.no_tool_replies = self.endings.no_tool_replies.saturating_add(1);
        let reply = Reply::of(message.content.as_deref());
        // Identical replies are repeats for the loop detector, like identical calls.
        let text = match reply {
            Reply::Text(text) => text,
            Reply::Empty => "",
        };
        remember_call(
            &mut self.recent_calls,
            turn,
            stable_hash(&["(reply without a tool call)", text]),
            stable_hash(&["(no tool result)"]),
        );
        let settings = self.settings.as_ref()?;
        Some(after_reply(
            reply,
            &Situation {
                policy: settings.endings,
                tool_choice: &settings.model.tool_choice,
                no_tool_limit: settings.loop_detection.no_tool_turns,
                planning: self.is_planning(),
                todo: &self.plan,
                track: &self.endings,
            },
        ))
    }

    /// `finish` while the run still plans was refused (its result says why): that is the
    /// planning nudge, or, after one, the reason to pause.
    pub(crate) fn finish_while_planning(&mut self) -> Option<AfterReply> {
        if self.endings.planning_nudged {
            Some(AfterReply::PauseNoPlan)
        } else {
            self.endings.planning_nudged = true;
            None
        }
    }

    pub(crate) fn ending_policy(&self) -> EndingPolicy {
        self.settings
            .as_ref()
            .map_or_else(EndingPolicy::journaled_before, |s| s.endings)
    }
}
