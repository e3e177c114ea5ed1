//! Supervised runs: `baton run` / `resume` keep the agent in a child `baton` process (the same
//! binary with `--no-supervise`) and restart it, with backoff and up to a limit, when it dies
//! of anything other than a verdict — a signal (SIGKILL, an OOM kill, SIGSEGV), a panic, an
//! unexpected exit code. The next child resumes by replay; each restart is journaled as a
//! `supervisor_restarted` event. The child's stdout and stderr are the supervisor's own, so a
//! `--json` stream stays one JSONL stream across restarts.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use anyhow::anyhow;
use baton_core::{Event, EventRecord, PauseReason, RunId, RunStatus};
use baton_store::{Holder, RunSummary};
use rustix::process::{Pid, Signal};
use tokio::process::Command;

use crate::commands::{self, check_run, file_and_env_layers, workspace_dir};
use crate::detach::{self, PidFile};
use crate::output::{json_line, progress_line};
use crate::store::{latest_resumable_run, open_existing_store, resolve_run};
use crate::store_error;
use crate::{CliError, ModelFlags, ResumeArgs, RunArgs, SuperviseFlags, exit};

type CliResult = Result<u8, CliError>;

/// The first restart waits this long; each restart without progress doubles it.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
const DEFAULT_MAX_RESTARTS: u32 = 5;

/// Set in a supervised child's environment (the supervisor's pid).
pub(crate) const SUPERVISED_ENV: &str = "BATON_SUPERVISED_BY";
/// Test hook: a supervised child with this set aborts at once, so that the restart limit can be
/// tested with a child that always crashes. Ignored unless the process is a supervised child.
const ABORT_HOOK_ENV: &str = "BATON_TEST_AGENT_ABORT";

/// The global options, which children and detached supervisors are given again.
#[derive(Clone, Copy)]
pub struct Globals<'a> {
    pub workspace: &'a Path,
    pub store: Option<&'a str>,
    pub verbose: u8,
}

fn supervised(flags: &SuperviseFlags, workspace: &Path) -> Result<(bool, u32), CliError> {
    let layer = file_and_env_layers(workspace)?;
    let max = flags
        .max_restarts
        .or(layer.max_restarts)
        .unwrap_or(DEFAULT_MAX_RESTARTS);
    Ok((!flags.no_supervise && layer.supervise != Some(false), max))
}

fn abort_if_asked() {
    if std::env::var_os(SUPERVISED_ENV).is_some() && std::env::var_os(ABORT_HOOK_ENV).is_some() {
        std::process::abort();
    }
}

pub async fn run(globals: Globals<'_>, mut args: RunArgs) -> CliResult {
    if let Some(plan) = args.tasks.check_only() {
        crate::plan_cmd::print_checked(&plan?);
        return Ok(exit::FINISHED);
    }
    use std::io::IsTerminal;
    let goal = crate::goal::resolve(
        args.goal.as_deref(),
        args.goal_file.as_deref(),
        std::io::stdin().is_terminal(),
        crate::goal::read_all_stdin,
    )?;
    args.goal = Some(goal);
    args.goal_file = None;
    let workspace = workspace_dir(globals.workspace)?;
    let (supervise, max_restarts) = supervised(&args.supervise, &workspace)?;
    if !supervise {
        abort_if_asked();
        return commands::run(&workspace, globals.store, args).await;
    }
    // Usage errors are reported here, once, before any process is started.
    check_run(&workspace, &args)?;
    let run_id = args
        .run_id
        .clone()
        .map_or_else(RunId::new, RunId::from_string);
    crate::logging::attach_run(&workspace, &run_id);
    let mut sandbox_flags = args.sandbox.to_args();
    if args.no_snapshots {
        sandbox_flags.push("--no-snapshots".into());
    }
    let mut rest = model_args(&args.model)?;
    rest.extend(sandbox_flags.iter().cloned());
    rest.extend(args.tasks.to_args());
    if args.json {
        rest.push("--json".into());
    }
    if let Some(file) = &args.output_last_message {
        // Absolute: the agent process may not share this one's idea of the current directory.
        let file = std::path::absolute(file).unwrap_or_else(|_| file.clone());
        rest.extend(["--output-last-message".into(), file.display().to_string()]);
    }
    // A long goal would not fit in one argument: the agent processes read it from a file.
    if args.goal().len() > crate::goal::PASS_AS_FILE_OVER {
        let file = crate::goal::write_for_children(&workspace, run_id.as_str(), args.goal())?;
        rest.extend(["--goal-file".to_string(), file.display().to_string()]);
    } else {
        rest.extend(["--".to_string(), args.goal().to_string()]);
    }
    let globals = Globals {
        workspace: &workspace,
        ..globals
    };
    if args.supervise.detach {
        let mut detached = vec!["run".into(), "--run-id".into(), run_id.to_string()];
        detached.extend(["--max-restarts".into(), max_restarts.to_string()]);
        detached.extend(rest);
        return detach::start(globals, &run_id, detached).await;
    }
    Supervisor {
        workspace: workspace.clone(),
        store: globals.store.map(str::to_owned),
        verbose: globals.verbose,
        json: args.json,
        max_restarts,
        run_id,
        new_run: Some(rest),
        // The settings are journaled with the run; the output format and the sandbox are the
        // process's.
        resume_flags: {
            let mut flags = sandbox_flags;
            if args.json {
                flags.push("--json".into());
            }
            flags
        },
    }
    .supervise()
    .await
}

pub async fn resume(globals: Globals<'_>, args: ResumeArgs) -> CliResult {
    let workspace = workspace_dir(globals.workspace)?;
    let (supervise, max_restarts) = supervised(&args.supervise, &workspace)?;
    if !supervise {
        abort_if_asked();
        return commands::resume(&workspace, globals.store, args).await;
    }
    let run_id = {
        let opened = open_existing_store(&workspace, globals.store).await?;
        let id = match &args.run {
            Some(prefix) => resolve_run(&opened, prefix).await?,
            None => latest_resumable_run(&opened).await?.id,
        };
        opened.store.close().await;
        id
    };
    crate::logging::attach_run(&workspace, &run_id);
    let mut flags = model_args(&args.model)?;
    flags.extend(args.sandbox.to_args());
    if let Some(plan) = &args.plan {
        // Every child gets it: once journaled, the same plan again changes nothing.
        let plan = std::path::absolute(plan).unwrap_or_else(|_| plan.clone());
        flags.extend(["--plan".into(), plan.display().to_string()]);
    }
    if args.no_snapshots {
        flags.push("--no-snapshots".into());
    }
    if args.json {
        flags.push("--json".into());
    }
    let globals = Globals {
        workspace: &workspace,
        ..globals
    };
    if args.supervise.detach {
        let mut detached = vec!["resume".into(), run_id.to_string()];
        detached.extend(["--max-restarts".into(), max_restarts.to_string()]);
        detached.extend(flags);
        return detach::start(globals, &run_id, detached).await;
    }
    Supervisor {
        workspace: workspace.clone(),
        store: globals.store.map(str::to_owned),
        verbose: globals.verbose,
        json: args.json,
        max_restarts,
        run_id,
        new_run: None,
        resume_flags: flags,
    }
    .supervise()
    .await
}

/// The model flags as given, to pass on to a child: as data (one `--settings-layer` JSON
/// argument holding the layer they make), so a new setting needs no spelling out here.
fn model_args(flags: &ModelFlags) -> Result<Vec<String>, CliError> {
    let layer = commands::flags_layer_checked(flags)?;
    if layer == baton::config::ConfigLayer::default() {
        return Ok(Vec::new());
    }
    let mut value = serde_json::to_value(&layer)?;
    // Unset keys are left out: the argument stays short in `ps`.
    if let serde_json::Value::Object(map) = &mut value {
        map.retain(|_, v| !v.is_null());
    }
    Ok(vec!["--settings-layer".into(), value.to_string()])
}

/// The global options as arguments (the store goes by environment, which keeps a database
/// password out of `ps`).
pub(crate) fn global_args(globals: Globals<'_>) -> Vec<String> {
    let mut args = vec![
        "--workspace".to_string(),
        globals.workspace.display().to_string(),
    ];
    if globals.verbose > 0 {
        args.push(format!("-{}", "v".repeat(usize::from(globals.verbose))));
    }
    args
}

struct Supervisor {
    workspace: PathBuf,
    store: Option<String>,
    verbose: u8,
    json: bool,
    max_restarts: u32,
    run_id: RunId,
    /// `run` arguments after `--run-id ID` while the run has not been created; `None` for a
    /// `resume`.
    new_run: Option<Vec<String>>,
    /// Flags every `resume` child gets (a `baton resume`'s overrides; none after a `run`, whose
    /// settings are journaled).
    resume_flags: Vec<String>,
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
    async fn supervise(mut self) -> CliResult {
        let mut pidfile = PidFile::create(&self.workspace, &self.run_id)?;
        let mut signals = Signals::new()?;
        let mut restarts = 0u32;
        let mut backoff = FIRST_BACKOFF;
        loop {
            let before = self.summary().await?.map(|s| s.event_count);
            let grew_since = |after: &RunSummary| Some(after.event_count) > before.map(|b| b + 1);
            let verdict = self.run_child(&mut signals).await?;
            let cause = match verdict {
                Verdict::Final(code) | Verdict::Stopped(code) => return Ok(code),
                Verdict::Crashed(cause) => cause,
            };
            let after = self.summary().await?;
            match after.as_ref().map(|s| (s.status, s.event_count)) {
                // The child died after the run ended: its verdict is in the journal.
                Some((RunStatus::Finished, _)) => return Ok(exit::FINISHED),
                Some((RunStatus::Failed, _)) => return Ok(exit::FAILED),
                // Paused by this child. (A paused run whose child died before journaling
                // anything is still paused from before: that child is restarted.)
                Some((RunStatus::Paused, _)) if after.as_ref().is_some_and(grew_since) => {
                    return Ok(exit::PAUSED);
                }
                Some((_, count)) if count > 0 => self.new_run = None,
                Some(_) if self.new_run.is_some() => {
                    // Killed between creating the run and journaling its start: that id is
                    // taken by an empty run (`resume --last` skips those), so start afresh.
                    self.run_id = RunId::new();
                    pidfile.move_to(&self.run_id)?;
                }
                _ => {}
            }
            restarts += 1;
            if restarts > self.max_restarts {
                eprintln!(
                    "error: the agent process of run {} {cause}; it was restarted {} times, the \
                     limit (--max-restarts); `baton resume {}` continues the run",
                    self.run_id,
                    self.max_restarts,
                    self.run_id.short()
                );
                return Ok(exit::FAILED);
            }
            // The child's own start event is not progress; anything beyond it is.
            if after.as_ref().is_some_and(grew_since) {
                backoff = FIRST_BACKOFF;
            }
            let event = Event::SupervisorRestarted {
                attempt: restarts,
                cause: cause.clone(),
                backoff_ms: u64::try_from(backoff.as_millis()).unwrap_or(u64::MAX),
            };
            if self.new_run.is_none() {
                self.journal(event).await?;
            } else if let Some(line) = progress_line(&event, &baton_core::RunState::default()) {
                // No run to journal into yet: say it on stderr only (the JSONL stream carries
                // journaled events and nothing else).
                eprintln!("{line}");
            }
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = signals.recv() => return self.pause_between_children().await,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    fn child_args(&self) -> Vec<String> {
        let mut args = global_args(Globals {
            workspace: &self.workspace,
            store: self.store.as_deref(),
            verbose: self.verbose,
        });
        match &self.new_run {
            Some(rest) => {
                args.extend(["run".into(), "--no-supervise".into(), "--run-id".into()]);
                args.push(self.run_id.to_string());
                args.extend(rest.iter().cloned());
            }
            None => {
                args.extend(["resume".into(), self.run_id.to_string()]);
                args.push("--no-supervise".into());
                args.extend(self.resume_flags.iter().cloned());
            }
        }
        args
    }

    /// Runs one child to its end, forwarding SIGINT/SIGTERM to it.
    async fn run_child(&self, signals: &mut Signals) -> Result<Verdict, CliError> {
        let exe = std::env::current_exe()
            .map_err(|e| anyhow!("cannot find the baton executable to start the agent: {e}"))?;
        let mut command = Command::new(exe);
        command
            .args(self.child_args())
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
            .map_err(|e| anyhow!("cannot start the agent process: {e}"))?;
        let pid = child.id().and_then(|p| Pid::from_raw(p as i32));
        let mut stops = 0u32;
        let status = loop {
            tokio::select! {
                status = child.wait() => break status.map_err(|e| anyhow!("waiting for the agent process: {e}"))?,
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
            (code, 0) => Verdict::Crashed(describe(status, code)),
            (Some(code), _) => Verdict::Stopped(u8::try_from(code).unwrap_or(exit::FAILED)),
            (None, _) => Verdict::Stopped(130),
        })
    }

    async fn summary(&self) -> Result<Option<RunSummary>, CliError> {
        let opened = match open_existing_store(&self.workspace, self.store.as_deref()).await {
            Ok(opened) => opened,
            // No store file yet: the first child died before creating it.
            Err(e) if e.is_usage() => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let summary = opened
            .store
            .get_run(&self.run_id)
            .await
            .map_err(store_error)?;
        opened.store.close().await;
        Ok(summary)
    }

    /// Appends one event under the run's lease: the dead child's lease is taken over at once
    /// (its pid is gone), and released again for the next child.
    async fn journal(&self, event: Event) -> Result<(), CliError> {
        let opened = open_existing_store(&self.workspace, self.store.as_deref()).await?;
        let store = opened.store;
        let lease = store
            .acquire(&self.run_id, &Holder::this_process())
            .await
            .map_err(store_error)?;
        let appended = baton_engine::record_external(store.as_ref(), &lease, event)
            .await
            .map_err(crate::commands::engine_error);
        let _ = store.release(&lease).await;
        store.close().await;
        // A run that ended meanwhile has a closed journal: nothing to record or show.
        if let Some(record) = appended? {
            self.show(&record);
        }
        Ok(())
    }

    fn show(&self, record: &EventRecord) {
        use std::io::Write;
        if self.json {
            let _ = writeln!(std::io::stdout(), "{}", json_line(record));
        } else if let Some(line) = progress_line(&record.event, &baton_core::RunState::default()) {
            let _ = writeln!(std::io::stderr(), "{line}");
        }
    }

    /// A stop while waiting to restart: no child is running, so the supervisor journals the
    /// pause itself.
    async fn pause_between_children(&self) -> CliResult {
        if self.new_run.is_none() {
            self.journal(Event::RunPaused {
                reason: PauseReason::Interrupted,
                detail: "stopped while the supervisor waited to restart the agent process; \
                         `baton resume` continues it"
                    .into(),
            })
            .await?;
        }
        if !self.json {
            println!(
                "run {} paused\nresume it with `baton resume {}`",
                self.run_id,
                self.run_id.short()
            );
        }
        Ok(exit::PAUSED)
    }
}

/// "killed by signal 9 (SIGKILL)", "exited with code 101 (a panic)", …
fn describe(status: ExitStatus, code: Option<i32>) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(signal) = status.signal() {
        let name = match signal {
            4 => " (SIGILL)",
            6 => " (SIGABRT)",
            7 => " (SIGBUS)",
            9 => " (SIGKILL)",
            11 => " (SIGSEGV)",
            15 => " (SIGTERM)",
            _ => "",
        };
        let core = if status.core_dumped() {
            ", core dumped"
        } else {
            ""
        };
        return format!("was killed by signal {signal}{name}{core}");
    }
    match code {
        Some(101) => "exited with code 101 (a panic)".into(),
        Some(code) => format!("exited with unexpected code {code}"),
        None => "ended without an exit status".into(),
    }
}

/// SIGINT and SIGTERM, as one stream.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Result<Signals, CliError> {
        use tokio::signal::unix::{SignalKind, signal};
        let listen =
            |kind| signal(kind).map_err(|e| CliError::from(anyhow!("cannot handle signals: {e}")));
        Ok(Signals {
            int: listen(SignalKind::interrupt())?,
            term: listen(SignalKind::terminate())?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.int.recv() => {}
            _ = self.term.recv() => {}
        }
    }
}

/// The child dies with the supervisor: `PR_SET_PDEATHSIG` has the kernel SIGKILL it when the
/// spawning thread exits — a SIGKILLed supervisor must not leave an orphan holding the run.
/// The supervisor spawns from the thread running `block_on` (the main thread), which lives as
/// long as the process.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn die_with_parent(command: &mut Command) {
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the forked child before exec. It only makes raw syscalls
    // (prctl, getppid) and builds an io::Error from an errno without allocating, all of which
    // are async-signal-safe; it touches no locks or shared state of the parent.
    unsafe {
        command.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
            // The parent may have died between fork and prctl; then no signal will come.
            if rustix::process::getppid() != Some(parent) {
                return Err(rustix::io::Errno::SRCH.into());
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut Command) {}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use clap::Parser;

    use super::*;
    use crate::{Cli, Command as CliCommand};

    fn parsed_run(args: &[&str]) -> RunArgs {
        match Cli::try_parse_from(args).map(|cli| cli.command) {
            Ok(CliCommand::Run(run)) => run,
            _ => panic!("not a run: {args:?}"),
        }
    }

    #[test]
    fn a_child_gets_the_model_flags_it_was_given() {
        let given = [
            "baton",
            "run",
            "--provider",
            "openai",
            "--base-url",
            "http://h/v1",
            "--model",
            "m",
            "--max-turns",
            "7",
            "--tool-choice",
            "required",
            "--context-window",
            "4096",
            "--no-stream",
            "goal",
        ];
        let flags = model_args(&parsed_run(&given).model).unwrap();
        assert_eq!(flags.len(), 2, "one --settings-layer argument: {flags:?}");
        let mut again = vec!["baton", "run"];
        again.extend(flags.iter().map(String::as_str));
        again.extend(["--", "goal"]);
        let child = parsed_run(&again).model;
        // The child's layer is exactly the parent's: every flag arrived, as data.
        let parent = commands::flags_layer_checked(&parsed_run(&given).model).unwrap();
        assert_eq!(commands::flags_layer_checked(&child).unwrap(), parent);
        assert_eq!(parent.max_turns, Some(7));
        assert_eq!(parent.context.and_then(|c| c.window), Some(4096));
        // And passing it on again changes nothing (a detached supervisor's children).
        assert_eq!(model_args(&child).unwrap(), flags);
        assert!(
            model_args(&parsed_run(&["baton", "run", "g"]).model)
                .unwrap()
                .is_empty()
        );
    }

    /// Every run-shaping flag is the config key of its name: set them all at once and each
    /// lands in the layer (a flag with no key, or one that sets nothing, fails here).
    #[test]
    fn every_flag_is_a_config_key() {
        use clap::{CommandFactory, Parser};
        #[derive(Parser)]
        struct Only {
            #[command(flatten)]
            model: ModelFlags,
        }
        let mut given: Vec<String> = vec!["baton".into()];
        let mut flags = 0;
        for arg in Only::command().get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            // `--mcp*` make their own layer (`McpFlags::layer`), which reads files.
            if arg.is_hide_set() || long.contains("mcp") || long == "help" {
                continue;
            }
            given.push(format!("--{long}"));
            flags += 1;
            if !arg.get_action().takes_values() {
                continue;
            }
            let value = match arg.get_value_names().and_then(|v| v.first()) {
                None => continue,
                Some(name) => match name.as_str() {
                    "N" => "7",
                    "USD" => "1.5",
                    "DURATION" => "5m",
                    "URL" => "http://h/v1",
                    "NAME" if long == "provider" => "openai",
                    "NAME" => "m",
                    "MODE" => "required",
                    "WORD" => "high",
                    choices => choices.split('|').next().unwrap(),
                },
            };
            given.push(value.into());
        }
        let layer = commands::flags_layer_checked(&Only::parse_from(&given).model).unwrap();
        let value = serde_json::to_value(&layer).unwrap();
        let set: Vec<&String> = value
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, _)| k)
            .collect();
        assert!(flags >= 20, "{given:?}");
        assert_eq!(
            set.len(),
            flags,
            "each flag sets its key: {given:?} gave {set:?}"
        );
    }

    #[test]
    fn causes_name_the_signal_or_the_panic() {
        let killed = ExitStatus::from_raw(9);
        assert_eq!(
            describe(killed, killed.code()),
            "was killed by signal 9 (SIGKILL)"
        );
        let panicked = ExitStatus::from_raw(101 << 8);
        assert_eq!(
            describe(panicked, panicked.code()),
            "exited with code 101 (a panic)"
        );
        let odd = ExitStatus::from_raw(42 << 8);
        assert_eq!(describe(odd, odd.code()), "exited with unexpected code 42");
    }
}
