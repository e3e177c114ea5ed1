//! Durable journal and run store of baton.
//!
//! The [`Store`] trait is what the engine sees; [`SqliteStore`] is the embedded default under
//! `<workspace>/.baton/`, [`PostgresStore`] the shared one for many processes and machines.
//! Both keep the same schema and the same guarantees (leases, fenced appends, gap-free sequence
//! numbers); [`open_store`] picks one from a `--store` URL.

mod commit;
mod error;
mod postgres;
mod process;
mod rows;
mod select;
mod shared;
mod sqlite;
mod statements;
#[cfg(feature = "test-support")]
pub mod testing;

pub use error::StoreError;
pub use postgres::{PostgresOptions, PostgresStore};
pub use select::{StoreLocation, open_store};
pub use sqlite::{SqliteOptions, SqliteStore};

use async_trait::async_trait;
use baton_core::{EventRecord, RunId, RunStatus};

/// Who holds (or wants) a run: one process. Recorded with the lease so that `baton status` can
/// say who is working on a run and so that a holder that died on this machine can be detected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub host: String,
    pub pid: u32,
    /// Process start time (Linux: field 22 of /proc/PID/stat); guards against PID reuse.
    pub pid_start: Option<u64>,
    /// The name an operator gave this process (`baton worker --worker-id`): a label for
    /// `baton ls --all` / `baton status` only; liveness is judged by host, pid and start time.
    pub worker_id: Option<String>,
}

impl Holder {
    /// The current process.
    pub fn this_process() -> Holder {
        process::this_process_holder()
    }

    /// Whether this process is known to be gone (same host, no such pid or another process
    /// under it); a holder on another host is never known dead.
    pub fn is_known_dead(&self) -> bool {
        process::holder_is_dead(self, &process::local_hostname())
    }

    /// The same process, named `worker_id`.
    pub fn with_worker_id(self, worker_id: impl Into<String>) -> Holder {
        Holder {
            worker_id: Some(worker_id.into()),
            ..self
        }
    }

    pub fn describe(&self) -> String {
        match &self.worker_id {
            Some(id) => format!("{id} (pid {} on {})", self.pid, self.host),
            None => format!("pid {} on {}", self.pid, self.host),
        }
    }
}

/// Proof that this process holds a run. Every append is checked against `token` in the same
/// transaction (fencing): after a takeover the old holder's appends fail with `LeaseLost`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub run_id: RunId,
    pub token: String,
    pub expires_at: jiff::Timestamp,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRun {
    pub id: RunId,
    pub goal: String,
    pub workspace: String,
}

/// A row of the runs table: what listing needs without replaying the journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSummary {
    pub id: RunId,
    pub goal: String,
    pub workspace: String,
    pub status: RunStatus,
    pub created_at: jiff::Timestamp,
    pub updated_at: jiff::Timestamp,
    /// Number of journaled events.
    pub event_count: u64,
    /// The current lease holder, if the lease has not been released.
    pub holder: Option<HolderInfo>,
    /// Whether the run is in the worker queue (`baton submit`, or handed back by a worker).
    pub queued: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HolderInfo {
    pub holder: Holder,
    pub expires_at: jiff::Timestamp,
    /// False when the holder is known to be dead (same host, process gone) or the lease expired.
    pub alive: bool,
    /// When the lease was last taken or renewed (the store's clock: the server's for
    /// PostgreSQL); `None` for a lease written by a baton from before this was recorded.
    pub renewed_at: Option<jiff::Timestamp>,
}

/// A run's state after its first `seq` events, as the engine serialized it: what a resume can
/// start from instead of folding the whole journal. A cache the engine checks and may ignore —
/// never the truth, which stays the journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// Events folded into `state`: the journal's events `0..seq`.
    pub seq: u64,
    /// The layout of `state`, as the engine names it; a reader that does not know it ignores
    /// the checkpoint.
    pub format: String,
    pub state: String,
}

#[async_trait]
pub trait Store: Send + Sync {
    /// Creates a run and takes its lease.
    async fn create_run(&self, run: &NewRun, holder: &Holder) -> Result<Lease, StoreError>;

    /// Takes a run's lease. Fails with [`StoreError::Locked`] while another live holder has it;
    /// an expired lease, or one whose holder process is gone, is taken over.
    async fn acquire(&self, run_id: &RunId, holder: &Holder) -> Result<Lease, StoreError>;

    /// Extends the lease. Fails with [`StoreError::LeaseLost`] if another holder took it.
    async fn renew(&self, lease: &Lease) -> Result<Lease, StoreError>;

    /// Gives the lease up (no-op if it was lost).
    async fn release(&self, lease: &Lease) -> Result<(), StoreError>;

    /// Appends events durably: when this returns Ok, they survive a crash or power loss.
    /// The first record's `seq` must equal the number of events already stored (no gaps, no
    /// overwrites) and the lease must still be held — both checked in one transaction.
    async fn append(&self, lease: &Lease, records: &[EventRecord]) -> Result<(), StoreError>;

    /// Events of a run with `seq >= from_seq`, in order, at most `limit`.
    async fn read_events(
        &self,
        run_id: &RunId,
        from_seq: u64,
        limit: u64,
    ) -> Result<Vec<EventRecord>, StoreError>;

    /// The whole journal of a run.
    async fn load_events(&self, run_id: &RunId) -> Result<Vec<EventRecord>, StoreError> {
        self.read_events(run_id, 0, u64::MAX).await
    }

    /// Keeps `checkpoint` as the run's state checkpoint, replacing the previous one, if `lease`
    /// is still the run's lease (else it does nothing). A store without checkpoints ignores it:
    /// they only make a resume faster.
    async fn save_checkpoint(
        &self,
        lease: &Lease,
        checkpoint: &Checkpoint,
    ) -> Result<(), StoreError> {
        let _ = (lease, checkpoint);
        Ok(())
    }

    /// The run's latest state checkpoint, if the store keeps one.
    async fn load_checkpoint(&self, run_id: &RunId) -> Result<Option<Checkpoint>, StoreError> {
        let _ = run_id;
        Ok(None)
    }

    async fn get_run(&self, run_id: &RunId) -> Result<Option<RunSummary>, StoreError>;

    /// All runs, newest first.
    async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError>;

    /// Marks a run as wanting a worker (`true`: `baton submit`, or a run handed back) or not
    /// (`false`: it finished, failed or paused for a reason a worker cannot fix). Only the
    /// shared PostgreSQL store has a worker queue; SQLite answers [`StoreError::NeedsPostgres`].
    async fn set_queued(&self, run_id: &RunId, queued: bool) -> Result<(), StoreError> {
        let _ = (run_id, queued);
        Err(self.needs_postgres("the worker queue"))
    }

    /// Takes the lease of the oldest queued, unfinished run whose lease is free or expired, or
    /// returns `None` when there is none. Concurrent claimers never get the same run: rows
    /// another claimer has locked are skipped (`FOR UPDATE SKIP LOCKED`), and the lease is
    /// written in the same transaction. A holder that died is only detected by expiry here
    /// (unlike [`Store::acquire`]): a worker's runs may be claimed from any machine.
    async fn claim(&self, holder: &Holder) -> Result<Option<Lease>, StoreError> {
        let _ = holder;
        Err(self.needs_postgres("claiming runs (`baton worker`)"))
    }

    /// The error for operations only the shared store has.
    fn needs_postgres(&self, what: &str) -> StoreError {
        StoreError::NeedsPostgres {
            what: what.to_owned(),
            store: "(embedded)".to_owned(),
        }
    }

    /// Closes the store's connections. Dropping the store without closing is safe too:
    /// committed data is durable either way; closing lets SQLite checkpoint its WAL and tells a
    /// database server the connections are gone.
    async fn close(&self) {}
}
