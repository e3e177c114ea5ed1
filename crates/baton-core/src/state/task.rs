//! The reducer's rules for one family of events: the task graph: plans, tasks and their checks.

use super::*;

impl RunState {
    pub(super) fn apply_task_event(&mut self, applied: Applied<'_>) -> Result<(), String> {
        let (event, seq, running) = (applied.event, applied.seq, applied.running);
        match event {
            Event::PlanSet {
                tasks,
                final_check,
                source,
            } => {
                require_running(running)?;
                let planning = matches!(
                    &self.phase,
                    Phase::RunningTools { in_flight: Some(f), .. } if f.call.name == SUBMIT_PLAN_TOOL
                );
                // A person's plan may also come while a turn waits only to be finished (a run
                // paused for `no_plan`).
                let turn_done = matches!(
                    &self.phase,
                    Phase::RunningTools { remaining, in_flight: None, .. } if remaining.is_empty()
                );
                if self.phase != Phase::Idle
                    && !planning
                    && !(turn_done && *source == PlanSource::User)
                {
                    return Err("a plan is set between turns or by `submit_plan`".into());
                }
                // A person's plan replaces one no task has started on (`resume --plan`).
                if *source == PlanSource::User
                    && self.board.as_ref().is_some_and(|b| !b.any_started())
                {
                    let reviewed = self.board.as_ref().is_some_and(|b| b.plan_reviewed);
                    self.board = Some(TaskBoard {
                        plan_reviewed: reviewed,
                        ..TaskBoard::default()
                    });
                }
                let board = self.board.get_or_insert_with(TaskBoard::default);
                board.add_tasks(tasks, final_check.as_ref())?;
                if *source == PlanSource::Baton {
                    board.fix_rounds += 1;
                }
            }
            Event::TaskStarted { task, approach, .. } => {
                require_running(running)?;
                self.require_idle()?;
                let snapshot = self.snapshots.last().map(|s| s.snapshot.clone());
                self.board_mut()?.start_task(task, *approach, snapshot)?;
                // A fresh context: the task starts from its brief, not from earlier
                // conversations (they stay in the journal for `recall` and search).
                self.history.clear();
                self.plan.clear();
                self.recent_calls.clear();
                self.compaction = None;
                self.endings = EndingTrack {
                    planning_nudged: self.endings.planning_nudged,
                    ..EndingTrack::default()
                };
            }
            Event::CheckStarted {
                task,
                attempt,
                command,
            } => {
                require_running(running)?;
                self.require_idle()?;
                self.board_mut()?.check_started(OpenCheck {
                    task: task.clone(),
                    attempt: *attempt,
                    command: command.clone(),
                })?;
            }
            Event::CheckFinished {
                task,
                attempt,
                passed,
                exit_code,
                output,
                ..
            } => {
                require_running(running)?;
                let note = self.board_mut()?.check_finished(
                    task.as_ref(),
                    *attempt,
                    *passed,
                    *exit_code,
                    output,
                )?;
                if let Some(note) = note {
                    self.push_history(seq, self.turns_started, Message::User { content: note });
                }
                // The check's output is news: replies without tool calls count afresh.
                self.endings.no_tool_replies = 0;
                self.endings.nudged = false;
            }
            Event::TaskFinished { task, summary } => {
                require_running(running)?;
                self.board_mut()?.task_finished(task, summary)?;
            }
            Event::TaskFailed { task, reason } => {
                require_running(running)?;
                self.require_idle()?;
                self.board_mut()?
                    .task_ended(task, TaskStatus::Failed, reason)?;
            }
            Event::TaskSkipped { task, reason } => {
                require_running(running)?;
                self.board_mut()?
                    .task_ended(task, TaskStatus::Skipped, reason)?;
            }
            other => return Err(misrouted(other)),
        }
        Ok(())
    }
}
