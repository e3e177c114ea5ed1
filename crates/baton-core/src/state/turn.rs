//! The reducer's rules for one family of events: turns and the model calls inside them.

use super::*;

impl RunState {
    pub(super) fn apply_turn_event(&mut self, applied: Applied<'_>) -> Result<(), String> {
        let (event, seq, running) = (applied.event, applied.seq, applied.running);
        match event {
            Event::TurnStarted { turn } => {
                require_running(running)?;
                if self.phase != Phase::Idle {
                    return Err("a turn is already in progress".into());
                }
                if *turn != self.turns_started + 1 {
                    return Err(format!("expected turn {}", self.turns_started + 1));
                }
                self.turns_started = *turn;
                if let Some(board) = &mut self.board {
                    board.count_turn();
                }
                self.phase = Phase::AwaitingModel {
                    turn: *turn,
                    call: None,
                    attempts: 0,
                };
            }
            Event::ModelCallStarted {
                turn,
                call,
                attempt,
                context,
                ..
            } => {
                self.open_call_counted = context.map(|c| c.counted_prompt_tokens);
                require_running(running)?;
                let Phase::AwaitingModel {
                    turn: current,
                    call: current_call,
                    attempts,
                } = &mut self.phase
                else {
                    return Err("no turn is waiting for a model call".into());
                };
                check_turn(*current, *turn)?;
                if self.compaction.is_some() {
                    return Err("a compaction is in progress".into());
                }
                match current_call {
                    None => {
                        if *call != self.model_calls_started + 1 {
                            return Err(format!(
                                "expected model call {}",
                                self.model_calls_started + 1
                            ));
                        }
                        self.model_calls_started = *call;
                        *current_call = Some(*call);
                    }
                    Some(c) if c == call => {}
                    Some(c) => return Err(format!("model call {c} is still open")),
                }
                if *attempt != *attempts + 1 {
                    return Err(format!("expected attempt {}", *attempts + 1));
                }
                *attempts = *attempt;
            }
            Event::ModelCallFailed { turn, call, .. } => {
                self.expect_open_call(*turn, *call)?;
                self.consecutive_model_failures = self.consecutive_model_failures.saturating_add(1);
            }
            Event::ModelCallFinished {
                turn,
                call,
                message,
                usage,
                cost_usd,
                ..
            } => {
                require_running(running)?;
                self.expect_open_call(*turn, *call)?;
                self.usage.add_call(usage.as_ref(), *cost_usd);
                if let Some(board) = &mut self.board {
                    board.charge(usage.as_ref(), *cost_usd);
                }
                if let (Some(counted), Some(usage)) = (self.open_call_counted.take(), usage) {
                    self.calibration = Some((counted, usage.prompt_tokens));
                }
                self.model_calls_finished += 1;
                self.calls_on_endpoint = self.calls_on_endpoint.saturating_add(1);
                self.consecutive_model_failures = 0;
                self.overflow_compactions = 0;
                self.push_history(seq, *turn, Message::Assistant(message.clone()));
                let after = self.reply_without_tools(*turn, message);
                self.phase = Phase::RunningTools {
                    turn: *turn,
                    remaining: message.tool_calls.clone(),
                    in_flight: None,
                    after,
                };
            }
            Event::TurnFinished { turn } => {
                require_running(running)?;
                match &self.phase {
                    Phase::RunningTools {
                        turn: current,
                        remaining,
                        in_flight: None,
                        ..
                    } if remaining.is_empty() && current == turn => {}
                    _ => return Err(format!("turn {turn} still has work in progress")),
                }
                self.turns_finished = *turn;
                self.phase = Phase::Idle;
            }
            other => return Err(misrouted(other)),
        }
        Ok(())
    }
}
