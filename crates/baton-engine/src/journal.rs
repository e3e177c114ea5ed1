//! The write side of a run: every state change goes through [`Journal::record`], which validates
//! the event against the reducer, appends it durably and only then lets the caller act on it.

use std::sync::Arc;
use std::time::Duration;

use baton_core::{Event, EventRecord, RunId, RunState};
use baton_store::{Lease, Store, StoreError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::EngineError;
use crate::api::RunObserver;

const APPEND_ATTEMPTS: u32 = 5;

pub(crate) struct Journal {
    store: Arc<dyn Store>,
    lease: Lease,
    state: RunState,
    observer: Arc<dyn RunObserver>,
    heartbeat: Heartbeat,
}

impl Journal {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        lease: Lease,
        state: RunState,
        observer: Arc<dyn RunObserver>,
    ) -> Self {
        let heartbeat = Heartbeat::start(store.clone(), lease.clone());
        Journal {
            store,
            lease,
            state,
            observer,
            heartbeat,
        }
    }

    pub(crate) fn state(&self) -> &RunState {
        &self.state
    }

    pub(crate) fn run_id(&self) -> &RunId {
        &self.lease.run_id
    }

    /// Validates, appends (durably) and applies one event. On Err the run must stop: the store
    /// and this process no longer agree, or the lease is gone.
    pub(crate) async fn record(&mut self, event: Event) -> Result<(), EngineError> {
        if let Some(lost) = self.heartbeat.lost() {
            return Err(EngineError::Store(lost));
        }
        let record = apply_next(&mut self.state, &self.lease, event)?;
        append_durably(self.store.as_ref(), &self.lease, &record).await?;
        log_record(&record);
        self.observer.on_event(&record, &self.state);
        Ok(())
    }

    pub(crate) async fn close(self) {
        self.heartbeat.stop();
        tracing::debug!(run = self.lease.run_id.as_str(), "releasing the lease");
        if let Err(e) = self.store.release(&self.lease).await {
            tracing::warn!(
                "could not release the lease of run {}: {e}",
                self.lease.run_id
            );
        }
    }
}

/// Journals one event from outside a running engine — a supervisor's restart record, a person's
/// rollback — through the same door as the engine's own: checked against the replayed journal
/// (nothing the reducer would refuse is ever written), appended durably under `lease` at the
/// run's next sequence number. `None` when the run has finished or failed: its journal is closed.
pub async fn record_external(
    store: &dyn Store,
    lease: &Lease,
    event: Event,
) -> Result<Option<EventRecord>, EngineError> {
    let events = store.load_events(&lease.run_id).await?;
    let mut state = baton_core::replay(&events).map_err(|e| {
        EngineError::Internal(format!(
            "the journal of run {} cannot be replayed: {e}",
            lease.run_id
        ))
    })?;
    if state.status.is_terminal() {
        return Ok(None);
    }
    let record = apply_next(&mut state, lease, event)?;
    append_durably(store, lease, &record).await?;
    log_record(&record);
    Ok(Some(record))
}

/// The record of `event` at the run's next sequence number, applied to `state`. Applying first
/// validates the event; if the append then fails the caller stops using this state, so the store
/// stays the only truth.
fn apply_next(
    state: &mut RunState,
    lease: &Lease,
    event: Event,
) -> Result<EventRecord, EngineError> {
    let record = EventRecord {
        run_id: lease.run_id.clone(),
        seq: state.next_seq,
        at: jiff::Timestamp::now(),
        event,
    };
    state.apply(&record).map_err(|e| {
        EngineError::Internal(format!("cannot journal {}: {e}", record.event.kind()))
    })?;
    Ok(record)
}

/// A busy database (another run's writer holding the lock past the busy timeout) is worth a few
/// more tries: giving up here would stop the run and, after a model call, pay for it again on
/// resume. A failed SQLite transaction wrote nothing, so retrying cannot duplicate.
async fn append_durably(
    store: &dyn Store,
    lease: &Lease,
    record: &EventRecord,
) -> Result<(), EngineError> {
    let mut delay = Duration::from_millis(100);
    for _ in 0..APPEND_ATTEMPTS - 1 {
        match store.append(lease, std::slice::from_ref(record)).await {
            Err(e) if e.is_retryable() => {
                tracing::warn!("journal append failed, retrying in {delay:?}: {e}");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            other => return other.map_err(EngineError::from),
        }
    }
    Ok(store.append(lease, std::slice::from_ref(record)).await?)
}

/// One log line per journaled event: what it was and the numbers that matter, never contents
/// (arguments, outputs and messages are in the journal; logs stay small and free of them).
fn log_record(record: &EventRecord) {
    let run = record.run_id.as_str();
    let seq = record.seq;
    match &record.event {
        Event::ModelCallStarted {
            turn,
            call,
            attempt,
            ..
        } => tracing::info!(run, seq, turn, call, attempt, "model call started"),
        Event::ModelCallFailed {
            turn,
            call,
            attempt,
            class,
            retry_in_ms,
            ..
        } => tracing::info!(
            run,
            seq,
            turn,
            call,
            attempt,
            class = ?class,
            retry_in_ms = *retry_in_ms,
            "model call failed"
        ),
        Event::ModelCallFinished {
            turn,
            call,
            usage,
            cost_usd,
            duration_ms,
            ..
        } => tracing::info!(
            run,
            seq,
            turn,
            call,
            duration_ms,
            prompt_tokens = usage.as_ref().map(|u| u.prompt_tokens),
            completion_tokens = usage.as_ref().map(|u| u.completion_tokens),
            cost_usd = *cost_usd,
            "model call finished"
        ),
        Event::ToolCallStarted {
            turn,
            call_id,
            name,
            effect,
            ..
        } => {
            tracing::info!(run, seq, turn, call_id, tool = name, effect = ?effect, "tool call started")
        }
        Event::ToolCallFinished {
            turn,
            call_id,
            result,
            duration_ms,
        } => tracing::info!(
            run,
            seq,
            turn,
            call_id,
            outcome = ?result.outcome,
            exit_code = result.exit_code,
            duration_ms,
            "tool call finished"
        ),
        Event::CompactionStarted {
            turn,
            replaced,
            trigger,
            estimated_prompt_tokens,
        } => tracing::info!(
            run,
            seq,
            turn,
            replaced,
            trigger = ?trigger,
            estimated_prompt_tokens,
            "compaction started"
        ),
        Event::CompactionFailed {
            attempt,
            class,
            retry_in_ms,
            ..
        } => {
            tracing::info!(run, seq, attempt, class = ?class, retry_in_ms = *retry_in_ms, "compaction failed")
        }
        Event::CompactionFinished {
            replaced,
            left_out,
            duration_ms,
            ..
        } => tracing::info!(
            run,
            seq,
            replaced,
            left_out,
            duration_ms,
            "compaction finished"
        ),
        Event::RunPaused { reason, .. } => tracing::info!(run, seq, reason = ?reason, "run paused"),
        Event::RunFailed { .. } => tracing::info!(run, seq, "run failed"),
        other => tracing::info!(run, seq, kind = other.kind(), "journaled"),
    }
}

/// Renews the lease in the background so that a long tool call does not let it expire.
struct Heartbeat {
    run_id: RunId,
    task: JoinHandle<()>,
    lost: watch::Receiver<bool>,
}

impl Heartbeat {
    fn start(store: Arc<dyn Store>, lease: Lease) -> Heartbeat {
        let run_id = lease.run_id.clone();
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut lease = lease;
            loop {
                let ttl = u64::try_from(
                    lease
                        .expires_at
                        .duration_since(jiff::Timestamp::now())
                        .as_millis(),
                )
                .unwrap_or(0);
                // Renew at a third of the remaining time; never spin faster than every 200 ms.
                tokio::time::sleep(Duration::from_millis((ttl / 3).max(200))).await;
                match store.renew(&lease).await {
                    Ok(renewed) => {
                        tracing::debug!(run = lease.run_id.as_str(), "lease renewed");
                        lease = renewed
                    }
                    Err(StoreError::LeaseLost { .. }) => {
                        let _ = tx.send(true);
                        return;
                    }
                    Err(e) => tracing::warn!("lease renewal failed (will retry): {e}"),
                }
            }
        });
        Heartbeat {
            run_id,
            task,
            lost: rx,
        }
    }

    fn lost(&self) -> Option<StoreError> {
        (*self.lost.borrow()).then(|| StoreError::LeaseLost {
            run_id: self.run_id.clone(),
        })
    }

    fn stop(self) {
        self.task.abort();
    }
}

impl Drop for Heartbeat {
    /// A cancelled engine future must not keep renewing the lease of a run it no longer drives.
    fn drop(&mut self) {
        self.task.abort();
    }
}
