//! A commit that may wait: the one that ends with a read-only call's intent (see the journal's
//! doc). It is written with the journal's next commit if that comes before its deadline, or on
//! its own at the deadline, in the background, while the engine goes on.
//!
//! Exactly one of the two writes it: whoever takes the batch out of the shared slot first. The
//! timer takes it only at the deadline; the journal takes it when it commits next, and if the
//! timer was first, waits for that write instead.
//!
//! **The timer starts when the call first waits.** A call that returns on its first poll (a
//! no-op, a lookup in memory) is done long before any deadline, and starting a timer task for it
//! — a task spawned, then aborted — cost about as much as the rest of the engine's work in a
//! turn (two wake-ups of another thread). So the timer is armed by [`run_armed`] when the call's
//! future is first pending: any call that does I/O (the standard tools run theirs on the
//! blocking pool), and with it any call that could take long.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::Duration;

use baton_core::EventRecord;
use baton_store::{Lease, Store};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::append_durably;
use crate::EngineError;

/// The timer and the write: `Some(records)` once it wrote them, `None` if the journal took them
/// first.
type Write = JoinHandle<Result<Option<Vec<EventRecord>>, EngineError>>;

pub(super) struct Deferred {
    shared: Arc<Shared>,
}

/// What the journal and a running call share about a deferred batch.
struct Shared {
    /// The batch, until the journal's next commit or the deadline takes it.
    slot: Mutex<Option<Vec<EventRecord>>>,
    /// The timer, once armed.
    write: Mutex<Option<Write>>,
    deadline: Instant,
    store: Arc<dyn Store>,
    lease: Lease,
}

/// Arms a deferred batch's timer from where the journal is not at hand (a running call).
#[derive(Clone)]
pub(crate) struct Arming(Arc<Shared>);

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
    /// Holds `records` until [`Deferred::reclaim`] or, once armed, `deadline`. A deadline
    /// already past arms the timer at once: the write begins now, as an overlapped commit.
    pub(super) fn hold(
        store: Arc<dyn Store>,
        lease: Lease,
        records: Vec<EventRecord>,
        deadline: Instant,
    ) -> Deferred {
        let due_now = deadline <= Instant::now();
        // Due now: the write owns the batch from the start, so nothing can fold it into a later
        // commit (the write begins at once, as an overlapped commit).
        let (waiting, owned) = if due_now {
            (None, Some(records))
        } else {
            (Some(records), None)
        };
        let deferred = Deferred {
            shared: Arc::new(Shared {
                slot: Mutex::new(waiting),
                write: Mutex::new(None),
                deadline,
                store,
                lease,
            }),
        };
        if let Some(records) = owned {
            deferred.arming().start(Some(records));
        }
        deferred
    }

    pub(super) fn arming(&self) -> Arming {
        Arming(self.shared.clone())
    }

    /// Takes the batch back if it was not written yet; waits for its write otherwise.
    pub(super) async fn reclaim(self) -> Result<Reclaimed, EngineError> {
        let shared = self.shared;
        let write = lock(&shared.write).take();
        if let Some(records) = lock(&shared.slot).take() {
            if let Some(write) = write {
                // The timer would find the slot empty and end; it need not wake for that.
                write.abort();
            }
            return Ok(Reclaimed::Unwritten {
                records,
                deadline: shared.deadline,
            });
        }
        // The slot is empty, so an armed timer took the batch.
        let Some(write) = write else {
            return Err(EngineError::Internal(
                "the journal's deferred commit lost its batch".into(),
            ));
        };
        match write.await {
            Ok(Ok(Some(records))) => Ok(Reclaimed::Durable(records)),
            Ok(Err(e)) => Err(e),
            Ok(Ok(None)) => Err(EngineError::Internal(
                "the journal's deferred commit lost its batch".into(),
            )),
            Err(e) => Err(EngineError::Internal(format!(
                "the journal's deferred commit did not finish: {e}"
            ))),
        }
    }
}

impl Arming {
    /// Starts the timer (once): at the deadline it takes the batch, if the journal has not, and
    /// writes it.
    pub(crate) fn arm(&self) {
        self.start(None);
    }

    /// Starts the write (once): of `owned`, at once, or of the slot's batch at the deadline.
    fn start(&self, owned: Option<Vec<EventRecord>>) {
        let mut write = lock(&self.0.write);
        if write.is_some() {
            return;
        }
        let shared = self.0.clone();
        *write = Some(tokio::spawn(async move {
            let records = match owned {
                Some(records) => records,
                None => {
                    tokio::time::sleep_until(shared.deadline).await;
                    match lock(&shared.slot).take() {
                        Some(records) => records,
                        None => return Ok(None),
                    }
                }
            };
            append_durably(shared.store.as_ref(), &shared.lease, &records).await?;
            Ok(Some(records))
        }));
    }
}

/// Runs a call announced by a deferred batch (`arming`): the batch's timer is armed only if the
/// call does not finish on its first poll (see the module's doc).
pub(crate) async fn run_armed<F: Future>(arming: Option<Arming>, call: F) -> F::Output {
    let Some(arming) = arming else {
        return call.await;
    };
    let mut call = std::pin::pin!(call);
    if let Poll::Ready(out) = std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await {
        return out;
    }
    arming.arm();
    call.await
}

/// The deadline of a batch deferred now by `delay`, or `earlier`'s if that comes first: events
/// folded into a later batch keep the deadline they had.
pub(super) fn deadline(delay: Duration, earlier: Option<Instant>) -> Instant {
    let own = Instant::now() + delay;
    earlier.map_or(own, |earlier| earlier.min(own))
}

/// Nothing panics while these locks are held; a poisoned one still holds a consistent value.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty batch held until `deadline`, on a real store.
    async fn held(deadline: Instant) -> (tempfile::TempDir, Deferred) {
        let dir = tempfile::tempdir().unwrap();
        let store = baton_store::SqliteStore::open(&dir.path().join("baton.db"))
            .await
            .unwrap();
        let lease = Lease {
            run_id: baton_core::RunId::new(),
            token: "t".into(),
            expires_at: jiff::Timestamp::now(),
        };
        let deferred = Deferred::hold(Arc::new(store), lease, Vec::new(), deadline);
        (dir, deferred)
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(600)
    }

    fn armed(deferred: &Deferred) -> bool {
        lock(&deferred.shared.write).is_some()
    }

    #[tokio::test]
    async fn a_call_done_on_its_first_poll_starts_no_timer() {
        let (_dir, deferred) = held(far()).await;
        assert_eq!(run_armed(Some(deferred.arming()), async { 7 }).await, 7);
        assert!(!armed(&deferred));
        assert!(matches!(
            deferred.reclaim().await,
            Ok(Reclaimed::Unwritten { .. })
        ));
    }

    #[tokio::test]
    async fn a_call_that_waits_starts_the_timer() {
        let (_dir, deferred) = held(far()).await;
        let call = async {
            tokio::task::yield_now().await;
            7
        };
        assert_eq!(run_armed(Some(deferred.arming()), call).await, 7);
        assert!(armed(&deferred));
        // Taken back before the deadline: the timer is stopped, the batch unwritten.
        assert!(matches!(
            deferred.reclaim().await,
            Ok(Reclaimed::Unwritten { .. })
        ));
    }

    #[tokio::test]
    async fn a_deadline_already_past_starts_the_write_at_once() {
        let (_dir, deferred) = held(Instant::now()).await;
        assert!(armed(&deferred));
    }

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
