//! Background runs: `--detach` starts the supervisor in a session of its own with its output in
//! `logs/RUN.log` in the workspace's state directory; `baton attach` follows a run's journal
//! live; `baton stop` pauses a run cleanly by sending SIGTERM to its supervisor (found by its
//! pidfile, [`baton::supervisor::PidFile`]) or, for an unsupervised run, to the lease holder.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use baton::supervisor::{new_session, working_on};
use baton_core::{RunId, RunState, RunStatus};
use baton_store::{Holder, Store};
use rustix::process::{Pid, Signal};

use crate::commands::{keep_state_out_of_git, workspace_dir};
use crate::output::{json_line, progress_line};
use crate::store::{open_existing_store, summary_for};
use crate::store_error;
use crate::supervise::{Globals, global_args};
use crate::{CliError, exit};

type CliResult = Result<u8, CliError>;

/// How often `attach` and `stop` look at the store.
const POLL: Duration = Duration::from_millis(200);
/// How long `stop` waits for the run to pause.
const STOP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a detached start waits for its run to be journaled.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// A running run with no live process for this long is reported as interrupted by `attach`
/// (short gaps are normal: between a supervisor's children, or while a `resume` starts).
const ORPHAN_GRACE: Duration = Duration::from_secs(3);

macro_rules! outln {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

fn log_path(workspace: &Path, run_id: &RunId) -> PathBuf {
    baton_state::StateDir::for_workspace(workspace)
        .logs()
        .join(format!("{run_id}.log"))
}

async fn event_count(globals: Globals<'_>, run_id: &RunId) -> Option<u64> {
    let opened = open_existing_store(globals.workspace, globals.store)
        .await
        .ok()?;
    let count = opened
        .store
        .get_run(run_id)
        .await
        .ok()
        .flatten()
        .map(|s| s.event_count);
    opened.store.close().await;
    count
}

/// Starts `baton GLOBALS ARGS` (a supervisor) in the background and returns once its run has
/// journaled something new (`run_started`, or a resume's `run_resumed`) — so that `attach` and
/// `stop` right after find it at work — or it ended early.
pub(crate) async fn start(globals: Globals<'_>, run_id: &RunId, args: Vec<String>) -> CliResult {
    let workspace = globals.workspace;
    let before = event_count(globals, run_id).await.unwrap_or(0);
    let log = log_path(workspace, run_id);
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow!("cannot create {}: {e}", dir.display()))?;
    }
    keep_state_out_of_git(workspace);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(|e| anyhow!("cannot open {}: {e}", log.display()))?;
    let exe = std::env::current_exe()
        .map_err(|e| anyhow!("cannot find the baton executable to start the run: {e}"))?;
    let mut command = std::process::Command::new(exe);
    command
        .args(global_args(globals))
        .args(&args)
        .stdin(std::process::Stdio::null())
        .stdout(
            file.try_clone()
                .map_err(|e| anyhow!("cannot open {}: {e}", log.display()))?,
        )
        .stderr(file);
    if let Some(store) = globals.store {
        command.env("BATON_STORE", store);
    }
    new_session(&mut command);
    let mut child = command
        .spawn()
        .map_err(|e| anyhow!("cannot start the background run: {e}"))?;
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().map_err(|e| anyhow!("{e}"))? {
            // It ended before we saw it start: a usage error, say; its log says why.
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            eprint!("{text}");
            return Ok(status
                .code()
                .and_then(|c| u8::try_from(c).ok())
                .unwrap_or(exit::FAILED));
        }
        if event_count(globals, run_id).await > Some(before) {
            break;
        }
        if Instant::now() > deadline {
            eprintln!(
                "warning: run {run_id} has not started after {} s; see {}",
                START_TIMEOUT.as_secs(),
                log.display()
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    outln!(
        "run {run_id} started in the background (pid {})",
        child.id()
    );
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
    if summary.status != RunStatus::Running {
        outln!(
            "run {run_id} is not running ({}); nothing to stop",
            summary.status.as_str()
        );
        opened.store.close().await;
        return Ok(exit::FINISHED);
    }
    let Some(target) = working_on(&workspace, &summary) else {
        outln!(
            "run {run_id} is interrupted: no process is working on it; `baton resume {}` \
             continues it",
            run_id.short()
        );
        opened.store.close().await;
        return Ok(exit::FINISHED);
    };
    if target.host != Holder::this_process().host {
        return Err(CliError::usage(anyhow!(
            "run {run_id} is worked on by {}; stop it on that machine",
            target.describe()
        )));
    }
    let pid = i32::try_from(target.pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| anyhow!("bad pid {}", target.pid))?;
    rustix::process::kill_process(pid, Signal::TERM)
        .map_err(|e| anyhow!("cannot signal {}: {e}", target.describe()))?;
    outln!("stopping run {run_id} ({})…", target.describe());
    let deadline = Instant::now() + STOP_TIMEOUT;
    loop {
        tokio::time::sleep(POLL).await;
        let now = opened
            .store
            .get_run(&run_id)
            .await
            .map_err(store_error)?
            .ok_or_else(|| anyhow!("run {run_id} disappeared"))?;
        if now.status != RunStatus::Running && target.is_known_dead() {
            outln!(
                "run {run_id} {}{}",
                now.status.as_str(),
                if now.status == RunStatus::Paused {
                    format!("; `baton resume {}` continues it", run_id.short())
                } else {
                    String::new()
                }
            );
            opened.store.close().await;
            return Ok(exit::FINISHED);
        }
        if Instant::now() > deadline {
            return Err(anyhow!(
                "run {run_id} did not stop within {} s; {} may be stuck (`kill -9 {}` ends it \
                 at once, and `baton resume` continues the run)",
                STOP_TIMEOUT.as_secs(),
                target.describe(),
                target.pid
            )
            .into());
        }
    }
}
