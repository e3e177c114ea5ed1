//! The reducer's rules for one family of events: compaction of the history (tier 2).

use super::*;

impl RunState {
    pub(super) fn apply_context_event(&mut self, applied: Applied<'_>) -> Result<(), String> {
        let (event, seq, running) = (applied.event, applied.seq, applied.running);
        match event {
            Event::CompactionStarted {
                turn,
                replaced,
                trigger,
                ..
            } => {
                require_running(running)?;
                match &self.phase {
                    Phase::AwaitingModel { turn: current, .. } => check_turn(*current, *turn)?,
                    _ => return Err("compaction happens only before a model call".into()),
                }
                if self.compaction.is_some() {
                    return Err("a compaction is already in progress".into());
                }
                if *replaced == 0 || *replaced as usize > self.history.len() {
                    return Err(format!(
                        "cannot replace {replaced} of {} history entries",
                        self.history.len()
                    ));
                }
                self.compaction = Some(PendingCompaction {
                    replaced: *replaced,
                    trigger: *trigger,
                    failures: 0,
                    overflows: 0,
                });
            }
            Event::CompactionFailed { class, .. } => {
                let Some(pending) = &mut self.compaction else {
                    return Err("no compaction is in progress".into());
                };
                pending.failures = pending.failures.saturating_add(1);
                if *class == ErrorClass::ContextOverflow {
                    pending.overflows = pending.overflows.saturating_add(1);
                }
                self.consecutive_model_failures = self.consecutive_model_failures.saturating_add(1);
            }
            Event::CompactionFinished {
                summary,
                replaced,
                first_seq,
                last_seq,
                usage,
                cost_usd,
                ..
            } => {
                require_running(running)?;
                let Some(pending) = self.compaction.take_if(|p| p.replaced == *replaced) else {
                    return Err(format!(
                        "no compaction of {replaced} entries is in progress"
                    ));
                };
                let count = pending.replaced as usize;
                let (first, last) = (self.history[0].seq, self.history[count - 1].seq);
                if (first, last) != (*first_seq, *last_seq) {
                    return Err(format!(
                        "the replaced entries span events {first}-{last}, not {first_seq}-{last_seq}"
                    ));
                }
                self.usage.add_call(usage.as_ref(), *cost_usd);
                if let Some(board) = &mut self.board {
                    board.charge(usage.as_ref(), *cost_usd);
                }
                self.consecutive_model_failures = 0;
                self.compactions += 1;
                if pending.trigger == CompactionTrigger::Overflow {
                    self.overflow_compactions += 1;
                }
                let kept = self.history.split_off(count);
                // Turn 0: the summary is older than every turn it kept, so the next compaction
                // replaces (and folds in) it.
                self.history = vec![HistoryEntry {
                    seq,
                    turn: 0,
                    message: Message::User {
                        content: summary_message(summary, first, last),
                    },
                }];
                self.history.extend(kept);
            }
            other => return Err(misrouted(other)),
        }
        Ok(())
    }
}
