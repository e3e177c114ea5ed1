//! The process side of supervision: how a child died, signals as one stream, a child that dies
//! with its supervisor, a background process in a session of its own.

use std::process::ExitStatus;

use rustix::process::Signal;

use baton::Error;

/// "killed by signal 9 (SIGKILL)", "exited with code 101 (a panic)", …
pub(super) fn describe(status: ExitStatus) -> String {
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
    match status.code() {
        Some(101) => "exited with code 101 (a panic)".into(),
        Some(code) => format!("exited with unexpected code {code}"),
        None => "ended without an exit status".into(),
    }
}

/// SIGINT and SIGTERM, as one stream.
pub(super) struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Signals {
    pub(super) fn new() -> Result<Signals, Error> {
        use tokio::signal::unix::{SignalKind, signal};
        let listen =
            |kind| signal(kind).map_err(|e| Error::failed(format!("cannot handle signals: {e}")));
        Ok(Signals {
            int: listen(SignalKind::interrupt())?,
            term: listen(SignalKind::terminate())?,
        })
    }

    pub(super) async fn recv(&mut self) {
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
pub(super) fn die_with_parent(command: &mut tokio::process::Command) {
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
pub(super) fn die_with_parent(_command: &mut tokio::process::Command) {}

/// A background supervisor gets a session of its own: closing the terminal (SIGHUP) or a
/// Ctrl-C there must not reach it.
#[allow(unsafe_code)]
pub fn new_session(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and only makes the setsid
    // syscall, which is async-signal-safe; it touches no locks or shared state of the parent.
    unsafe {
        command.pre_exec(|| {
            rustix::process::setsid()?;
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    use super::describe;

    #[test]
    fn causes_name_the_signal_or_the_panic() {
        let killed = ExitStatus::from_raw(9);
        assert_eq!(describe(killed), "was killed by signal 9 (SIGKILL)");
        let panicked = ExitStatus::from_raw(101 << 8);
        assert_eq!(describe(panicked), "exited with code 101 (a panic)");
        let odd = ExitStatus::from_raw(42 << 8);
        assert_eq!(describe(odd), "exited with unexpected code 42");
    }
}
