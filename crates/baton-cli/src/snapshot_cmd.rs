//! `baton snapshots`, `baton diff` and `baton rollback`: the output of
//! [`baton::snapshots::RunSnapshots`] — a run's workspace snapshots, what changed since one, and
//! restoring one.

use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use baton::snapshots::{RunSnapshots, reason_name};
use baton_snapshot::{DiffFormat, RestoreReport, SnapshotId};

use crate::commands::workspace_dir;
use crate::store::{open_existing_store, resolve_run, summary_for};
use crate::{CliError, exit};

type CliResult = Result<u8, CliError>;

macro_rules! outln {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
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
    let run = RunSnapshots::load(opened.store.as_ref(), summary.id).await?;
    opened.store.close().await;
    let list = run.listed();
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
    let counts = run.files_changed().await?;
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
    let run = RunSnapshots::load(opened.store.as_ref(), summary.id).await?;
    opened.store.close().await;
    let format = if stat {
        DiffFormat::Stat
    } else {
        DiffFormat::Patch
    };
    let text = run.diff(from.as_deref(), to.as_deref(), format).await?;
    let _ = std::io::stdout().write_all(text.as_bytes());
    Ok(exit::FINISHED)
}

pub async fn rollback(workspace: &Path, store: Option<&str>, run: &str, to: &str) -> CliResult {
    let workspace = workspace_dir(workspace)?;
    let opened = open_existing_store(&workspace, store).await?;
    let id = resolve_run(&opened, run).await?;
    let run = RunSnapshots::load(opened.store.as_ref(), id).await?;
    let result = run.rollback(opened.store.as_ref(), &workspace, to).await;
    opened.store.close().await;
    let (snapshot, report) = result?;
    print_report(&run, &snapshot, &report);
    Ok(exit::FINISHED)
}

fn print_report(run: &RunSnapshots, snapshot: &SnapshotId, report: &RestoreReport) {
    let number = run
        .number_of(snapshot)
        .map(|n| format!(" (#{n})"))
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
