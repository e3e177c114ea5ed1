//! Which store a command uses (`--store` / `BATON_STORE`, else the workspace's SQLite file) and
//! how a command picks a run in it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::anyhow;
use baton_core::{Event, EventRecord, RunId, replay};
use baton_store::{Lease, RunSummary, Store, StoreError, StoreLocation, open_store};

use crate::{CliError, exit};

/// An open store and where it is; a shared store holds the runs of other workspaces too.
pub(crate) struct Opened {
    pub(crate) store: Arc<dyn Store>,
    location: StoreLocation,
    workspace: PathBuf,
}

impl Opened {
    /// Whether other workspaces and machines share this store (PostgreSQL).
    pub(crate) fn is_shared(&self) -> bool {
        self.location.is_shared()
    }

    /// Runs to choose from when the user names none: in a shared store, only this workspace's.
    pub(crate) async fn runs_here(&self) -> Result<Vec<RunSummary>, CliError> {
        let mut runs = self.store.list_runs().await.map_err(store_error)?;
        if self.location.is_shared() {
            runs.retain(|r| Path::new(&r.workspace) == self.workspace);
        }
        Ok(runs)
    }
}

fn store_location(workspace: &Path, store: Option<&str>) -> Result<StoreLocation, CliError> {
    let location = StoreLocation::choose(store, workspace).map_err(store_error)?;
    let state = baton_state::StateDir::for_workspace(workspace);
    if location == StoreLocation::Sqlite(state.journal()) && state.has_old_layout() {
        move_old_layout(&state)?;
    }
    Ok(location)
}

/// A workspace last used by a baton that kept its state in `.baton/`: moved once, and said so.
pub(crate) fn move_old_layout(state: &baton_state::StateDir) -> Result<(), CliError> {
    let migration = state.prepare()?;
    if let Some(from) = &migration.from {
        eprintln!(
            "baton: moved this workspace's state ({}) from {} to {}, out of the reach of the \
             agent's commands",
            migration.moved.join(", "),
            from.display(),
            state.root().display()
        );
    }
    if !migration.left.is_empty() {
        eprintln!(
            "baton: left {} in {}: {} has its own",
            migration.left.join(", "),
            state.inputs_dir().display(),
            state.root().display()
        );
    }
    Ok(())
}

/// Opens (creating if needed) the store a new run goes to.
pub(crate) async fn open_store_for_run(
    workspace: &Path,
    store: Option<&str>,
) -> Result<Opened, CliError> {
    let location = store_location(workspace, store)?;
    let store = open_store(&location).await.map_err(store_error)?;
    Ok(Opened {
        store,
        location,
        workspace: workspace.to_owned(),
    })
}

/// Opens the store for a command that only reads: no SQLite file yet is a usage error, not a
/// new file.
pub(crate) async fn open_existing_store(
    workspace: &Path,
    store: Option<&str>,
) -> Result<Opened, CliError> {
    let location = store_location(workspace, store)?;
    if let StoreLocation::Sqlite(path) = &location
        && !path.exists()
    {
        return Err(CliError::usage(anyhow!(
            "no baton runs in {} (no {}); start one with `baton run \"GOAL\"`",
            workspace.display(),
            path.display()
        )));
    }
    open_store_for_run(workspace, store).await
}

pub(crate) fn store_error(e: StoreError) -> CliError {
    let code = match e {
        StoreError::Locked { .. }
        | StoreError::Refused { .. }
        | StoreError::UnsupportedUrl { .. }
        | StoreError::NeedsPostgres { .. } => exit::USAGE,
        _ => exit::FAILED,
    };
    CliError {
        code,
        error: e.into(),
    }
}

/// The run whose id starts with `prefix`, among all runs of the store.
pub(crate) async fn resolve_run(opened: &Opened, prefix: &str) -> Result<RunId, CliError> {
    let runs = opened.store.list_runs().await.map_err(store_error)?;
    let matches: Vec<&RunSummary> = runs
        .iter()
        .filter(|r| r.id.as_str().starts_with(prefix))
        .collect();
    match matches.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => Err(CliError::usage(anyhow!(
            "no run with id {prefix}; `baton ls` lists the runs"
        ))),
        many => Err(CliError::usage(anyhow!(
            "{} runs start with {prefix}: {}; give more characters",
            many.len(),
            many.iter()
                .map(|r| r.id.short())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// A run that works on one task of another run (`--parallel`): never "the latest run" (its
/// parent is).
fn is_parallel_child(run: &RunSummary) -> bool {
    baton_state::is_worktree(Path::new(&run.workspace))
}

pub(crate) async fn latest_run(opened: &Opened) -> Result<RunSummary, CliError> {
    let runs = opened.runs_here().await?;
    runs.into_iter()
        .find(|r| !is_parallel_child(r))
        .ok_or_else(|| {
            CliError::usage(anyhow!(
                "there are no runs yet; start one with `baton run \"GOAL\"`"
            ))
        })
}

/// The newest run that got as far as journaling its start (a process killed between creating a
/// run and journaling its first event leaves an empty one behind).
pub(crate) async fn latest_resumable_run(opened: &Opened) -> Result<RunSummary, CliError> {
    opened
        .runs_here()
        .await?
        .into_iter()
        .find(|r| r.event_count > 0 && !is_parallel_child(r))
        .ok_or_else(|| {
            CliError::usage(anyhow!(
                "there is no run to resume; start one with `baton run \"GOAL\"`"
            ))
        })
}

pub(crate) async fn summary_for(
    opened: &Opened,
    run: Option<&str>,
) -> Result<RunSummary, CliError> {
    match run {
        Some(prefix) => {
            let id = resolve_run(opened, prefix).await?;
            opened
                .store
                .get_run(&id)
                .await
                .map_err(store_error)?
                .ok_or_else(|| CliError::usage(anyhow!("no run {id}")))
        }
        None => latest_run(opened).await,
    }
}

/// The run a read-only command is about (`run` prefix, or the latest) and its journal.
pub(crate) async fn run_journal(
    opened: &Opened,
    run: Option<&str>,
) -> Result<(RunSummary, Vec<EventRecord>), CliError> {
    let summary = summary_for(opened, run).await?;
    let events = opened
        .store
        .load_events(&summary.id)
        .await
        .map_err(store_error)?;
    Ok((summary, events))
}

/// Appends `event` to the leased run at its next sequence number, after checking it against
/// the replayed journal (so nothing the reducer would refuse is ever written). `None` when
/// the run has already finished or failed: its journal is closed.
pub(crate) async fn append_checked(
    store: &dyn Store,
    lease: &Lease,
    event: Event,
) -> Result<Option<EventRecord>, CliError> {
    let run_id = &lease.run_id;
    let events = store.load_events(run_id).await.map_err(store_error)?;
    let mut state = replay(&events)
        .map_err(|e| anyhow!("the journal of run {run_id} cannot be replayed: {e}"))?;
    if state.status.is_terminal() {
        return Ok(None);
    }
    let record = EventRecord {
        run_id: run_id.clone(),
        seq: state.next_seq,
        at: jiff::Timestamp::now(),
        event,
    };
    state
        .apply(&record)
        .map_err(|e| anyhow!("cannot journal {}: {e}", record.event.kind()))?;
    store
        .append(lease, std::slice::from_ref(&record))
        .await
        .map_err(store_error)?;
    Ok(Some(record))
}
