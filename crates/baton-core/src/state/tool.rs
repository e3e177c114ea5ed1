//! The reducer's rules for one family of events: tool calls.

use super::*;

impl RunState {
    pub(super) fn apply_tool_event(&mut self, applied: Applied<'_>) -> Result<(), String> {
        let (event, seq, running) = (applied.event, applied.seq, applied.running);
        match event {
            Event::ToolCallStarted {
                turn,
                call_id,
                name,
                arguments,
                effect,
            } => {
                require_running(running)?;
                let Phase::RunningTools {
                    turn: current,
                    remaining,
                    in_flight,
                    ..
                } = &mut self.phase
                else {
                    return Err("no model answer is waiting for its tool calls".into());
                };
                check_turn(*current, *turn)?;
                if in_flight.is_some() {
                    return Err("another tool call is still running".into());
                }
                match remaining.first() {
                    Some(next)
                        if next.id == *call_id
                            && next.name == *name
                            && next.arguments == *arguments => {}
                    Some(next) => {
                        return Err(format!("the next tool call is {} ({})", next.id, next.name));
                    }
                    None => return Err(format!("tool call {call_id} was not requested")),
                }
                let call = remaining.remove(0);
                *in_flight = Some(InFlightTool {
                    call,
                    effect: *effect,
                });
            }
            Event::ToolCallFinished {
                turn,
                call_id,
                result,
                ..
            } => {
                let Phase::RunningTools {
                    turn: current,
                    in_flight,
                    ..
                } = &mut self.phase
                else {
                    return Err("no tool call is running".into());
                };
                check_turn(*current, *turn)?;
                let Some(flight) = in_flight.take_if(|f| f.call.id == *call_id) else {
                    return Err(format!("tool call {call_id} is not the one running"));
                };
                let after = if result.outcome == ToolOutcome::Success {
                    self.apply_tool_effect(&flight.call.name, &flight.call.arguments, result)
                } else if flight.call.name == FINISH_TOOL && self.is_planning() {
                    self.finish_while_planning()
                } else {
                    None
                };
                if let (Some(after), Phase::RunningTools { after: slot, .. }) =
                    (after, &mut self.phase)
                {
                    *slot = Some(after);
                }
                let turn = *turn;
                remember_call(
                    &mut self.recent_calls,
                    turn,
                    stable_hash(&[&flight.call.name, &flight.call.arguments]),
                    stable_hash(&[&format!("{:?}", result.outcome), &result.content]),
                );
                self.push_history(
                    seq,
                    turn,
                    Message::Tool {
                        call_id: flight.call.id,
                        name: flight.call.name,
                        content: result.content.clone(),
                    },
                );
            }
            other => return Err(misrouted(other)),
        }
        Ok(())
    }
}
