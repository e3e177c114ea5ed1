//! Background runs: `--detach` (a supervisor in a session of its own, its output in
//! `logs/RUN.log`), `baton stop` (SIGTERM to whoever works on the run) — both
//! [`baton_app::supervisor`]'s — and `baton attach`, which follows a run's journal live.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use baton_app::supervisor::{
    BackgroundStart, START_TIMEOUT, StopRequest, log_path, signal_stop, start_in_background,
    wait_stopped, working_on,
};
use baton_core::{RunId, RunState, RunStatus};
use baton_store::Store;

use crate::commands::workspace_dir;
use crate::globals::{Globals, global_args};
use crate::output::{json_line, progress_line};
use crate::store::{open_existing_store, summary_for};
use crate::store_error;
use crate::{CliError, exit};

type CliResult = Result<u8, CliError>;

/// How often `attach` looks at the store.
const POLL: Duration = Duration::from_millis(200);
/// A running run with no live process for this long is reported as interrupted by `attach`
/// (short gaps are normal: between a supervisor's children, or while a `resume` starts).
const ORPHAN_GRACE: Duration = Duration::from_secs(3);

macro_rules! outln {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// Starts `baton GLOBALS ARGS` (a supervisor) in the background and returns once its run has
/// journaled something new — so that `attach` and `stop` right after find it at work — or it
/// ended early.
pub(crate) async fn start(globals: Globals<'_>, run_id: &RunId, args: Vec<String>) -> CliResult {
    let exe = std::env::current_exe()
        .map_err(|e| anyhow!("cannot find the baton executable to start the run: {e}"))?;
    let mut command = std::process::Command::new(exe);
    command.args(global_args(globals)).args(&args);
    let workspace = globals.workspace;
    let log = log_path(workspace, run_id);
    let pid = match start_in_background(command, workspace, globals.store, run_id).await? {
        BackgroundStart::Started { pid } => pid,
        BackgroundStart::Slow { pid } => {
            eprintln!(
                "warning: run {run_id} has not started after {} s; see {}",
                START_TIMEOUT.as_secs(),
                log.display()
            );
            pid
        }
        BackgroundStart::Ended { code } => {
            // It ended before we saw it start: its log says why.
            eprint!("{}", std::fs::read_to_string(&log).unwrap_or_default());
            return Ok(code);
        }
    };
    outln!("run {run_id} started in the background (pid {pid})");
    outln!("log: {}", log.display());
    outln!(
        "follow it with `baton attach {0}`, pause it with `baton stop {0}`",
        run_id.short()
    );
    Ok(exit::FINISHED)
}

/// The exit code a run's status stands for.
fn code_of(status: RunStatus) -> u8 {
    match status {
        RunStatus::Finished => exit::FINISHED,
        RunStatus::Failed => exit::FAILED,
        _ => exit::PAUSED,
    }
}

pub async fn attach(
    workspace: &Path,
    store: Option<&str>,
    run: Option<&str>,
    from_now: bool,
    json: bool,
) -> CliResult {
    let workspace = workspace_dir(workspace)?;
    let opened = open_existing_store(&workspace, store).await?;
    let store = opened.store.clone();
    let run_id = summary_for(&opened, run).await?.id;
    let mut state = RunState::default();
    if from_now {
        for record in store.load_events(&run_id).await.map_err(store_error)? {
            state.apply(&record).map_err(|e| anyhow!("{e}"))?;
        }
    }
    let mut orphaned_since: Option<Instant> = None;
    let code = loop {
        print_new_events(store.as_ref(), &run_id, &mut state, json).await?;
        if matches!(
            state.status,
            RunStatus::Paused | RunStatus::Finished | RunStatus::Failed
        ) {
            break code_of(state.status);
        }
        let summary = store
            .get_run(&run_id)
            .await
            .map_err(store_error)?
            .ok_or_else(|| anyhow!("run {run_id} disappeared"))?;
        if working_on(&workspace, &summary).is_some() {
            orphaned_since = None;
        } else if orphaned_since.get_or_insert_with(Instant::now).elapsed() > ORPHAN_GRACE {
            // Read once more: the process may have journaled its end just before leaving.
            print_new_events(store.as_ref(), &run_id, &mut state, json).await?;
            if state.status != RunStatus::Running {
                break code_of(state.status);
            }
            eprintln!(
                "run {run_id} is interrupted: no process is working on it; `baton resume {}` \
                 continues it",
                run_id.short()
            );
            break exit::PAUSED;
        }
        tokio::time::sleep(POLL).await;
    };
    store.close().await;
    if !json {
        let last = match state.status {
            RunStatus::Finished => "finished",
            RunStatus::Failed => "failed",
            RunStatus::Paused => "paused",
            _ => "interrupted",
        };
        outln!("run {run_id} {last}");
    }
    Ok(code)
}

async fn print_new_events(
    store: &dyn Store,
    run_id: &RunId,
    state: &mut RunState,
    json: bool,
) -> Result<(), CliError> {
    let records = store
        .read_events(run_id, state.next_seq, u64::MAX)
        .await
        .map_err(store_error)?;
    for record in records {
        state.apply(&record).map_err(|e| anyhow!("{e}"))?;
        if json {
            outln!("{}", json_line(&record));
        } else if let Some(line) = progress_line(&record.event, state) {
            outln!("{line}");
        }
    }
    Ok(())
}

pub async fn stop(workspace: &Path, store: Option<&str>, run: Option<&str>) -> CliResult {
    let workspace = workspace_dir(workspace)?;
    let opened = open_existing_store(&workspace, store).await?;
    let summary = summary_for(&opened, run).await?;
    let run_id = summary.id.clone();
    let target = match signal_stop(&workspace, &summary)? {
        StopRequest::Signalled(target) => target,
        StopRequest::NotRunning(status) => {
            outln!(
                "run {run_id} is not running ({}); nothing to stop",
                status.as_str()
            );
            opened.store.close().await;
            return Ok(exit::FINISHED);
        }
        StopRequest::NoProcess => {
            outln!(
                "run {run_id} is interrupted: no process is working on it; `baton resume {}` \
                 continues it",
                run_id.short()
            );
            opened.store.close().await;
            return Ok(exit::FINISHED);
        }
    };
    outln!("stopping run {run_id} ({})…", target.describe());
    let status = wait_stopped(opened.store.as_ref(), &run_id, &target).await?;
    let resume = match status {
        RunStatus::Paused => format!("; `baton resume {}` continues it", run_id.short()),
        _ => String::new(),
    };
    outln!("run {run_id} {}{resume}", status.as_str());
    opened.store.close().await;
    Ok(exit::FINISHED)
}
