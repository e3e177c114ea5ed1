use crate::board::TaskAction;
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
    /// The model answered without tool calls: remind it how to make progress.
    Nudge,
    FinishTurn {
        turn: u32,
    },
    Finish {
        summary: String,
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
            needs_nudge,
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
            } else if *needs_nudge {
                NextAction::Nudge
            } else {
                NextAction::FinishTurn { turn: *turn }
            }
        }
    }
}
