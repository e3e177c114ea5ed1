//! Which store a command uses (`--store` / `BATON_STORE`, else the workspace's SQLite file) and
//! how a command picks a run in it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_core::{EventRecord, RunId};
use baton_store::{RunSummary, Store, StoreLocation, open_store};

use crate::Error;

/// An open store and where it is; a shared store holds the runs of other workspaces too.
pub struct Opened {
    /// The store itself.
    pub store: Arc<dyn Store>,
    location: StoreLocation,
    workspace: PathBuf,
}

impl Opened {
    /// Whether other workspaces and machines share this store (PostgreSQL).
    pub fn is_shared(&self) -> bool {
        self.location.is_shared()
    }

    /// The PostgreSQL URL, when the store is one (the default shared embedding cache).
    pub fn postgres_url(&self) -> Option<&str> {
        match &self.location {
            StoreLocation::Postgres(url) => Some(url),
            StoreLocation::Sqlite(_) => None,
        }
    }

    /// Runs to choose from when the user names none: in a shared store, only this workspace's.
    pub async fn runs_here(&self) -> Result<Vec<RunSummary>, Error> {
        let mut runs = self.store.list_runs().await?;
        if self.location.is_shared() {
            runs.retain(|r| Path::new(&r.workspace) == self.workspace);
        }
        Ok(runs)
    }
}

fn store_location(workspace: &Path, store: Option<&str>) -> Result<StoreLocation, Error> {
    let location = StoreLocation::choose(store, workspace)?;
    let state = baton_state::StateDir::for_workspace(workspace);
    // Prepared every time (cheap when ready): it makes the directory private (0700), and an
    // earlier version's readable one private too, before the store is created in it.
    if location == StoreLocation::Sqlite(state.journal()) {
        move_old_layout(&state)?;
    }
    Ok(location)
}

/// A workspace last used by a baton that kept its state in `.baton/`: moved once, and said so.
pub fn move_old_layout(state: &baton_state::StateDir) -> Result<(), Error> {
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
    if !migration.refused.is_empty() {
        eprintln!(
            "baton: did not move {} from {}: not plain files and directories of yours (a \
             symlink there could point anywhere); remove them if you do not know them",
            migration.refused.join(", "),
            state.inputs_dir().display()
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
pub async fn open_store_for_run(workspace: &Path, store: Option<&str>) -> Result<Opened, Error> {
    let location = store_location(workspace, store)?;
    let store = open_store(&location).await?;
    Ok(Opened {
        store,
        location,
        workspace: workspace.to_owned(),
    })
}

/// Opens the store for a command that only reads: no SQLite file yet is a usage error, not a
/// new file.
pub async fn open_existing_store(workspace: &Path, store: Option<&str>) -> Result<Opened, Error> {
    let location = store_location(workspace, store)?;
    if let StoreLocation::Sqlite(path) = &location
        && !path.exists()
    {
        return Err(Error::usage(format!(
            "no baton runs in {} (no {}); start one with `baton run \"GOAL\"`",
            workspace.display(),
            path.display()
        )));
    }
    open_store_for_run(workspace, store).await
}

/// The run whose id starts with `prefix`, among all runs of the store.
pub async fn resolve_run(opened: &Opened, prefix: &str) -> Result<RunId, Error> {
    let runs = opened.store.list_runs().await?;
    let matches: Vec<&RunSummary> = runs
        .iter()
        .filter(|r| r.id.as_str().starts_with(prefix))
        .collect();
    match matches.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => Err(Error::usage(format!(
            "no run with id {prefix}; `baton ls` lists the runs"
        ))),
        many => Err(Error::usage(format!(
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

/// The newest run of this workspace (never a parallel task's child run).
pub async fn latest_run(opened: &Opened) -> Result<RunSummary, Error> {
    let runs = opened.runs_here().await?;
    runs.into_iter()
        .find(|r| !is_parallel_child(r))
        .ok_or_else(|| Error::usage("there are no runs yet; start one with `baton run \"GOAL\"`"))
}

/// The newest run that got as far as journaling its start (a process killed between creating a
/// run and journaling its first event leaves an empty one behind).
pub async fn latest_resumable_run(opened: &Opened) -> Result<RunSummary, Error> {
    opened
        .runs_here()
        .await?
        .into_iter()
        .find(|r| r.event_count > 0 && !is_parallel_child(r))
        .ok_or_else(|| {
            Error::usage("there is no run to resume; start one with `baton run \"GOAL\"`")
        })
}

/// The run `run` names by id prefix, or the latest.
pub async fn summary_for(opened: &Opened, run: Option<&str>) -> Result<RunSummary, Error> {
    match run {
        Some(prefix) => {
            let id = resolve_run(opened, prefix).await?;
            opened
                .store
                .get_run(&id)
                .await?
                .ok_or_else(|| Error::usage(format!("no run {id}")))
        }
        None => latest_run(opened).await,
    }
}

/// The run a read-only command is about (`run` prefix, or the latest) and its journal.
pub async fn run_journal(
    opened: &Opened,
    run: Option<&str>,
) -> Result<(RunSummary, Vec<EventRecord>), Error> {
    let summary = summary_for(opened, run).await?;
    let events = opened.store.load_events(&summary.id).await?;
    Ok((summary, events))
}
