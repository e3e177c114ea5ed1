//! Supervised runs: the agent works in a child process, and the supervisor restarts it — with
//! backoff, up to a limit — when it dies of anything other than a verdict: a signal (SIGKILL, an
//! OOM kill, SIGSEGV), a panic, an unexpected exit code. The next child resumes by replay; each
//! restart is journaled as a `supervisor_restarted` event through the engine's door
//! ([`baton_engine::record_external`]). What a child is (which program, which arguments) is the
//! caller's [`ChildCommand`]; what is shown is its [`SupervisionReport`].
//!
//! ```no_run
//! # use baton_app::supervisor::*;
//! # async fn demo(child: Box<dyn ChildCommand>, report: Box<dyn SupervisionReport>) -> baton::Result<()> {
//! let supervisor = Supervisor {
//!     workspace: "/path/to/repo".into(),
//!     store: None,
//!     run_id: baton::RunId::new(),
//!     role: ChildRole::NewRun,
//!     max_restarts: 5,
//!     child,
//!     report,
//! };
//! let (run_id, ending) = supervisor.supervise().await?;
//! println!("{run_id}: {ending:?}");
//! # Ok(())
//! # }
//! ```

mod background;
mod pidfile;
mod process;

use std::path::PathBuf;
use std::time::Duration;

use baton_core::{Event, EventRecord, PauseReason, RunId, RunStatus};
use baton_store::{Holder, RunSummary};
use rustix::process::{Pid, Signal};

use baton::Error;
use process::{Signals, die_with_parent};

pub use background::{
    BackgroundStart, START_TIMEOUT, STOP_TIMEOUT, StopRequest, log_path, signal_stop,
    start_in_background, wait_stopped,
};
pub use pidfile::{PidFile, live_supervisor, working_on};
pub use process::new_session;

/// Set in a supervised child's environment (the supervisor's pid).
pub const SUPERVISED_ENV: &str = "BATON_SUPERVISED_BY";
/// The restart limit when none is configured.
pub const DEFAULT_MAX_RESTARTS: u32 = 5;

/// The first restart waits this long; each restart without progress doubles it.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// What the next child does with the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildRole {
    /// Create the run under the supervisor's id and start it (it has journaled nothing yet).
    NewRun,
    /// Resume the run by replay.
    Resume,
}

/// How to start one child: the program and its arguments. The supervisor adds the rest — its
/// pid in [`SUPERVISED_ENV`], the store in `BATON_STORE`, no stdin, a process group of its own,
/// death with the supervisor.
pub trait ChildCommand: Send + Sync {
    /// The command of a child that works on `run_id` as `role` says.
    fn command(&self, run_id: &RunId, role: ChildRole) -> Result<tokio::process::Command, Error>;
}

/// Where the supervisor's own events go (a child's output is the supervisor's stdout and
/// stderr, so a `--json` stream stays one JSONL stream across restarts).
pub trait SupervisionReport: Send + Sync {
    /// The supervisor journaled `record` (a restart, a pause while it waited).
    fn journaled(&self, record: &EventRecord);
    /// A restart before the run existed: there was no journal to record it in.
    fn not_journaled(&self, event: &Event);
}

/// How supervision ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Supervised {
    /// The child ended with its own answer (exit 0–3), or with this code after it was stopped.
    Exited(u8),
    /// The child died after the run ended or paused: the journal holds the verdict.
    Ended(RunStatus),
    /// The child kept dying and the restart limit was spent.
    GaveUp {
        /// How the last child died ("was killed by signal 9 (SIGKILL)").
        cause: String,
        /// The restarts made (the limit).
        restarts: u32,
    },
    /// Stopped while waiting to restart: the supervisor journaled the pause itself (when the run
    /// existed).
    PausedWhileWaiting,
}

/// One supervised run. See the module's documentation.
pub struct Supervisor {
    /// The workspace (its state directory holds the pidfile).
    pub workspace: PathBuf,
    /// The store's URL when it is not the workspace's SQLite journal (children get it by
    /// environment, which keeps a database password out of `ps`).
    pub store: Option<String>,
    /// The run supervised.
    pub run_id: RunId,
    /// What the first child does.
    pub role: ChildRole,
    /// Restarts before giving up.
    pub max_restarts: u32,
    /// How to start a child.
    pub child: Box<dyn ChildCommand>,
    /// Where the supervisor's own events go.
    pub report: Box<dyn SupervisionReport>,
}

/// What became of a child.
enum Verdict {
    /// Exit 0/1/2/3: the child's own answer, passed through.
    Final(u8),
    /// The supervisor was asked to stop and the child is gone.
    Stopped(u8),
    Crashed(String),
}

impl Supervisor {
    /// Runs children until one gives a verdict, the limit is spent or a signal stops it; the
    /// run id at the end (a run killed before it journaled its start is started afresh under a
    /// new id). Holds the run's [`PidFile`] meanwhile.
    pub async fn supervise(mut self) -> Result<(RunId, Supervised), Error> {
        let mut pidfile = PidFile::create(&self.workspace, &self.run_id)?;
        let mut signals = Signals::new()?;
        let mut restarts = 0u32;
        let mut backoff = FIRST_BACKOFF;
        loop {
            let before = self.summary().await?.map(|s| s.event_count);
            let grew_since = |after: &RunSummary| Some(after.event_count) > before.map(|b| b + 1);
            let cause = match self.run_child(&mut signals).await? {
                Verdict::Final(code) | Verdict::Stopped(code) => {
                    return Ok((self.run_id, Supervised::Exited(code)));
                }
                Verdict::Crashed(cause) => cause,
            };
            let after = self.summary().await?;
            match after.as_ref().map(|s| (s.status, s.event_count)) {
                // The child died after the run ended: its verdict is in the journal.
                Some((status @ (RunStatus::Finished | RunStatus::Failed), _)) => {
                    return Ok((self.run_id, Supervised::Ended(status)));
                }
                // Paused by this child. (A paused run whose child died before journaling
                // anything is still paused from before: that child is restarted.)
                Some((RunStatus::Paused, _)) if after.as_ref().is_some_and(grew_since) => {
                    return Ok((self.run_id, Supervised::Ended(RunStatus::Paused)));
                }
                Some((_, count)) if count > 0 => self.role = ChildRole::Resume,
                Some(_) if self.role == ChildRole::NewRun => {
                    // Killed between creating the run and journaling its start: that id is
                    // taken by an empty run (`resume --last` skips those), so start afresh.
                    self.run_id = RunId::new();
                    pidfile.move_to(&self.run_id)?;
                }
                _ => {}
            }
            restarts += 1;
            if restarts > self.max_restarts {
                let restarts = self.max_restarts;
                return Ok((self.run_id, Supervised::GaveUp { cause, restarts }));
            }
            // The child's own start event is not progress; anything beyond it is.
            if after.as_ref().is_some_and(grew_since) {
                backoff = FIRST_BACKOFF;
            }
            let event = Event::SupervisorRestarted {
                attempt: restarts,
                cause,
                backoff_ms: u64::try_from(backoff.as_millis()).unwrap_or(u64::MAX),
            };
            match self.role {
                ChildRole::Resume => self.journal(event).await?,
                ChildRole::NewRun => self.report.not_journaled(&event),
            }
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = signals.recv() => {
                    if self.role == ChildRole::Resume {
                        self.journal(Event::RunPaused {
                            reason: PauseReason::Interrupted,
                            detail: "stopped while the supervisor waited to restart the agent \
                                     process; `baton resume` continues it"
                                .into(),
                        })
                        .await?;
                    }
                    return Ok((self.run_id, Supervised::PausedWhileWaiting));
                }
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Runs one child to its end, forwarding SIGINT/SIGTERM to it.
    async fn run_child(&self, signals: &mut Signals) -> Result<Verdict, Error> {
        let mut command = self.child.command(&self.run_id, self.role)?;
        command
            .env(SUPERVISED_ENV, std::process::id().to_string())
            .stdin(std::process::Stdio::null())
            // Its own process group: a Ctrl-C at the terminal reaches only the supervisor, which
            // forwards it once (two would make the child quit at once instead of pausing).
            .process_group(0);
        if let Some(store) = &self.store {
            command.env("BATON_STORE", store);
        }
        die_with_parent(&mut command);
        let mut child = command
            .spawn()
            .map_err(|e| Error::failed(format!("cannot start the agent process: {e}")))?;
        let pid = child.id().and_then(|p| Pid::from_raw(p as i32));
        let mut stops = 0u32;
        let status = loop {
            tokio::select! {
                status = child.wait() => break status.map_err(|e| {
                    Error::failed(format!("waiting for the agent process: {e}"))
                })?,
                _ = signals.recv() => {
                    stops += 1;
                    // The child pauses cleanly on the first, quits on the second, as baton
                    // without a supervisor does.
                    if let Some(pid) = pid {
                        let _ = rustix::process::kill_process(pid, Signal::TERM);
                    }
                }
            }
        };
        Ok(match (status.code(), stops) {
            (Some(code @ 0..=3), 0) => Verdict::Final(code as u8),
            (_, 0) => Verdict::Crashed(process::describe(status)),
            (Some(code), _) => Verdict::Stopped(u8::try_from(code).unwrap_or(1)),
            (None, _) => Verdict::Stopped(130),
        })
    }

    async fn summary(&self) -> Result<Option<RunSummary>, Error> {
        let opened =
            match baton::store::open_existing_store(&self.workspace, self.store.as_deref()).await {
                Ok(opened) => opened,
                // No store file yet: the first child died before creating it.
                Err(e) if e.is_usage() => return Ok(None),
                Err(e) => return Err(e),
            };
        let summary = opened.store.get_run(&self.run_id).await;
        opened.store.close().await;
        Ok(summary?)
    }

    /// Appends one event under the run's lease: the dead child's lease is taken over at once
    /// (its pid is gone), and released again for the next child.
    async fn journal(&self, event: Event) -> Result<(), Error> {
        let opened =
            baton::store::open_existing_store(&self.workspace, self.store.as_deref()).await?;
        let store = opened.store;
        let lease = store.acquire(&self.run_id, &Holder::this_process()).await?;
        let appended = baton_engine::record_external(store.as_ref(), &lease, event).await;
        let _ = store.release(&lease).await;
        store.close().await;
        // A run that ended meanwhile has a closed journal: nothing to record or show.
        if let Some(record) = appended? {
            self.report.journaled(&record);
        }
        Ok(())
    }
}
