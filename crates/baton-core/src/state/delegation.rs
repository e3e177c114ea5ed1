//! The reducer's rules for one family of events: parallel tasks: delegation to child runs, their return and merge.

use super::*;

impl RunState {
    pub(super) fn apply_delegation_event(&mut self, applied: Applied<'_>) -> Result<(), String> {
        let (event, seq, running) = (applied.event, applied.seq, applied.running);
        match event {
            Event::TaskDelegated {
                task,
                child_run,
                base_snapshot,
            } => {
                require_running(running)?;
                self.require_idle()?;
                self.board_mut()?.delegate(task, child_run, base_snapshot)?;
            }
            Event::TaskReturned {
                task,
                child_run,
                result,
                cost_usd,
                unpriced_calls,
                prompt_tokens,
                completion_tokens,
                turns,
            } => {
                // A record of what a child run did: also after this run paused (say, for a
                // failed task) while other children were still working.
                let tokens = prompt_tokens.saturating_add(*completion_tokens);
                self.board_mut()?
                    .returned(task, child_run, result, tokens, *cost_usd, *turns)?;
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
                self.board_mut()?.merge_started(task, snapshot)?;
                // The merge commit is the state later tasks start from (and roll back to).
                self.snapshots.push(SnapshotRecord {
                    seq,
                    snapshot: snapshot.clone(),
                    reason: crate::task::SnapshotReason::TaskMerged,
                    task: Some(task.clone()),
                });
            }
            Event::MergeConflicted {
                task,
                conflicts,
                follow_up,
            } => {
                require_running(running)?;
                self.require_idle()?;
                self.board_mut()?
                    .merge_conflicted(task, conflicts, follow_up)?;
            }
            // A record: the commit already exists in the shadow repository when it is journaled.
            other => return Err(misrouted(other)),
        }
        Ok(())
    }
}
