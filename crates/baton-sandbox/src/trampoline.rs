//! The trampoline: baton re-executes itself as `baton __sandbox-exec --spec JSON -- CMD…` in the
//! child, confines that process and then execs the command. Doing it in a fresh process rather
//! than in a `pre_exec` hook keeps `unsafe` out of it (what little there is: `confine/sys.rs`).
//!
//! Stage one starts a session of its own, joins the pids cgroup and checks that baton is still
//! there, then stays as the command's supervisor and subreaper (`supervisor.rs`) and runs the
//! trampoline again as stage two: wrapped in bubblewrap, or directly on the Landlock backend.
//! Stage two sets the resource limits, makes the private namespaces (Landlock backend), drops
//! privileges, applies Landlock and seccomp, and execs the command. The supervisor itself stays
//! unconfined, outside the command's Landlock domain, so the command cannot signal it (Landlock's
//! signal scope): a command that killed its supervisor used to leave its `setsid` children
//! running with nothing left to kill them.
//!
//! Before anything else every inherited descriptor but 0–2 is marked close-on-exec: what
//! baton's own parent left open must not reach the command.

use crate::confine::{self, Enforced};
use crate::spec::{ExecSpec, Mode, Namespaces};
#[cfg(target_os = "linux")]
use rustix::process::Signal;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

/// The hidden subcommand name the `baton` binary dispatches to [`main`].
pub const SUBCOMMAND: &str = "__sandbox-exec";

/// Exit code when the sandbox itself could not be set up (the command never ran). Chosen like
/// `env(1)` and container runtimes do, apart from the command's own codes.
pub const SETUP_FAILED: u8 = 125;

/// Entry point of the trampoline. `args` are the arguments after [`SUBCOMMAND`]. Returns only
/// on failure: on success the process has become the command.
pub fn main(args: Vec<OsString>) -> ExitCode {
    match run(args) {
        Ok(never) => match never {},
        Err(message) => {
            eprintln!("baton sandbox: {message}");
            ExitCode::from(SETUP_FAILED)
        }
    }
}

enum Never {}

fn run(args: Vec<OsString>) -> Result<Never, String> {
    #[cfg(target_os = "linux")]
    confine::sys::cloexec_inherited_fds()
        .map_err(|e| format!("closing inherited file descriptors: {e}"))?;
    let mut args = args.into_iter();
    let flag = args.next().and_then(|a| a.into_string().ok());
    let json = args
        .next()
        .and_then(|a| a.into_string().ok())
        .ok_or("missing spec")?;
    let spec: ExecSpec = serde_json::from_str(&json).map_err(|e| format!("bad spec: {e}"))?;
    match flag.as_deref() {
        Some("--probe") => {
            // Tried first, as a command would: root's unshare needs the capabilities that
            // confining drops. This process exits right after, so what it made goes with it.
            #[cfg(target_os = "linux")]
            let namespaces = confine::namespaces::enter(&spec.writable, &[], true).is_ok();
            #[cfg(not(target_os = "linux"))]
            let namespaces = false;
            let mut enforced = confine_self(&spec)?;
            enforced.namespaces = namespaces;
            let text = serde_json::to_string(&enforced).map_err(|e| e.to_string())?;
            println!("{text}");
            std::process::exit(0);
        }
        Some("--spec") => {}
        _ => return Err("usage: __sandbox-exec --spec JSON -- COMMAND [ARGS…]".into()),
    }
    if args.next().as_deref() != Some("--".as_ref()) {
        return Err("expected `--` before the command".into());
    }
    let command: Vec<OsString> = args.collect();
    let Some((program, rest)) = command.split_first() else {
        return Err("no command given".into());
    };

    first_stage(&spec)?;
    if !spec.wrapper.is_empty() {
        let inner = ExecSpec {
            wrapper: Vec::new(),
            cgroup_procs: None,
            memory_cgroup_procs: None,
            parent_pid: None,
            ..spec.clone()
        };
        let inner_json = serde_json::to_string(&inner).map_err(|e| e.to_string())?;
        let mut wrapped_args: Vec<OsString> =
            spec.wrapper[1..].iter().map(OsString::from).collect();
        wrapped_args.extend([
            spec.trampoline.clone().into_os_string(),
            SUBCOMMAND.into(),
            "--spec".into(),
            inner_json.into(),
            "--".into(),
        ]);
        wrapped_args.extend(command.iter().cloned());
        if let Some(parent) = spec.parent_pid {
            // Not exec'd: bubblewrap's inner init must not outlive a baton killed while it is
            // still setting up (see `supervisor.rs`).
            return supervise(parent, &spec, spec.wrapper[0].as_ref(), &wrapped_args);
        }
        let err = Command::new(&spec.wrapper[0]).args(&wrapped_args).exec();
        return Err(format!("could not start {}: {err}", spec.wrapper[0]));
    }
    if let Some(parent) = spec.parent_pid {
        // No bubblewrap: no pid namespace dies with baton, and the parent-death signal reaches
        // only this process, not what the command starts in the background. So stay as a
        // small supervisor that takes the whole process group down if baton disappears — and
        // unconfined: confinement starts in stage two, outside which the command cannot reach.
        let inner = ExecSpec {
            cgroup_procs: None,
            memory_cgroup_procs: None,
            parent_pid: None,
            supervisor_pid: Some(rustix::process::getpid().as_raw_nonzero().get()),
            ..spec.clone()
        };
        let inner_json = serde_json::to_string(&inner).map_err(|e| e.to_string())?;
        let mut stage_two: Vec<OsString> = vec![
            SUBCOMMAND.into(),
            "--spec".into(),
            inner_json.into(),
            "--".into(),
        ];
        stage_two.extend(command.iter().cloned());
        return supervise(parent, &spec, spec.trampoline.as_os_str(), &stage_two);
    }
    watch_supervisor(&spec)?;
    confine_self(&spec)?;
    let err = Command::new(program).args(rest).exec();
    Err(format!(
        "could not run {}: {err}",
        program.to_string_lossy()
    ))
}

fn first_stage(spec: &ExecSpec) -> Result<(), String> {
    if spec.parent_pid.is_some() {
        // A session of its own (and with it a process group whose id is this pid, which is
        // what a timeout kills): no controlling terminal, so nothing the command runs can open
        // `/dev/tty` to read the user's keys or type into their shell.
        rustix::process::setsid().map_err(|e| format!("starting a new session: {e}"))?;
    }
    for procs in [&spec.cgroup_procs, &spec.memory_cgroup_procs]
        .into_iter()
        .flatten()
    {
        let me = std::process::id().to_string();
        std::fs::write(procs, me)
            .map_err(|e| format!("joining the cgroup {}: {e}", procs.display()))?;
    }
    #[cfg(target_os = "linux")]
    if let Some(parent) = spec.parent_pid {
        // Armed before anything else runs, so baton dying (even by SIGKILL) takes the command
        // with it; the signal survives exec.
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
            .map_err(|e| format!("setting the parent-death signal: {e}"))?;
        let ppid = rustix::process::getppid().map(|p| p.as_raw_nonzero().get());
        if ppid != Some(parent) {
            return Err("baton exited before the command started".into());
        }
    }
    Ok(())
}

/// Stage two under a supervisor: dies with it (the signal survives exec), and starts nothing
/// if it is already gone.
fn watch_supervisor(spec: &ExecSpec) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    if let Some(supervisor) = spec.supervisor_pid {
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL))
            .map_err(|e| format!("setting the parent-death signal: {e}"))?;
        let ppid = rustix::process::getppid().map(|p| p.as_raw_nonzero().get());
        if ppid != Some(supervisor) {
            return Err("the sandbox's supervisor exited before the command started".into());
        }
    }
    Ok(())
}

fn confine_self(spec: &ExecSpec) -> Result<Enforced, String> {
    confine::apply_limits(&spec.limits, spec.nproc_offset).map_err(|e| e.to_string())?;
    // After the limits (a user namespace takes its process bound from its creator's) and
    // before privileges are dropped (root needs CAP_SYS_ADMIN for it).
    #[cfg(target_os = "linux")]
    if spec.namespaces == Namespaces::Private {
        confine::namespaces::enter(
            &spec.writable,
            &spec.protected,
            spec.mode != Mode::FullAccess,
        )
        .map_err(|e| e.to_string())?;
    }
    if spec.landlock || spec.seccomp {
        confine::drop_privileges().map_err(|e| e.to_string())?;
    }
    let landlock = if spec.landlock {
        confine::apply_landlock(spec).map_err(|e| e.to_string())?
    } else {
        "none".to_string()
    };
    if spec.seccomp {
        confine::apply_seccomp(confine::SeccompPolicy {
            allow_network: spec.allow_network,
            allow_unix: spec.allow_unix_sockets,
            private_ipc: spec.namespaces != Namespaces::Host,
        })
        .map_err(|e| e.to_string())?;
    }
    Ok(Enforced {
        landlock,
        seccomp: spec.seccomp,
        namespaces: spec.namespaces == Namespaces::Private,
    })
}

/// Stays as the command's supervisor (see `supervisor.rs`); returns only on failure.
fn supervise(
    parent: i32,
    spec: &ExecSpec,
    program: &std::ffi::OsStr,
    args: &[OsString],
) -> Result<Never, String> {
    match crate::supervisor::supervise(parent, spec.cgroup_procs.as_deref(), program, args)? {}
}
