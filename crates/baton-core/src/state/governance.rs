//! The reducer's rules for one family of events: budgets, loop detection, and the MCP servers
//! that did not start.

use super::*;

impl RunState {
    pub(super) fn apply_governance_event(&mut self, applied: Applied<'_>) -> Result<(), String> {
        let (event, seq, running) = (applied.event, applied.seq, applied.running);
        match event {
            Event::McpServerFailed { server, error } => {
                // At a start or a resume, which may come in the middle of a turn.
                require_running(running)?;
                self.mcp_failures.retain(|(name, _)| name != server);
                self.mcp_failures.push((server.clone(), error.clone()));
            }
            Event::McpServerStarted { server, .. } => {
                require_running(running)?;
                self.mcp_failures.retain(|(name, _)| name != server);
            }
            Event::RepoMapRendered { task, map } => {
                require_running(running)?;
                self.repo_map = Some(RepoMap {
                    task: task.clone(),
                    text: map.clone(),
                });
            }
            Event::EmbeddingsUsed {
                calls,
                inputs,
                input_tokens,
                cost_usd,
                ..
            } => {
                require_running(running)?;
                let e = &mut self.embeddings;
                e.calls = e.calls.saturating_add(*calls);
                e.inputs = e.inputs.saturating_add(*inputs);
                e.input_tokens = e.input_tokens.saturating_add(*input_tokens);
                if let Some(cost) = cost_usd.filter(|c| c.is_finite() && *c >= 0.0) {
                    e.cost_usd += cost;
                    // Budgets are on what the run spent, embeddings included.
                    self.usage.cost_usd += cost;
                }
            }
            Event::BudgetWarning { resource, .. } => {
                require_running(running)?;
                if !self.budget_warned.contains(resource) {
                    self.budget_warned.push(*resource);
                }
            }
            Event::LoopDetected {
                pattern: LoopPattern::NoToolReplies,
                response: LoopResponse::Pause,
                ..
            } => {
                require_running(running)?;
                match &self.phase {
                    Phase::RunningTools {
                        after: Some(AfterReply::PauseLoop { .. }),
                        ..
                    } => {}
                    _ => return Err("no run of replies without tool calls is due to pause".into()),
                }
            }
            Event::LoopDetected {
                detail, response, ..
            } => {
                require_running(running)?;
                if self.phase != Phase::Idle {
                    return Err("loops are handled between turns".into());
                }
                self.recent_calls.clear();
                if *response == LoopResponse::Nudge {
                    self.loop_nudges += 1;
                    self.push_history(
                        seq,
                        self.turns_started,
                        Message::User {
                            content: loop_nudge(detail),
                        },
                    );
                }
            }
            other => return Err(misrouted(other)),
        }
        Ok(())
    }
}
