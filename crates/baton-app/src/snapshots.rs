//! A run's workspace snapshots — commits in the shadow repository of the state directory,
//! journaled as `snapshot_taken` — as a program sees them: listed with their time, selected by
//! `#N` or id prefix, compared, and restored by a person's rollback, which is journaled through
//! the engine's door ([`baton_engine::record_external`]) like every other change of a run.

use std::path::Path;

use baton_core::{Event, EventRecord, RunId, RunState, SnapshotRecord, replay};
use baton_snapshot::{DiffFormat, RestoreReport, ShadowRepo, SnapshotError, SnapshotId};
use baton_store::{Holder, Lease, Store};

use baton::Error;

/// A run's journal, replayed, for its snapshots.
pub struct RunSnapshots {
    /// The run.
    pub id: RunId,
    events: Vec<EventRecord>,
    /// Its state (the journaled snapshots among it).
    pub state: RunState,
}

/// A snapshot error as the facade's: a selector or run that names nothing is the caller's to
/// change, the rest failed.
fn snapshot_error(e: SnapshotError) -> Error {
    match e {
        SnapshotError::InvalidSnapshotId(_)
        | SnapshotError::UnknownSnapshot(_)
        | SnapshotError::AmbiguousSnapshot { .. }
        | SnapshotError::NoSnapshots(_)
        | SnapshotError::NotInRun { .. } => Error::usage(e),
        _ => Error::failed(e),
    }
}

/// Git work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, SnapshotError> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::failed(format!("snapshot task failed: {e}")))?
        .map_err(snapshot_error)
}

impl RunSnapshots {
    /// Reads and replays `id`'s journal.
    pub async fn load(store: &dyn Store, id: RunId) -> Result<RunSnapshots, Error> {
        let events = store.load_events(&id).await?;
        let state = replay(&events).map_err(|e| {
            Error::failed(format!("the journal of run {id} cannot be replayed: {e}"))
        })?;
        Ok(RunSnapshots { id, events, state })
    }

    /// The workspace the run works in.
    pub fn workspace(&self) -> &Path {
        Path::new(&self.state.workspace)
    }

    /// The journaled snapshots with their time, oldest first.
    pub fn listed(&self) -> Vec<(&SnapshotRecord, jiff::Timestamp)> {
        self.state
            .snapshots
            .iter()
            .map(|s| {
                let at = self
                    .events
                    .iter()
                    .find(|e| e.seq == s.seq)
                    .map_or(jiff::Timestamp::UNIX_EPOCH, |e| e.at);
                (s, at)
            })
            .collect()
    }

    /// `#N` of `snapshot` (1-based, as listed), if it is a journaled one.
    pub fn number_of(&self, snapshot: &SnapshotId) -> Option<usize> {
        self.state
            .snapshots
            .iter()
            .position(|s| s.snapshot == snapshot.as_str())
            .map(|i| i + 1)
    }

    /// For each listed snapshot, the files changed since the one before (all files for the
    /// first); an error for a commit the shadow repository lost (a deleted state directory).
    pub async fn files_changed(&self) -> Result<Vec<Result<usize, SnapshotError>>, Error> {
        let root = self.workspace().to_path_buf();
        let ids = self
            .state
            .snapshots
            .iter()
            .map(|s| SnapshotId::parse(&s.snapshot))
            .collect::<Result<Vec<_>, _>>()
            .map_err(snapshot_error)?;
        blocking(move || {
            let repo = ShadowRepo::open(&root)?;
            let mut counts = Vec::new();
            for (i, id) in ids.iter().enumerate() {
                let previous = i.checked_sub(1).map(|p| &ids[p]);
                counts.push(repo.changed_paths(previous, id).map(|p| p.len()));
            }
            Ok(counts)
        })
        .await
    }

    /// What changed from `from` to `to` (selectors as [`Self::select`] takes them; the first
    /// snapshot and the workspace as it is when absent).
    pub async fn diff(
        &self,
        from: Option<&str>,
        to: Option<&str>,
        format: DiffFormat,
    ) -> Result<String, Error> {
        let root = self.workspace().to_path_buf();
        let repo = blocking(move || ShadowRepo::open(&root)).await?;
        let from = from.map(|s| self.select(&repo, s)).transpose()?;
        let to = to.map(|s| self.select(&repo, s)).transpose()?;
        let run_id = self.id.to_string();
        blocking(move || repo.diff(&run_id, from.as_ref(), to.as_ref(), format)).await
    }

    /// `#N` (1-based, as listed) or a prefix of a snapshot id: among the run's journaled
    /// snapshots first, then any commit of the run's chain.
    pub fn select(&self, repo: &ShadowRepo, selector: &str) -> Result<SnapshotId, Error> {
        let journaled = &self.state.snapshots;
        if let Some(n) = selector.strip_prefix('#') {
            let index: usize = n
                .parse()
                .map_err(|_| Error::usage(format!("{selector}: expected #N, a snapshot number")))?;
            let record = index
                .checked_sub(1)
                .and_then(|i| journaled.get(i))
                .ok_or_else(|| {
                    Error::usage(format!(
                        "run {} has {} snapshots; {selector} is not one (`baton snapshots {}` \
                         lists them)",
                        self.id,
                        journaled.len(),
                        self.id.short()
                    ))
                })?;
            return SnapshotId::parse(&record.snapshot).map_err(snapshot_error);
        }
        let lower = selector.to_ascii_lowercase();
        let mut matches: Vec<&str> = journaled
            .iter()
            .map(|s| s.snapshot.as_str())
            .filter(|id| id.starts_with(&lower))
            .collect();
        matches.sort_unstable();
        matches.dedup();
        match matches.as_slice() {
            [one] if selector.len() >= 4 => SnapshotId::parse(one).map_err(snapshot_error),
            _ => repo.resolve(selector).map_err(snapshot_error),
        }
    }

    /// A person's rollback of `workspace` to the snapshot `selector` names: refused while any
    /// process works on the run (its supervisor, even between two agent processes, or a lease
    /// holder); holding the lease keeps a `resume` out until the restore is done. Journaled as
    /// `rollback_started` before the restore and `rollback_finished` after it; a resumed run
    /// redoes a restore whose finish is missing and tells the model. A finished or failed run's
    /// journal is closed: its rollback is only done, not journaled.
    pub async fn rollback(
        &self,
        store: &dyn Store,
        workspace: &Path,
        selector: &str,
    ) -> Result<(SnapshotId, RestoreReport), Error> {
        if self.workspace() != workspace {
            return Err(Error::usage(format!(
                "run {} works in {}, not in {}; roll it back there (`baton --workspace {} \
                 rollback …`)",
                self.id,
                self.state.workspace,
                workspace.display(),
                self.state.workspace
            )));
        }
        if let Some(supervisor) = crate::supervisor::live_supervisor(workspace, &self.id) {
            return Err(Error::usage(format!(
                "run {} is being run by {}; `baton stop {}` pauses it, then roll back",
                self.id,
                supervisor.describe(),
                self.id.short()
            )));
        }
        let lease = store.acquire(&self.id, &Holder::this_process()).await?;
        let result = self.restore(store, &lease, workspace, selector).await;
        if let Err(e) = store.release(&lease).await {
            tracing::warn!("could not release the lease of run {}: {e}", self.id);
        }
        result
    }

    async fn restore(
        &self,
        store: &dyn Store,
        lease: &Lease,
        workspace: &Path,
        selector: &str,
    ) -> Result<(SnapshotId, RestoreReport), Error> {
        let root = workspace.to_path_buf();
        let repo = blocking(move || ShadowRepo::open(&root)).await?;
        let snapshot = self.select(&repo, selector)?;
        let record = |event| baton_engine::record_external(store, lease, event);
        record(Event::RollbackStarted {
            task: None,
            snapshot: snapshot.to_string(),
            reason: format!("`baton rollback --to {selector}`"),
        })
        .await?;
        let run_id = self.id.to_string();
        let target = snapshot.clone();
        let report = blocking(move || repo.restore(&run_id, &target)).await?;
        record(Event::RollbackFinished {
            task: None,
            snapshot: snapshot.to_string(),
        })
        .await?;
        Ok((snapshot, report))
    }
}
