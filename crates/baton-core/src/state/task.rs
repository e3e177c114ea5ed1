//! The reducer's rules for one family of events: the task graph: plans, tasks and their checks.

use super::*;

impl RunState {
    pub(super) fn apply_task_event(&mut self, applied: Applied<'_>) -> Result<(), String> {
        let (event, seq, running) = (applied.event, applied.seq, applied.running);
        require_running(running)?;
        match event {
            Event::PlanSet { source, .. } => {
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
                let board = self.board.get_or_insert_with(TaskBoard::default);
                board.apply(event, None)?;
            }
            Event::TaskStarted { .. } => {
                self.require_idle()?;
                let snapshot = self.snapshots.last().map(|s| s.snapshot.clone());
                self.board_mut()?.apply(event, snapshot.as_deref())?;
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
            Event::CheckFinished { .. } => {
                if let Some(note) = self.board_mut()?.apply(event, None)? {
                    self.push_history(seq, self.turns_started, Message::User { content: note });
                }
                // The check's output is news: replies without tool calls count afresh.
                self.endings.no_tool_replies = 0;
                self.endings.nudged = false;
            }
            Event::CheckStarted { .. } | Event::TaskFailed { .. } => {
                self.require_idle()?;
                self.board_mut()?.apply(event, None)?;
            }
            Event::TaskFinished { .. } | Event::TaskSkipped { .. } => {
                self.board_mut()?.apply(event, None)?;
            }
            other => return Err(misrouted(other)),
        }
        Ok(())
    }
}
