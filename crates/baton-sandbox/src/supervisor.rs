//! The small supervisor the trampoline's first stage stays as: it runs the command (or
//! bubblewrap), is the subreaper of everything the command starts, and makes sure none of it
//! outlives either the command or baton.
//!
//! A process that calls `setsid` or double-forks leaves the command's process group, and
//! without a cgroup (an unprivileged user) nothing else would find it: as subreaper the
//! supervisor inherits every such orphan, and kills its whole tree when the command ends or
//! baton disappears — also bubblewrap's inner init when baton is killed while bubblewrap is
//! still setting the sandbox up (it reparents here instead of to init, where it used to sleep
//! forever on its setup pipe). A termination signal sent to it from outside (`kill`, `pkill`)
//! does the same before it exits.

use std::convert::Infallible;
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use rustix::process::{Pid, Signal, WaitOptions};

/// Stops `root` and everything beneath it (stopped processes cannot fork), then kills them
/// all: what a timeout or a killed run does from outside, while the supervisor is still there
/// to hold the orphans.
pub(crate) fn kill_tree_from_outside(root: i32) {
    let mut all = vec![root];
    for _ in 0..50 {
        let before = all.len();
        for pid in descendants(root) {
            if !all.contains(&pid) {
                all.push(pid);
            }
        }
        for pid in all.iter().copied().filter_map(Pid::from_raw) {
            let _ = rustix::process::kill_process(pid, Signal::STOP);
        }
        if all.len() == before && before > 1 {
            break;
        }
        if all.len() == 1 && descendants(root).is_empty() {
            break;
        }
    }
    for pid in all.into_iter().filter_map(Pid::from_raw) {
        let _ = rustix::process::kill_process(pid, Signal::KILL);
    }
}

/// Runs `program` and waits for it, exiting the way it did; if baton (`parent`) dies first,
/// kills everything and exits 137.
pub(crate) fn supervise(
    parent: i32,
    cgroup_procs: Option<&Path>,
    program: &OsStr,
    args: &[OsString],
) -> Result<Infallible, String> {
    // The supervisor must outlive baton long enough to clean up: it polls instead.
    rustix::process::set_parent_process_death_signal(None)
        .map_err(|e| format!("clearing the parent-death signal: {e}"))?;
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
        .map_err(|e| format!("becoming the subreaper of the command: {e}"))?;
    // A `kill PID` or `pkill baton` from outside must not end this process before it has killed
    // the command's tree (as an unprivileged user nothing else finds `setsid` children): the
    // signals wait, and the watcher below takes them. Blocked before the watcher starts, so
    // that no thread of this process takes them the default way.
    #[cfg(target_os = "linux")]
    crate::confine::sys::block_termination_signals()
        .map_err(|e| format!("blocking termination signals: {e}"))?;
    let child = Command::new(program)
        .args(args)
        .spawn()
        .map_err(|e| format!("could not run {}: {e}", program.to_string_lossy()))?;
    let main = i32::try_from(child.id()).map_err(|e| e.to_string())?;
    // baton's death is noticed by polling (a parent-death signal would kill this process
    // before it could clean up); the command's end by a blocking wait, at once.
    let cgroup = cgroup_procs.map(Path::to_path_buf);
    std::thread::spawn(move || {
        let mut pause = Duration::from_millis(1);
        loop {
            let ppid = rustix::process::getppid().map(|p| p.as_raw_nonzero().get());
            if ppid != Some(parent) {
                kill_everything(cgroup.as_deref());
                std::process::exit(128 + 9);
            }
            #[cfg(target_os = "linux")]
            if let Some(signal) = crate::confine::sys::take_termination_signal(pause) {
                kill_everything(cgroup.as_deref());
                std::process::exit(128 + signal);
            }
            #[cfg(not(target_os = "linux"))]
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    });
    loop {
        // Reaps the command when it ends, and any orphan that ends before it — from any
        // process group (`wait`, not `waitpid(None)`, which is this group only): orphans that
        // called setsid are children here too.
        match rustix::process::wait(WaitOptions::empty()) {
            Ok(Some((pid, status))) if pid.as_raw_nonzero().get() == main => {
                kill_everything(cgroup_procs);
                exit_like(status);
            }
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(format!("waiting for the command: {e}")),
        }
    }
}

/// Exits with the command's code, or dies of its signal (so baton sees what the command saw;
/// a signal this process ignores, SIGPIPE, falls back to the shell convention).
fn exit_like(status: rustix::process::WaitStatus) -> ! {
    if let Some(code) = status.exit_status() {
        std::process::exit(code);
    }
    if let Some(signal) = status.terminating_signal() {
        // The termination signals are blocked here (see `supervise`): let this thread die of one.
        #[cfg(target_os = "linux")]
        let _ = crate::confine::sys::unblock_termination_signals();
        if let Some(sig) = Signal::from_named_raw(signal) {
            let _ = rustix::process::kill_process(rustix::process::getpid(), sig);
            std::thread::sleep(Duration::from_millis(100));
        }
        std::process::exit(128 + signal);
    }
    std::process::exit(1)
}

/// Kills every descendant and every process of the cgroup, and reaps them,
/// until none is left (a fork bomb forks while it is being killed).
fn kill_everything(cgroup_procs: Option<&Path>) {
    let me = rustix::process::getpid();
    // Everything in the process group descends from here (or was reparented here).
    for _ in 0..200 {
        let mut pids = descendants(me.as_raw_nonzero().get());
        let in_cgroup = cgroup_procs
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default();
        pids.extend(
            in_cgroup
                .lines()
                .filter_map(|l| l.trim().parse::<i32>().ok()),
        );
        pids.retain(|&pid| pid != me.as_raw_nonzero().get());
        let mut alive = false;
        for pid in pids.into_iter().filter_map(Pid::from_raw) {
            alive |= rustix::process::kill_process(pid, Signal::KILL).is_ok();
        }
        while let Ok(Some(_)) = rustix::process::wait(WaitOptions::NOHANG) {}
        if !alive {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Every live descendant of `pid` (from `/proc/PID/task/TID/children`).
pub(crate) fn descendants(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(pid) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let Ok(children) = std::fs::read_to_string(task.path().join("children")) else {
                continue;
            };
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                if !out.contains(&child) {
                    out.push(child);
                    todo.push(child);
                }
            }
        }
    }
    out
}
