//! The write side of a run: every state change goes through [`Journal::record`], which validates
//! the event against the reducer and appends it durably before the caller acts on anything that
//! depends on it.
//!
//! **Group commit.** An event that neither announces an effect nor ends a wait — a turn's
//! start or end, a model call's or a tool call's outcome, a note — is applied at once and
//! written in the same transaction as the next event that must be durable: the intent of the
//! next effect (`model_call_started`, `tool_call_started`, a check, a snapshot, a merge, …), a
//! pause or an ending. So a turn with one mutating tool call costs two commits
//! (`turn_finished + turn_started + model_call_started` before the request,
//! `model_call_finished + tool_call_started` before the tool), and a crash loses only events
//! after the last commit: none of them has an effect that started. Observers (and the log) see each event at the
//! commit that makes it durable, in order, with the state after that commit.
//!
//! **A read-only call's intent may wait for the next commit.** A read-only tool has no effect to
//! protect (resume runs an unfinished read-only call again: invariant 2), so the commit that ends
//! with its `tool_call_started` is deferred, and the call runs at once. That commit is written
//! with the journal's next one if that comes within the read-only commit delay
//! ([`DEFAULT_READ_ONLY_COMMIT_DELAY`], [`crate::Extensions::read_only_commit_delay`]) — the
//! usual case: a quick read, then the next request's intent — or else on its own at the delay,
//! in the background, while the call goes on; the next commit then waits for it. What that
//! commit carries, the model's reply, is at risk for at most the delay longer than with a commit
//! of its own (a crash then costs that one model call again) — or, for a call that finishes
//! without ever waiting, for as long as its own computing takes; a turn whose call reads quickly
//! costs one commit instead of two. The delay's timer starts when the call first waits
//! (`journal/deferred.rs`). A zero delay writes it at once, overlapping the call. A
//! mutating call still starts only once its intent is durable. Observers see a deferred batch's
//! events at the commit that makes them durable, before any later event; the state they are
//! given with a batch written on its own may already hold the events applied since (not yet
//! durable).
//!
//! **It waits for nothing but the store.** What must be journaled before an event (the side
//! usage before the run's end, `ending.rs`) is the engine's to journal first.

mod deferred;
mod heartbeat;
mod log;

use std::sync::Arc;
use std::time::Duration;

use baton_core::{Event, EventRecord, RunId, RunState, ToolEffect};
use baton_store::{Lease, Store};
use tokio::time::Instant;

use crate::EngineError;
use crate::api::RunObserver;
use crate::checkpoint::{self, CHECKPOINT_EVERY};
pub(crate) use deferred::{Arming, run_armed};
use deferred::{Deferred, Reclaimed};
use heartbeat::Heartbeat;
use log::log_record;

/// How long a read-only call's intent may wait to be written with the next commit (see the
/// module's doc). A quick read and the next request's assembly take well under it on any
/// machine; it bounds how much longer a model's reply stays at risk than it would with a commit
/// of its own — against a model call of seconds, during which a crash loses the call anyway.
pub const DEFAULT_READ_ONLY_COMMIT_DELAY: Duration = Duration::from_millis(2);

const APPEND_ATTEMPTS: u32 = 5;

pub(crate) struct Journal {
    store: Arc<dyn Store>,
    lease: Lease,
    state: RunState,
    observer: Arc<dyn RunObserver>,
    heartbeat: Heartbeat,
    /// Applied, not yet durable: written with the next event that must be.
    pending: Vec<EventRecord>,
    /// When `pending` must be written at the latest: it holds a deferred batch taken back (a
    /// read-only call's intent and what came before it).
    pending_deadline: Option<Instant>,
    /// A commit that ends with a read-only call's intent, deferred: the next commit takes it
    /// back and writes it first, or waits for it if its deadline came first, so batches land in
    /// order.
    deferred: Option<Deferred>,
    /// How long a read-only call's intent may wait for the next commit.
    read_only_delay: Duration,
    /// The seq of the run's latest state checkpoint (0: none yet).
    checkpointed: u64,
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
            pending: Vec::new(),
            pending_deadline: None,
            deferred: None,
            read_only_delay: DEFAULT_READ_ONLY_COMMIT_DELAY,
            checkpointed: 0,
        }
    }

    /// How long a read-only call's intent may wait to be written with the next commit.
    pub(crate) fn with_read_only_delay(mut self, delay: Duration) -> Self {
        self.read_only_delay = delay;
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
    pub(crate) async fn record(&mut self, event: Event) -> Result<(), EngineError> {
        if let Some(lost) = self.heartbeat.lost() {
            return Err(EngineError::Store(lost));
        }
        let durability = Durability::of(&event);
        let record = apply_next(&mut self.state, &self.lease, event)?;
        self.pending.push(record);
        match durability {
            Durability::Now => self.commit().await,
            Durability::Deferred => self.commit_deferred().await,
            Durability::WithNext => Ok(()),
        }
    }

    /// Makes every applied event durable (one transaction), e.g. before something outside the
    /// journal records where the run is (a workspace archive).
    pub(crate) async fn commit(&mut self) -> Result<(), EngineError> {
        self.reclaim_deferred().await?;
        self.pending_deadline = None;
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

    /// Defers every applied event (see the module's doc: only for what a read-only call
    /// announces): written with the next commit, or on its own at the deadline.
    async fn commit_deferred(&mut self) -> Result<(), EngineError> {
        // One deferred batch at a time, each starting where the journal ends: an earlier one
        // joins this one, keeping its deadline.
        self.reclaim_deferred().await?;
        let deadline = deferred::deadline(self.read_only_delay, self.pending_deadline.take());
        let records = std::mem::take(&mut self.pending);
        self.deferred = Some(Deferred::hold(
            self.store.clone(),
            self.lease.clone(),
            records,
            deadline,
        ));
        Ok(())
    }

    /// What starts the deferred batch's timer, if there is one: the call it announced runs with
    /// it ([`run_armed`]).
    pub(crate) fn arming(&self) -> Option<Arming> {
        self.deferred.as_ref().map(Deferred::arming)
    }

    /// Takes the deferred batch back into `pending` (ahead of what was applied since) if it was
    /// not written yet; otherwise waits for its write and shows its events.
    async fn reclaim_deferred(&mut self) -> Result<(), EngineError> {
        let Some(deferred) = self.deferred.take() else {
            return Ok(());
        };
        match deferred.reclaim().await? {
            Reclaimed::Unwritten { records, deadline } => {
                let since = std::mem::replace(&mut self.pending, records);
                self.pending.extend(since);
                self.pending_deadline = Some(deadline);
            }
            Reclaimed::Durable(records) => self.observe(records),
        }
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
    /// It announces a read-only call, which has no effect to protect: its commit (with whatever
    /// waits before it) is deferred, written with the next one or on its own at the read-only
    /// commit delay; the call runs meanwhile.
    Deferred,
    /// A step between effects: written with the next commit.
    WithNext,
}

impl Durability {
    fn of(event: &Event) -> Durability {
        match event {
            Event::ToolCallStarted {
                effect: ToolEffect::ReadOnly,
                ..
            } => Durability::Deferred,
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
