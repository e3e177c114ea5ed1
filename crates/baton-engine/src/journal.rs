//! The write side of a run: every state change goes through [`Journal::record`], which validates
//! the event against the reducer and appends it durably before the caller acts on anything that
//! depends on it.
//!
//! **Group commit.** An event that neither announces an effect nor ends a wait — a turn's
//! start or end, a model call's or a tool call's outcome, a note — is applied at once and
//! written in the same transaction as the next event that must be durable: the intent of the
//! next effect (`model_call_started`, `tool_call_started`, a check, a snapshot, a merge, …), a
//! pause or an ending. So a turn with one tool call costs two commits (`turn_finished +
//! turn_started + model_call_started` before the request, `model_call_finished +
//! tool_call_started` before the tool), and a crash loses only events after the last commit:
//! none of them has an effect that started. Observers (and the log) see each event at the
//! commit that makes it durable, in order, with the state after that commit.
//!
//! **Read-only calls overlap their intent's commit.** A read-only tool has no effect to protect
//! (resume runs an unfinished read-only call again: invariant 2), so the commit that ends with
//! its `tool_call_started` is handed to the store and the call runs while it is written; the
//! next commit, and anything else that needs the journal durable, waits for it first. What that
//! commit carries — the model's reply — is at risk for exactly as long as before (from the
//! reply's arrival until that commit lands); what is won is the time the engine spends between
//! the two commits (the tool, the next request's assembly), which no longer waits for an fsync.
//! A mutating call still starts only once its intent is durable. Observers see the overlapped
//! commit's events when the journal next waits for it, before any later event; the state they
//! are given then may already hold the events applied since (not yet durable).
//!
//! **The run's end.** Before the event that finishes, fails or pauses the run, what the run
//! spent on other services ([`SideUsage`]: the code index's embeddings) is settled — up to
//! 10 s for the refresh after its last change, none after a person's stop — and journaled.

use std::sync::Arc;
use std::time::Duration;

use baton_core::{Event, EventRecord, PauseReason, RunId, RunState, RunStatus, ToolEffect};
use baton_store::{Lease, Store, StoreError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::api::RunObserver;
use crate::checkpoint::{self, CHECKPOINT_EVERY};
use crate::{EngineError, SideUsage};

const APPEND_ATTEMPTS: u32 = 5;

pub(crate) struct Journal {
    store: Arc<dyn Store>,
    lease: Lease,
    state: RunState,
    observer: Arc<dyn RunObserver>,
    heartbeat: Heartbeat,
    /// Applied, not yet durable: written with the next event that must be.
    pending: Vec<EventRecord>,
    /// A commit handed to the store that nobody has waited for yet (a read-only call's intent):
    /// every later commit waits for it first, so batches land in order.
    in_flight: Option<InFlight>,
    /// The seq of the run's latest state checkpoint (0: none yet).
    checkpointed: u64,
    /// Usage of other services, settled and journaled before the run's ending.
    side_usage: Option<Arc<dyn SideUsage>>,
}

/// How long the run's ending waits for the background work it caused (a refresh of the code
/// index after its last change) before it is journaled without what that work still spends.
const SETTLE_WITHIN: Duration = Duration::from_secs(10);

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
            pending: Vec::new(),
            in_flight: None,
            checkpointed: 0,
            side_usage: None,
        }
    }

    /// Settles and journals `usage` before the run's ending (see [`Journal::record`]).
    pub(crate) fn with_side_usage(mut self, usage: Option<Arc<dyn SideUsage>>) -> Self {
        self.side_usage = usage;
        self
    }

    /// Says that the run's state was loaded from the checkpoint at `seq`: the next one is due
    /// [`CHECKPOINT_EVERY`] events later.
    pub(crate) fn with_checkpoint_at(mut self, seq: u64) -> Self {
        self.checkpointed = seq;
        self
    }

    pub(crate) fn state(&self) -> &RunState {
        &self.state
    }

    pub(crate) fn run_id(&self) -> &RunId {
        &self.lease.run_id
    }

    /// Validates and applies one event, and makes it durable — at once, or with the next event
    /// that must be (see the module's doc). On Err the run must stop: the store and this process
    /// no longer agree, or the lease is gone.
    ///
    /// Before an event that ends or pauses the run, the side usage is settled and journaled
    /// first: the reducer takes usage only from a running run, and a process that ends with the
    /// run would lose it.
    pub(crate) async fn record(&mut self, event: Event) -> Result<(), EngineError> {
        let ends_running = event
            .status_change()
            .is_some_and(|status| status != RunStatus::Running);
        if ends_running
            && self.state.status == RunStatus::Running
            && let Some(usage) = self.side_usage.clone()
        {
            // Durable first: the observers of the last tool calls (the code index's refresher
            // is poked by them) see them before the wait.
            self.commit().await?;
            let interrupted = matches!(
                &event,
                Event::RunPaused {
                    reason: PauseReason::Interrupted,
                    ..
                }
            );
            // A person who stopped the run does not wait for the index.
            let within = if interrupted {
                Duration::ZERO
            } else {
                SETTLE_WITHIN
            };
            usage.settle(within).await;
            for used in usage.take() {
                self.append(used).await?;
            }
        }
        self.append(event).await
    }

    /// [`Journal::record`] without the settling.
    async fn append(&mut self, event: Event) -> Result<(), EngineError> {
        if let Some(lost) = self.heartbeat.lost() {
            return Err(EngineError::Store(lost));
        }
        let durability = Durability::of(&event);
        let record = apply_next(&mut self.state, &self.lease, event)?;
        self.pending.push(record);
        match durability {
            Durability::Now => self.commit().await,
            Durability::Overlapped => self.commit_overlapped().await,
            Durability::WithNext => Ok(()),
        }
    }

    /// Makes every applied event durable (one transaction), e.g. before something outside the
    /// journal records where the run is (a workspace archive).
    pub(crate) async fn commit(&mut self) -> Result<(), EngineError> {
        self.wait_in_flight().await?;
        if self.pending.is_empty() {
            return Ok(());
        }
        append_durably(self.store.as_ref(), &self.lease, &self.pending).await?;
        let records = std::mem::take(&mut self.pending);
        self.observe(records);
        // Only here is every applied event durable, so only here is the state a checkpoint.
        if self.state.next_seq >= self.checkpointed + CHECKPOINT_EVERY {
            self.checkpoint().await;
        }
        Ok(())
    }

    /// Hands every applied event to the store in one transaction and returns without waiting
    /// for it to be durable (see the module's doc: only for what a read-only call announces).
    async fn commit_overlapped(&mut self) -> Result<(), EngineError> {
        // One batch in flight at a time: each must start where the journal ends.
        self.wait_in_flight().await?;
        let records = std::mem::take(&mut self.pending);
        let store = self.store.clone();
        let lease = self.lease.clone();
        self.in_flight = Some(InFlight(tokio::spawn(async move {
            append_durably(store.as_ref(), &lease, &records)
                .await
                .map(|()| records)
        })));
        Ok(())
    }

    /// Waits for the overlapped commit, if one is under way, and shows its events.
    async fn wait_in_flight(&mut self) -> Result<(), EngineError> {
        let Some(InFlight(task)) = self.in_flight.take() else {
            return Ok(());
        };
        let records = task.await.map_err(|e| {
            EngineError::Internal(format!(
                "the journal's overlapped commit did not finish: {e}"
            ))
        })??;
        self.observe(records);
        Ok(())
    }

    /// Observers see only what is durable, in order: a consumer of the stream (a supervisor, a
    /// test killing the process at an event) can act on an event knowing a crash will not take
    /// it back.
    fn observe(&self, records: Vec<EventRecord>) {
        for record in records {
            log_record(&record);
            self.observer.on_event(&record, &self.state);
        }
    }

    /// Saves the state as the run's checkpoint. Right after a commit, so it holds only durable
    /// events. A failure costs only speed (the next resume replays more), so it is logged.
    async fn checkpoint(&mut self) {
        let saved = match checkpoint::encode(&self.state) {
            Ok(checkpoint) => self.store.save_checkpoint(&self.lease, &checkpoint).await,
            Err(e) => {
                tracing::warn!(
                    "could not serialize the state of run {}: {e}",
                    self.lease.run_id
                );
                return;
            }
        };
        match saved {
            Ok(()) => self.checkpointed = self.state.next_seq,
            Err(e) => tracing::warn!(
                "could not save a state checkpoint of run {}: {e}",
                self.lease.run_id
            ),
        }
    }

    pub(crate) async fn close(mut self) {
        // Whatever was applied is written before the lease goes (a run stopping on an error
        // keeps what it did); if that fails too, those events had no effect that started.
        if let Err(e) = self.commit().await {
            tracing::warn!(
                "could not journal the last events of run {}: {e}",
                self.lease.run_id
            );
        }
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
    let (mut state, _) = checkpoint::load_state(store, &lease.run_id).await?;
    if state.status.is_terminal() {
        return Ok(None);
    }
    let record = apply_next(&mut state, lease, event)?;
    append_durably(store, lease, std::slice::from_ref(&record)).await?;
    log_record(&record);
    Ok(Some(record))
}

/// Whether an event must be durable as soon as it is applied, may be written while the engine
/// goes on, or may wait for the next one that must.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Durability {
    /// It announces an effect, precedes a wait, or changes the run's status: committed now
    /// (with whatever waits before it).
    Now,
    /// It announces a read-only call, which has no effect to protect: committed now (with
    /// whatever waits before it), but the call runs while the commit is written; the next
    /// commit waits for it.
    Overlapped,
    /// A step between effects: written with the next commit.
    WithNext,
}

/// The task writing an overlapped commit; it gives the batch back once durable.
struct InFlight(JoinHandle<Result<Vec<EventRecord>, EngineError>>);

impl Durability {
    fn of(event: &Event) -> Durability {
        match event {
            Event::ToolCallStarted {
                effect: ToolEffect::ReadOnly,
                ..
            } => Durability::Overlapped,
            // Outcomes: the next commit comes before anything that depends on them is sent (a
            // summary's next is the model call it made room for).
            Event::TurnStarted { .. }
            | Event::TurnFinished { .. }
            | Event::ModelCallFinished { .. }
            | Event::CompactionFinished { .. }
            | Event::ToolCallFinished { .. }
            | Event::NoteAdded { .. }
            | Event::BudgetWarning { .. }
            | Event::McpServerFailed { .. }
            | Event::McpServerStarted { .. }
            | Event::RepoMapRendered { .. }
            | Event::EmbeddingsUsed { .. } => Durability::WithNext,
            _ => Durability::Now,
        }
    }
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
    records: &[EventRecord],
) -> Result<(), EngineError> {
    let mut delay = Duration::from_millis(100);
    for _ in 0..APPEND_ATTEMPTS - 1 {
        match store.append(lease, records).await {
            Err(e) if e.is_retryable() => {
                tracing::warn!("journal append failed, retrying in {delay:?}: {e}");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
            other => return other.map_err(EngineError::from),
        }
    }
    Ok(store.append(lease, records).await?)
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
