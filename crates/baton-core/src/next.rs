use crate::board::TaskAction;
use crate::ending::{AfterReply, FinishedBy, nudge_text, open_items_text};
use crate::event::PauseReason;
use crate::event::RunStatus;
use crate::message::{ToolCall, ToolEffect};
use crate::state::{Phase, RunState};

/// What the engine must do next, decided from the state alone. Because the state is a fold over
/// the journal, a resumed run picks up exactly where the journal ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NextAction {
    /// The run is not running (not started, paused, finished or failed).
    Stop,
    StartTurn {
        turn: u32,
    },
    /// Send the turn's model request: `call` is the call to (re)open, `attempt` the next attempt.
    /// A call that started but never finished is sent again: its response was never recorded.
    CallModel {
        turn: u32,
        call: u32,
        attempt: u32,
    },
    /// Summarise the oldest history before the turn's model call (attempt numbers count
    /// failed tries of this compaction).
    Compact {
        turn: u32,
        attempt: u32,
    },
    RunTool {
        turn: u32,
        call: ToolCall,
    },
    /// A read-only call started but has no result (the process died): run it again.
    RerunTool {
        turn: u32,
        call: ToolCall,
    },
    /// A mutating call started but has no result: tell the model it was interrupted.
    ReportInterrupted {
        turn: u32,
        call: ToolCall,
    },
    /// Tell the model something before its next turn (a nudge after a reply without a tool
    /// call, or the open todo items of an ending): journaled as `note_added`.
    Note {
        text: String,
    },
    /// Take the model's text reply as its claim that it is done (`text_end_accepted`).
    AcceptTextEnd {
        turn: u32,
        summary: String,
    },
    /// Pause the run because of how the model ended (or did not): `text_reply`, `loop`, `no_plan`.
    PauseEnding {
        reason: PauseReason,
        detail: String,
    },
    FinishTurn {
        turn: u32,
    },
    Finish {
        summary: String,
        /// How the model ended (absent: the run's task graph ended it).
        finished_by: Option<FinishedBy>,
    },
    /// The turn limit is reached.
    PauseAtTurnLimit {
        max_turns: u32,
    },
    /// A step of the task graph (between turns).
    Task(TaskAction),
}

pub fn next_action(state: &RunState) -> NextAction {
    if state.status != RunStatus::Running {
        return NextAction::Stop;
    }
    if let Some(snapshot) = &state.user_rollback {
        return NextAction::Task(TaskAction::FinishRollback {
            task: None,
            snapshot: snapshot.clone(),
        });
    }
    if let Some(summary) = &state.finish_summary {
        return NextAction::Finish {
            summary: summary.clone(),
            finished_by: state.finished_by,
        };
    }
    match &state.phase {
        Phase::Idle => {
            if let (Some(board), Some(settings)) = (&state.board, &state.settings) {
                match board.next(&settings.tasks) {
                    TaskAction::ContinueTurns => {}
                    action => return NextAction::Task(action),
                }
            }
            let max_turns = state.settings.as_ref().map_or(0, |s| s.limits.max_turns);
            if state.turns_finished >= max_turns {
                NextAction::PauseAtTurnLimit { max_turns }
            } else {
                NextAction::StartTurn {
                    turn: state.turns_started + 1,
                }
            }
        }
        Phase::AwaitingModel { turn, .. } if state.compaction.is_some() => NextAction::Compact {
            turn: *turn,
            attempt: state.compaction.as_ref().map_or(0, |c| c.failures) + 1,
        },
        Phase::AwaitingModel {
            turn,
            call,
            attempts,
        } => NextAction::CallModel {
            turn: *turn,
            call: call.unwrap_or(state.model_calls_started + 1),
            attempt: attempts + 1,
        },
        Phase::RunningTools {
            turn,
            remaining,
            in_flight,
            after,
        } => {
            if let Some(flight) = in_flight {
                let call = flight.call.clone();
                return match flight.effect {
                    ToolEffect::ReadOnly => NextAction::RerunTool { turn: *turn, call },
                    ToolEffect::Mutating => NextAction::ReportInterrupted { turn: *turn, call },
                };
            }
            if let Some(call) = remaining.first() {
                NextAction::RunTool {
                    turn: *turn,
                    call: call.clone(),
                }
            } else if let Some(after) = after {
                carry_out(state, *turn, after)
            } else {
                NextAction::FinishTurn { turn: *turn }
            }
        }
    }
}

/// The step that carries out what the reducer decided about a reply without a tool call.
fn carry_out(state: &RunState, turn: u32, after: &AfterReply) -> NextAction {
    let in_task = state.board.as_ref().is_some_and(|b| b.current.is_some());
    match after {
        AfterReply::Nudge { kind } => NextAction::Note {
            text: nudge_text(*kind, in_task),
        },
        AfterReply::RemindOpenItems { items } => NextAction::Note {
            text: open_items_text(items),
        },
        AfterReply::Claim { summary } => NextAction::AcceptTextEnd {
            turn,
            summary: summary.clone(),
        },
        AfterReply::PauseForPerson => NextAction::PauseEnding {
            reason: PauseReason::TextReply,
            detail: "the model ended with a plain-text reply (`--on-text-reply pause`): read it \
                     with `baton logs`; `baton resume` lets it go on, `baton resume \
                     --on-text-reply finish` accepts its next such reply as the end"
                .into(),
        },
        AfterReply::PauseLoop { replies } => NextAction::PauseEnding {
            reason: PauseReason::Loop,
            detail: format!(
                "the model replied {replies} times in a row without calling a tool — look at \
                 `baton logs`, then `baton resume` (optionally with other settings)"
            ),
        },
        AfterReply::PauseNoPlan => NextAction::PauseEnding {
            reason: PauseReason::NoPlan,
            detail: "the model did not submit a plan after being told to (`submit_plan`) — \
                     `baton resume` gives it another turn, `baton resume --plan FILE` supplies \
                     the plan"
                .into(),
        },
    }
}
