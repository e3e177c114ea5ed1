//! The reducer's rules for one family of events: workspace snapshots and rollbacks.

use super::*;

impl RunState {
    pub(super) fn apply_snapshot_event(&mut self, applied: Applied<'_>) -> Result<(), String> {
        let (event, seq, running) = (applied.event, applied.seq, applied.running);
        match event {
            Event::RollbackStarted { task: Some(_), .. } => {
                require_running(running)?;
                self.require_idle()?;
                self.board_mut()?.apply(event, None)?;
            }
            Event::RollbackFinished { task: Some(_), .. } => {
                self.board_mut()?.apply(event, None)?;
            }
            // A person's rollback (`baton rollback`), journaled by the CLI holding the lease,
            // whatever the run was doing when it stopped.
            Event::RollbackStarted {
                task: None,
                snapshot,
                ..
            } => {
                if self.user_rollback.is_some() {
                    return Err("another rollback is in progress".into());
                }
                self.user_rollback = Some(snapshot.clone());
            }
            Event::RollbackFinished {
                task: None,
                snapshot,
            } => {
                if self.user_rollback.as_deref() != Some(snapshot.as_str()) {
                    return Err(format!("no rollback to {snapshot} is in progress"));
                }
                self.user_rollback = None;
                // Between turns the model is told; inside a turn a message would split a tool
                // call from its result, so the restored files speak for themselves.
                if self.phase == Phase::Idle {
                    self.push_history(
                        seq,
                        self.turns_started,
                        Message::User {
                            content: format!(
                                "A person restored the workspace to snapshot {}: files may \
                                 differ from what you saw before. Check before relying on them.",
                                snapshot.get(..12).unwrap_or(snapshot)
                            ),
                        },
                    );
                }
            }
            Event::SnapshotTaken {
                snapshot,
                reason,
                task,
            } => self.snapshots.push(SnapshotRecord {
                seq,
                snapshot: snapshot.clone(),
                reason: *reason,
                task: task.clone(),
            }),
            other => return Err(misrouted(other)),
        }
        Ok(())
    }
}
