//! Background runs: a supervisor started in a session of its own with its output in
//! `logs/RUN.log` of the workspace's state directory, and stopping a run by sending SIGTERM to
//! whoever works on it (its supervisor, found by its [`PidFile`](super::PidFile), else a live
//! lease holder), which pauses it cleanly.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use baton_core::{RunId, RunStatus};
use baton_store::{Holder, RunSummary, Store};
use rustix::process::{Pid, Signal};

use super::{new_session, working_on};
use baton::Error;

/// How often a stop looks at the store.
pub const POLL: Duration = Duration::from_millis(200);
/// How long a stop waits for the run to pause.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a background start waits for its run to be journaled.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The output of a background run's supervisor.
pub fn log_path(workspace: &Path, run_id: &RunId) -> PathBuf {
    baton_state::StateDir::for_workspace(workspace)
        .logs()
        .join(format!("{run_id}.log"))
}

/// How a background start went.
#[derive(Debug, PartialEq, Eq)]
pub enum BackgroundStart {
    /// The run journaled something new (`run_started`, or a resume's `run_resumed`): it is at
    /// work, so a stop or an attach right after finds it.
    Started {
        /// The supervisor's pid.
        pid: u32,
    },
    /// Not seen at work within [`START_TIMEOUT`]; it may still start (its log says).
    Slow {
        /// The supervisor's pid.
        pid: u32,
    },
    /// It ended before it was seen at work (a usage error, say; its log says why).
    Ended {
        /// Its exit code.
        code: u8,
    },
}

async fn event_count(workspace: &Path, store: Option<&str>, run_id: &RunId) -> Option<u64> {
    let opened = baton::store::open_existing_store(workspace, store)
        .await
        .ok()?;
    let count = opened.store.get_run(run_id).await.ok().flatten();
    opened.store.close().await;
    count.map(|s| s.event_count)
}

/// Starts `command` (a supervisor of `run_id`) in a session of its own — closing the terminal
/// or a Ctrl-C there does not reach it — with its output appended to [`log_path`] and the store
/// given by environment, and waits until the run is at work or the process ended.
pub async fn start_in_background(
    mut command: std::process::Command,
    workspace: &Path,
    store: Option<&str>,
    run_id: &RunId,
) -> Result<BackgroundStart, Error> {
    let before = event_count(workspace, store, run_id).await.unwrap_or(0);
    let log = log_path(workspace, run_id);
    let cannot_open =
        |e: std::io::Error| Error::failed(format!("cannot open {}: {e}", log.display()));
    if let Some(dir) = log.parent() {
        baton_state::make_private_dir(dir)
            .map_err(|e| Error::failed(format!("cannot create {}: {e}", dir.display())))?;
    }
    baton::settings::keep_state_out_of_git(workspace);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(&log)
        .map_err(cannot_open)?;
    command
        .stdin(std::process::Stdio::null())
        .stdout(file.try_clone().map_err(cannot_open)?)
        .stderr(file);
    if let Some(store) = store {
        command.env("BATON_STORE", store);
    }
    new_session(&mut command);
    let mut child = command
        .spawn()
        .map_err(|e| Error::failed(format!("cannot start the background run: {e}")))?;
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let exited = child
            .try_wait()
            .map_err(|e| Error::failed(format!("waiting for the background run: {e}")))?;
        if let Some(status) = exited {
            let code = status
                .code()
                .and_then(|c| u8::try_from(c).ok())
                .unwrap_or(1);
            return Ok(BackgroundStart::Ended { code });
        }
        if event_count(workspace, store, run_id).await > Some(before) {
            return Ok(BackgroundStart::Started { pid: child.id() });
        }
        if Instant::now() > deadline {
            return Ok(BackgroundStart::Slow { pid: child.id() });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What asking a run to stop found.
#[derive(Debug)]
pub enum StopRequest {
    /// The run is not running (it has this status): nothing to stop.
    NotRunning(RunStatus),
    /// Running by its journal, but no process works on it: it was interrupted.
    NoProcess,
    /// SIGTERM went to this process; [`wait_stopped`] waits for the run to pause.
    Signalled(Holder),
}

/// Sends SIGTERM to whoever works on the run. A process on another machine is a usage error
/// (stop it there).
pub fn signal_stop(workspace: &Path, summary: &RunSummary) -> Result<StopRequest, Error> {
    if summary.status != RunStatus::Running {
        return Ok(StopRequest::NotRunning(summary.status));
    }
    let Some(target) = working_on(workspace, summary) else {
        return Ok(StopRequest::NoProcess);
    };
    let run_id = &summary.id;
    if target.host != Holder::this_process().host {
        return Err(Error::usage(format!(
            "run {run_id} is worked on by {}; stop it on that machine",
            target.describe()
        )));
    }
    let pid = i32::try_from(target.pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| Error::failed(format!("bad pid {}", target.pid)))?;
    rustix::process::kill_process(pid, Signal::TERM)
        .map_err(|e| Error::failed(format!("cannot signal {}: {e}", target.describe())))?;
    Ok(StopRequest::Signalled(target))
}

/// Waits until the run no longer runs and `target` is gone (up to [`STOP_TIMEOUT`]); the run's
/// status then.
pub async fn wait_stopped(
    store: &dyn Store,
    run_id: &RunId,
    target: &Holder,
) -> Result<RunStatus, Error> {
    let deadline = Instant::now() + STOP_TIMEOUT;
    loop {
        tokio::time::sleep(POLL).await;
        let now = store
            .get_run(run_id)
            .await?
            .ok_or_else(|| Error::failed(format!("run {run_id} disappeared")))?;
        if now.status != RunStatus::Running && target.is_known_dead() {
            return Ok(now.status);
        }
        if Instant::now() > deadline {
            return Err(Error::failed(format!(
                "run {run_id} did not stop within {} s; {} may be stuck (`kill -9 {}` ends it \
                 at once, and `baton resume` continues the run)",
                STOP_TIMEOUT.as_secs(),
                target.describe(),
                target.pid
            )));
        }
    }
}
