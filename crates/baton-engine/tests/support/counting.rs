//! A real store that records every append the engine makes — one append is one durable commit —
//! with its event kinds and how long the store took: how the group-commit test and the overhead
//! benchmark count commits. It also records where reads of the journal start and which state
//! checkpoints are saved. (Nothing else is done in the append path: sizes are measured
//! afterwards, from the journal, by [`journal_bytes`].) A test can also hold back the commit
//! that announces a given tool's call until that call says it runs ([`CountingStore::hold`]):
//! how it sees whether a call runs while its intent is being written.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use baton_core::{Event, EventRecord, RunId};
use baton_store::{Checkpoint, Holder, Lease, NewRun, RunSummary, Store, StoreError};

/// One append.
#[derive(Clone, Debug)]
pub struct Append {
    pub kinds: Vec<&'static str>,
    /// How long the store took (serializing, the transaction, the fsync).
    pub micros: u64,
}

pub struct CountingStore {
    inner: Arc<dyn Store>,
    appends: Mutex<Vec<Append>>,
    /// The `from_seq` of every read of events: where a resume started folding.
    reads: Mutex<Vec<u64>>,
    /// The seq of every state checkpoint saved.
    checkpoints: Mutex<Vec<u64>>,
    /// Per tool whose intents are held: how many were, and how many of its calls ran.
    holds: Mutex<HashMap<String, Hold>>,
    /// Every held commit: the tool, and whether its call ran while the commit was held.
    held: Mutex<Vec<(String, bool)>>,
    /// A tool whose intents' commits fail as if the lease had been lost.
    refused: Mutex<Option<String>>,
}

#[allow(dead_code)] // Each target uses a different part.
impl CountingStore {
    pub fn new(inner: Arc<dyn Store>) -> CountingStore {
        CountingStore {
            inner,
            appends: Mutex::default(),
            reads: Mutex::default(),
            checkpoints: Mutex::default(),
            holds: Mutex::default(),
            held: Mutex::default(),
            refused: Mutex::default(),
        }
    }

    /// Makes every commit that ends with a `tool_call_started` of `tool` fail (lease lost).
    pub fn refuse_intents_of(&self, tool: &str) {
        *self.refused.lock().unwrap() = Some(tool.to_string());
    }

    /// Holds every commit that ends with a `tool_call_started` of `tool` until that call says it
    /// runs ([`CountingStore::call_runs`]), or for `at_most`: the k-th such commit waits for the
    /// k-th call.
    pub fn hold(&self, tool: &str, at_most: Duration) {
        let hold = Hold {
            runs: tokio::sync::watch::channel(0).0,
            intents: 0,
            at_most,
        };
        self.holds.lock().unwrap().insert(tool.to_string(), hold);
    }

    /// Said by a call of `tool` when it runs.
    pub fn call_runs(&self, tool: &str) {
        if let Some(hold) = self.holds.lock().unwrap().get(tool) {
            hold.runs.send_modify(|n| *n += 1);
        }
    }

    /// Every held commit, in order: its tool, and whether its call ran while it was held.
    pub fn held(&self) -> Vec<(String, bool)> {
        self.held.lock().unwrap().clone()
    }

    async fn wait_if_held(&self, records: &[EventRecord]) {
        let Some(Event::ToolCallStarted { name, .. }) = records.last().map(|r| &r.event) else {
            return;
        };
        let (mut runs, k, at_most) = {
            let mut holds = self.holds.lock().unwrap();
            let Some(hold) = holds.get_mut(name) else {
                return;
            };
            hold.intents += 1;
            (hold.runs.subscribe(), hold.intents, hold.at_most)
        };
        let ran = tokio::time::timeout(at_most, runs.wait_for(|&n| n >= k))
            .await
            .is_ok_and(|r| r.is_ok());
        self.held.lock().unwrap().push((name.clone(), ran));
    }

    pub fn reads(&self) -> Vec<u64> {
        self.reads.lock().unwrap().clone()
    }

    pub fn checkpoints(&self) -> Vec<u64> {
        self.checkpoints.lock().unwrap().clone()
    }

    pub fn appends(&self) -> Vec<Append> {
        self.appends.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.appends.lock().unwrap().len()
    }

    /// The kind of the last event committed so far.
    pub fn last_kind(&self) -> Option<&'static str> {
        self.appends
            .lock()
            .unwrap()
            .last()
            .and_then(|a| a.kinds.last().copied())
    }
}

/// The commits of one tool's intents that are held, and its calls that ran.
struct Hold {
    runs: tokio::sync::watch::Sender<usize>,
    intents: usize,
    at_most: Duration,
}

/// A journal's size: its events' JSON, and the turn content they carry (see [`content_bytes`]).
#[allow(dead_code)]
pub fn journal_bytes(events: &[EventRecord]) -> (u64, u64) {
    let json = events
        .iter()
        .map(|r| serde_json::to_string(&r.event).map_or(0, |j| j.len() as u64))
        .sum();
    let content = events.iter().map(|r| content_bytes(&r.event)).sum();
    (json, content)
}

/// The turn's content an event carries for the first time: the model's tool-call arguments and
/// the tool's output (what a ReAct loop's two messages a turn hold).
fn content_bytes(event: &Event) -> u64 {
    match event {
        Event::ModelCallFinished { message, .. } => message
            .tool_calls
            .iter()
            .map(|c| c.arguments.len() as u64)
            .sum(),
        Event::ToolCallFinished { result, .. } => result.content.len() as u64,
        _ => 0,
    }
}

#[async_trait]
impl Store for CountingStore {
    async fn create_run(&self, run: &NewRun, holder: &Holder) -> Result<Lease, StoreError> {
        self.inner.create_run(run, holder).await
    }
    async fn acquire(&self, run_id: &RunId, holder: &Holder) -> Result<Lease, StoreError> {
        self.inner.acquire(run_id, holder).await
    }
    async fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
        self.inner.renew(lease).await
    }
    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.inner.release(lease).await
    }
    async fn append(&self, lease: &Lease, records: &[EventRecord]) -> Result<(), StoreError> {
        self.wait_if_held(records).await;
        if let Some(Event::ToolCallStarted { name, .. }) = records.last().map(|r| &r.event)
            && self.refused.lock().unwrap().as_ref() == Some(name)
        {
            return Err(StoreError::LeaseLost {
                run_id: lease.run_id.clone(),
            });
        }
        let began = Instant::now();
        self.inner.append(lease, records).await?;
        let micros = began.elapsed().as_micros() as u64;
        let append = Append {
            kinds: records.iter().map(|r| r.event.kind()).collect(),
            micros,
        };
        self.appends.lock().unwrap().push(append);
        Ok(())
    }
    async fn read_events(
        &self,
        run_id: &RunId,
        from_seq: u64,
        limit: u64,
    ) -> Result<Vec<EventRecord>, StoreError> {
        self.reads.lock().unwrap().push(from_seq);
        self.inner.read_events(run_id, from_seq, limit).await
    }
    async fn save_checkpoint(
        &self,
        lease: &Lease,
        checkpoint: &Checkpoint,
    ) -> Result<(), StoreError> {
        self.inner.save_checkpoint(lease, checkpoint).await?;
        self.checkpoints.lock().unwrap().push(checkpoint.seq);
        Ok(())
    }
    async fn load_checkpoint(&self, run_id: &RunId) -> Result<Option<Checkpoint>, StoreError> {
        self.inner.load_checkpoint(run_id).await
    }
    async fn get_run(&self, run_id: &RunId) -> Result<Option<RunSummary>, StoreError> {
        self.inner.get_run(run_id).await
    }
    async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        self.inner.list_runs().await
    }
}
