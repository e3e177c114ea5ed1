//! The reducer's rules for one family of events: a run's life: start, resume, notes, how it ends.

use super::*;

impl RunState {
    pub(super) fn apply_run_event(&mut self, applied: Applied<'_>) -> Result<(), String> {
        let (event, run_id, seq, running) =
            (applied.event, applied.run_id, applied.seq, applied.running);
        match event {
            Event::RunStarted {
                goal,
                workspace,
                settings,
                system_prompt,
                project_instructions,
                tools,
            } => {
                if self.run_id.is_some() {
                    return Err("the run was already started".into());
                }
                self.run_id = Some(run_id.clone());
                self.goal = goal.clone();
                self.workspace = workspace.clone();
                self.settings = Some(settings.clone());
                self.system_prompt = system_prompt.clone();
                self.project_instructions = project_instructions.clone();
                self.tools = tools.clone();
            }
            Event::RunResumed { settings } => {
                let endpoint = |s: &RunSettings| (s.model.provider, s.model.base_url.clone());
                if self.settings.as_ref().map(endpoint) != Some(endpoint(settings)) {
                    self.calls_on_endpoint = 0;
                }
                self.settings = Some(settings.clone());
                // A person resumed a run paused about its endings: count afresh (a crash's
                // resume keeps the counts, so it decides as the dead process would have).
                let paused = self.pause.take().map(|(reason, _)| reason);
                match paused {
                    Some(PauseReason::Loop | PauseReason::TextReply) => {
                        self.endings.no_tool_replies = 0;
                    }
                    Some(PauseReason::NoPlan) => {
                        self.endings.no_tool_replies = 0;
                        self.endings.planning_nudged = false;
                    }
                    _ => {}
                }
                // Warnings are per process, and so are MCP servers: this one starts its own.
                self.budget_warned.clear();
                self.mcp_failures.clear();
                // A paused run was resumed by a person: loops start counting afresh, and the
                // outage may be over, so the breaker gets a fresh count. A crashed process's
                // successor (no pause journaled) keeps both and decides as it would have.
                if paused.is_some() {
                    self.recent_calls.clear();
                    self.loop_nudges = 0;
                    self.consecutive_model_failures = 0;
                }
            }
            // Only a record of the restart: the state to continue from is what the journal
            // already holds, and the next process records its own `run_resumed`.
            Event::SupervisorRestarted { .. } => {}
            Event::NoteAdded { text } => {
                match &mut self.phase {
                    Phase::Idle => {}
                    Phase::RunningTools {
                        in_flight: None,
                        after,
                        ..
                    } => match after.take() {
                        Some(AfterReply::RemindOpenItems { .. }) => {
                            self.endings.open_items_reminded = true;
                        }
                        Some(AfterReply::Nudge {
                            kind: NudgeKind::Planning,
                        }) => self.endings.planning_nudged = true,
                        // Journals written before endings were decided nudged every reply
                        // without a tool call, whatever it was.
                        Some(_) => self.endings.nudged = true,
                        None => {}
                    },
                    _ => return Err("a note cannot interrupt a model or tool call".into()),
                }
                self.push_history(
                    seq,
                    self.turns_started,
                    Message::User {
                        content: text.clone(),
                    },
                );
            }
            Event::TextEndAccepted { turn, summary } => {
                require_running(running)?;
                match &mut self.phase {
                    Phase::RunningTools {
                        turn: current,
                        in_flight: None,
                        after,
                        ..
                    } if *current == *turn && matches!(after, Some(AfterReply::Claim { .. })) => {
                        *after = None;
                    }
                    _ => return Err("no text reply is waiting to be accepted".into()),
                }
                self.endings.no_tool_replies = 0;
                self.endings.nudged = false;
                self.claim_end(summary, FinishedBy::Text);
            }
            Event::RunPaused { reason, detail } => {
                // The pause an ending decided is carried out by this event (another pause — a
                // Ctrl-C, say — leaves it due, so the resumed run still makes it).
                if let Phase::RunningTools { after, .. } = &mut self.phase {
                    after.take_if(|a| {
                        matches!(
                            (a, reason),
                            (AfterReply::PauseForPerson, PauseReason::TextReply)
                                | (AfterReply::PauseLoop { .. }, PauseReason::Loop)
                                | (AfterReply::PauseNoPlan, PauseReason::NoPlan)
                        )
                    });
                }
                if *reason == PauseReason::PlanReview
                    && let Some(board) = &mut self.board
                {
                    board.plan_reviewed = true;
                }
                self.pause = Some((*reason, detail.clone()));
            }
            Event::RunFinished { summary, .. } => {
                self.finish_summary = Some(summary.clone());
            }
            Event::RunFailed { error } => {
                self.failure = Some(error.clone());
            }
            other => return Err(misrouted(other)),
        }
        Ok(())
    }
}
