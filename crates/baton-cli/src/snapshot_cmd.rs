//! `baton snapshots`, `baton diff` and `baton rollback`: a run's workspace snapshots (commits in
//! the shadow repository in the state directory, journaled as `snapshot_taken`), what changed
//! since one, and restoring one.

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use baton_core::{Event, EventRecord, RunId, RunState, SnapshotRecord, replay};
use baton_snapshot::{DiffFormat, RestoreReport, ShadowRepo, SnapshotError, SnapshotId};
use baton_store::{Holder, Lease, Store};

use crate::commands::workspace_dir;
use crate::store::{open_existing_store, resolve_run, summary_for};
use crate::store_error;
use crate::{CliError, exit};

type CliResult = Result<u8, CliError>;

macro_rules! outln {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// A run's journal, replayed.
struct Run {
    id: RunId,
    events: Vec<EventRecord>,
    state: RunState,
}

impl Run {
    fn workspace(&self) -> &Path {
        Path::new(&self.state.workspace)
    }

    /// The journaled snapshots with their time, oldest first.
    fn snapshots(&self) -> Vec<(&SnapshotRecord, jiff::Timestamp)> {
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
}

async fn load(store: &dyn Store, id: RunId) -> Result<Run, CliError> {
    let events = store.load_events(&id).await.map_err(store_error)?;
    let state =
        replay(&events).map_err(|e| anyhow!("the journal of run {id} cannot be replayed: {e}"))?;
    Ok(Run { id, events, state })
}

fn snapshot_error(e: SnapshotError) -> CliError {
    let code = match e {
        SnapshotError::InvalidSnapshotId(_)
        | SnapshotError::UnknownSnapshot(_)
        | SnapshotError::AmbiguousSnapshot { .. }
        | SnapshotError::NoSnapshots(_)
        | SnapshotError::NotInRun { .. } => exit::USAGE,
        _ => exit::FAILED,
    };
    CliError {
        code,
        error: e.into(),
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, SnapshotError> + Send + 'static,
) -> Result<T, CliError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| anyhow!("snapshot task failed: {e}"))?
        .map_err(snapshot_error)
}

/// `#N` (1-based, as `baton snapshots` numbers them) or a prefix of a snapshot id: among the
/// run's journaled snapshots first, then any commit of the run's chain.
fn select(run: &Run, repo: &ShadowRepo, selector: &str) -> Result<SnapshotId, CliError> {
    let journaled = &run.state.snapshots;
    if let Some(n) = selector.strip_prefix('#') {
        let index: usize = n
            .parse()
            .map_err(|_| CliError::usage(anyhow!("{selector}: expected #N, a snapshot number")))?;
        let record = index
            .checked_sub(1)
            .and_then(|i| journaled.get(i))
            .ok_or_else(|| {
                CliError::usage(anyhow!(
                    "run {} has {} snapshots; {selector} is not one (`baton snapshots {}` lists them)",
                    run.id,
                    journaled.len(),
                    run.id.short()
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

pub async fn snapshots(
    workspace: &Path,
    store: Option<&str>,
    run: Option<&str>,
    json: bool,
) -> CliResult {
    let workspace = workspace_dir(workspace)?;
    let opened = open_existing_store(&workspace, store).await?;
    let summary = summary_for(&opened, run).await?;
    let run = load(opened.store.as_ref(), summary.id).await?;
    opened.store.close().await;
    let list = run.snapshots();
    if list.is_empty() && json {
        crate::commands::print_json(
            &serde_json::json!({ "run": run.id.to_string(), "snapshots": [] }),
        )?;
        return Ok(exit::FINISHED);
    }
    if list.is_empty() {
        outln!("run {} has no snapshots", run.id);
        return Ok(exit::FINISHED);
    }
    let root = run.workspace().to_path_buf();
    let ids = list
        .iter()
        .map(|(s, _)| SnapshotId::parse(&s.snapshot))
        .collect::<Result<Vec<_>, _>>()
        .map_err(snapshot_error)?;
    // Files changed since the previous journaled snapshot (all files for the first).
    let counts = blocking(move || {
        let repo = ShadowRepo::open(&root)?;
        let mut counts = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            let previous = i.checked_sub(1).map(|p| &ids[p]);
            counts.push(repo.changed_paths(previous, id).map(|p| p.len()));
        }
        Ok(counts)
    })
    .await?;
    if json {
        let rows: Vec<serde_json::Value> = list
            .iter()
            .zip(counts)
            .enumerate()
            .map(|(i, ((record, at), count))| {
                serde_json::json!({
                    "number": i + 1,
                    "snapshot": record.snapshot,
                    "reason": reason_name(record.reason),
                    "task": record.task,
                    "at": at.to_string(),
                    "files_changed": count.ok(),
                })
            })
            .collect();
        crate::commands::print_json(
            &serde_json::json!({ "run": run.id.to_string(), "snapshots": rows }),
        )?;
        return Ok(exit::FINISHED);
    }
    outln!("run {}", run.id);
    outln!(
        "{:>4}  {:<12}  {:<13}  {:<12}  {:<19}  {:>5}",
        "#",
        "SNAPSHOT",
        "REASON",
        "TASK",
        "TIME (UTC)",
        "FILES"
    );
    for (i, ((record, at), count)) in list.iter().zip(counts).enumerate() {
        outln!(
            "{:>4}  {:<12}  {:<13}  {:<12}  {:<19}  {:>5}",
            format!("#{}", i + 1),
            record.snapshot.get(..12).unwrap_or(&record.snapshot),
            reason_name(record.reason),
            record.task.as_deref().unwrap_or("-"),
            at.strftime("%Y-%m-%d %H:%M:%S"),
            // A commit the shadow repository lost (a deleted state directory) is shown, not hidden.
            count.map_or_else(|_| "?".to_string(), |n| n.to_string())
        );
    }
    Ok(exit::FINISHED)
}

fn reason_name(reason: baton_core::task::SnapshotReason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{reason:?}"))
}

pub async fn diff(
    workspace: &Path,
    store: Option<&str>,
    run: Option<&str>,
    from: Option<String>,
    to: Option<String>,
    stat: bool,
) -> CliResult {
    let workspace = workspace_dir(workspace)?;
    let opened = open_existing_store(&workspace, store).await?;
    let summary = summary_for(&opened, run).await?;
    let run = load(opened.store.as_ref(), summary.id).await?;
    opened.store.close().await;
    let root = run.workspace().to_path_buf();
    let repo = blocking(move || ShadowRepo::open(&root)).await?;
    let from = from.map(|s| select(&run, &repo, &s)).transpose()?;
    let to = to.map(|s| select(&run, &repo, &s)).transpose()?;
    let format = if stat {
        DiffFormat::Stat
    } else {
        DiffFormat::Patch
    };
    let run_id = run.id.to_string();
    let text = blocking(move || repo.diff(&run_id, from.as_ref(), to.as_ref(), format)).await?;
    let _ = std::io::stdout().write_all(text.as_bytes());
    Ok(exit::FINISHED)
}

pub async fn rollback(workspace: &Path, store: Option<&str>, run: &str, to: &str) -> CliResult {
    let workspace = workspace_dir(workspace)?;
    let opened = open_existing_store(&workspace, store).await?;
    let id = resolve_run(&opened, run).await?;
    let run = load(opened.store.as_ref(), id).await?;
    if run.workspace() != workspace {
        return Err(CliError::usage(anyhow!(
            "run {} works in {}, not in {}; roll it back there (`baton --workspace {} rollback …`)",
            run.id,
            run.state.workspace,
            workspace.display(),
            run.state.workspace
        )));
    }
    // Nobody may work on the run while its workspace is restored: not its supervisor (even
    // between two agent processes) and not a lease holder; holding the lease keeps a `resume`
    // out until the restore is done.
    if let Some(supervisor) = baton::supervisor::live_supervisor(&workspace, &run.id) {
        return Err(CliError::usage(anyhow!(
            "run {} is being run by {}; `baton stop {}` pauses it, then roll back",
            run.id,
            supervisor.describe(),
            run.id.short()
        )));
    }
    let lease = opened
        .store
        .acquire(&run.id, &Holder::this_process())
        .await
        .map_err(store_error)?;
    let result = restore(opened.store.as_ref(), &lease, &run, &workspace, to).await;
    if let Err(e) = opened.store.release(&lease).await {
        tracing::warn!("could not release the lease of run {}: {e}", run.id);
    }
    opened.store.close().await;
    let (snapshot, report) = result?;
    print_report(&run, &snapshot, &report);
    Ok(exit::FINISHED)
}

async fn restore(
    store: &dyn Store,
    lease: &Lease,
    run: &Run,
    workspace: &Path,
    selector: &str,
) -> Result<(SnapshotId, RestoreReport), CliError> {
    let root = workspace.to_path_buf();
    let repo = blocking(move || ShadowRepo::open(&root)).await?;
    let snapshot = select(run, &repo, selector)?;
    let journal = RollbackJournal { store, lease };
    journal
        .started(&snapshot, &format!("`baton rollback --to {selector}`"))
        .await?;
    let run_id = run.id.to_string();
    let target = snapshot.clone();
    let report = blocking(move || repo.restore(&run_id, &target)).await?;
    journal.finished(&snapshot).await?;
    Ok((snapshot, report))
}

/// Where a person's rollback is journaled: `rollback_started` before the restore,
/// `rollback_finished` after it (`task` absent), appended under `lease` at the run's next
/// sequence number. A resumed run redoes a restore whose finish is missing and tells the model.
/// A finished or failed run's journal is closed: its rollback is only done, not journaled.
struct RollbackJournal<'a> {
    store: &'a dyn Store,
    lease: &'a Lease,
}

impl RollbackJournal<'_> {
    async fn started(&self, snapshot: &SnapshotId, reason: &str) -> Result<(), CliError> {
        self.append(Event::RollbackStarted {
            task: None,
            snapshot: snapshot.to_string(),
            reason: reason.to_string(),
        })
        .await
    }

    async fn finished(&self, snapshot: &SnapshotId) -> Result<(), CliError> {
        self.append(Event::RollbackFinished {
            task: None,
            snapshot: snapshot.to_string(),
        })
        .await
    }

    async fn append(&self, event: Event) -> Result<(), CliError> {
        baton_engine::record_external(self.store, self.lease, event)
            .await
            .map_err(crate::commands::engine_error)?;
        Ok(())
    }
}

fn print_report(run: &Run, snapshot: &SnapshotId, report: &RestoreReport) {
    let number = run
        .state
        .snapshots
        .iter()
        .position(|s| s.snapshot == snapshot.as_str())
        .map(|i| format!(" (#{})", i + 1))
        .unwrap_or_default();
    if report.is_empty() {
        outln!(
            "the workspace already is snapshot {}{number} of run {}; nothing changed",
            snapshot.short(),
            run.id
        );
        return;
    }
    outln!(
        "restored the workspace to snapshot {}{number} of run {}: {} rewritten, {} recreated, {} removed",
        snapshot.short(),
        run.id,
        report.rewritten.len(),
        report.recreated.len(),
        report.removed.len()
    );
    let show = |mark: &str, paths: &[PathBuf]| {
        for path in paths {
            outln!(
                "  {mark} {}",
                String::from_utf8_lossy(path.as_os_str().as_bytes())
            );
        }
    };
    show("M", &report.rewritten);
    show("+", &report.recreated);
    show("-", &report.removed);
}
