//! The reducer's rules for one family of events: parallel tasks: delegation to child runs, their return and merge.

use super::*;

impl RunState {
    pub(super) fn apply_delegation_event(&mut self, applied: Applied<'_>) -> Result<(), String> {
        let (event, seq, running) = (applied.event, applied.seq, applied.running);
        match event {
            Event::TaskDelegated { .. } | Event::MergeConflicted { .. } => {
                require_running(running)?;
                self.require_idle()?;
                self.board_mut()?.apply(event, None)?;
            }
            Event::TaskReturned {
                cost_usd,
                unpriced_calls,
                prompt_tokens,
                completion_tokens,
                ..
            } => {
                // A record of what a child run did: also after this run paused (say, for a
                // failed task) while other children were still working.
                self.board_mut()?.apply(event, None)?;
                // The run's budgets cover the work of its parallel tasks too.
                self.usage.prompt_tokens = self.usage.prompt_tokens.saturating_add(*prompt_tokens);
                self.usage.completion_tokens = self
                    .usage
                    .completion_tokens
                    .saturating_add(*completion_tokens);
                if cost_usd.is_finite() {
                    self.usage.cost_usd += cost_usd;
                }
                self.usage.unpriced_calls =
                    self.usage.unpriced_calls.saturating_add(*unpriced_calls);
            }
            Event::MergeStarted { task, snapshot } => {
                require_running(running)?;
                self.require_idle()?;
                self.board_mut()?.apply(event, None)?;
                // The merge commit is the state later tasks start from (and roll back to).
                self.snapshots.push(SnapshotRecord {
                    seq,
                    snapshot: snapshot.clone(),
                    reason: crate::task::SnapshotReason::TaskMerged,
                    task: Some(task.clone()),
                });
            }
            other => return Err(misrouted(other)),
        }
        Ok(())
    }
}
