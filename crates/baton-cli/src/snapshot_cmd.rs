//! `baton snapshots`, `baton diff` and `baton rollback`: the output of
//! [`baton_app::snapshots::RunSnapshots`] — a run's workspace snapshots, what changed since one, and
//! restoring one.

use std::io::Write;
use std::path::Path;

use baton_app::snapshots::RunSnapshots;
use baton_printer::snapshots::Listed;
use baton_snapshot::DiffFormat;

use crate::commands::workspace_dir;
use crate::store::{open_existing_store, resolve_run, summary_for};
use crate::{CliError, exit};

type CliResult = Result<u8, CliError>;

macro_rules! outln {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// The snapshots of the run `run` names (the latest without one), read with the store closed
/// again: what `snapshots` and `diff` show needs only the shadow repository after this.
async fn run_snapshots(
    workspace: &Path,
    store: Option<&str>,
    run: Option<&str>,
) -> Result<RunSnapshots, CliError> {
    let workspace = workspace_dir(workspace)?;
    let opened = open_existing_store(&workspace, store).await?;
    let summary = summary_for(&opened, run).await?;
    let run = RunSnapshots::load(opened.store.as_ref(), summary.id).await?;
    opened.store.close().await;
    Ok(run)
}

pub async fn snapshots(
    workspace: &Path,
    store: Option<&str>,
    run: Option<&str>,
    json: bool,
) -> CliResult {
    let run = run_snapshots(workspace, store, run).await?;
    let mut listed: Vec<Listed<'_>> = run
        .listed()
        .into_iter()
        .map(|(record, at)| Listed {
            record,
            at,
            files_changed: None,
        })
        .collect();
    if !listed.is_empty() {
        for (row, count) in listed.iter_mut().zip(run.files_changed().await?) {
            row.files_changed = count.ok();
        }
    }
    if json {
        crate::commands::print_json(&baton_printer::snapshots::json(&run.id, &listed))?;
    } else {
        outln!(
            "{}",
            baton_printer::snapshots::table(&run.id, &listed).trim_end()
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
    let run = run_snapshots(workspace, store, run).await?;
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
    let text = baton_printer::snapshots::restored(
        &run.id,
        snapshot.short(),
        run.number_of(&snapshot),
        &report,
    );
    outln!("{}", text.trim_end());
    Ok(exit::FINISHED)
}
