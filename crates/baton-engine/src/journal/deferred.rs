//! A commit that may wait: the one that ends with a read-only call's intent (see the journal's
//! doc). It is written with the journal's next commit if that comes before its deadline, or on
//! its own at the deadline, in the background, while the engine goes on.
//!
//! Exactly one of the two writes it: whoever takes the batch out of the shared slot first. The
//! timer takes it only at the deadline; the journal takes it when it commits next, and if the
//! timer was first, waits for that write instead.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use baton_core::EventRecord;
use baton_store::{Lease, Store};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::append_durably;
use crate::EngineError;

/// The batch, until the journal's next commit or the deadline takes it.
type Slot = Arc<Mutex<Option<Vec<EventRecord>>>>;

pub(super) struct Deferred {
    slot: Slot,
    /// When the batch is written on its own if the journal has not taken it.
    deadline: Instant,
    /// The timer and the write: `Some(records)` once it wrote them, `None` if the journal took
    /// them first.
    task: JoinHandle<Result<Option<Vec<EventRecord>>, EngineError>>,
}

/// What became of a deferred batch when the journal came back for it.
pub(super) enum Reclaimed {
    /// Not written: to be written with the next commit, ahead of what was applied since.
    Unwritten {
        records: Vec<EventRecord>,
        /// Its deadline still holds for whatever it is written with.
        deadline: Instant,
    },
    /// Written on its own (its deadline came first): durable now.
    Durable(Vec<EventRecord>),
}

impl Deferred {
    /// Starts the timer for `records`, written at `deadline` unless [`Deferred::reclaim`] comes
    /// first. A deadline already past writes them at once.
    pub(super) fn start(
        store: Arc<dyn Store>,
        lease: Lease,
        records: Vec<EventRecord>,
        deadline: Instant,
    ) -> Deferred {
        let due_now = deadline <= Instant::now();
        // Due now: the task owns the batch from the start, so nothing can fold it into a later
        // commit (the write begins at once, as an overlapped commit).
        let (waiting, owned) = if due_now {
            (None, Some(records))
        } else {
            (Some(records), None)
        };
        let slot: Slot = Arc::new(Mutex::new(waiting));
        let timer_slot = slot.clone();
        let task = tokio::spawn(async move {
            let records = match owned {
                Some(records) => records,
                None => {
                    tokio::time::sleep_until(deadline).await;
                    match take(&timer_slot) {
                        Some(records) => records,
                        None => return Ok(None),
                    }
                }
            };
            append_durably(store.as_ref(), &lease, &records).await?;
            Ok(Some(records))
        });
        Deferred {
            slot,
            deadline,
            task,
        }
    }

    /// Takes the batch back if it was not written yet; waits for its write otherwise.
    pub(super) async fn reclaim(self) -> Result<Reclaimed, EngineError> {
        if let Some(records) = take(&self.slot) {
            // The timer would find the slot empty and end; it need not wake for that.
            self.task.abort();
            return Ok(Reclaimed::Unwritten {
                records,
                deadline: self.deadline,
            });
        }
        match self.task.await {
            Ok(Ok(Some(records))) => Ok(Reclaimed::Durable(records)),
            Ok(Err(e)) => Err(e),
            // The slot was empty, so the task took the batch: it cannot have found it empty.
            Ok(Ok(None)) => Err(EngineError::Internal(
                "the journal's deferred commit lost its batch".into(),
            )),
            Err(e) => Err(EngineError::Internal(format!(
                "the journal's deferred commit did not finish: {e}"
            ))),
        }
    }
}

/// The deadline of a batch deferred now by `delay`, or `earlier`'s if that comes first: events
/// folded into a later batch keep the deadline they had.
pub(super) fn deadline(delay: Duration, earlier: Option<Instant>) -> Instant {
    let own = Instant::now() + delay;
    earlier.map_or(own, |earlier| earlier.min(own))
}

fn take(slot: &Slot) -> Option<Vec<EventRecord>> {
    // Nothing panics while holding the lock; a poisoned one still holds a consistent Option.
    slot.lock().unwrap_or_else(PoisonError::into_inner).take()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folded_batch_keeps_the_earlier_deadline() {
        let earlier = Instant::now() + Duration::from_millis(1);
        assert_eq!(deadline(Duration::from_secs(60), Some(earlier)), earlier);
        let later = Instant::now() + Duration::from_secs(60);
        assert!(deadline(Duration::from_millis(1), Some(later)) < later);
        let before = Instant::now();
        let own = deadline(Duration::from_secs(1), None);
        assert!(own >= before + Duration::from_secs(1));
    }
}
