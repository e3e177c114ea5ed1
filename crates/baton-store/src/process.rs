//! Who this process is, and whether a recorded holder process still exists.
//!
//! A lease names its holder by host, pid and pid start time so that a run whose holder died on
//! this machine can be taken over at once instead of after the lease expires. The start time
//! guards against PID reuse: a new process with the same pid has a different start time.

use std::sync::OnceLock;

use crate::Holder;

/// The current process as a lease holder. The hostname and start time do not change while the
/// process runs, so they are read once.
pub(crate) fn this_process_holder() -> Holder {
    static THIS: OnceLock<Holder> = OnceLock::new();
    THIS.get_or_init(|| Holder {
        host: local_hostname(),
        pid: std::process::id(),
        pid_start: read_stat("self").map(|s| s.start_time),
        worker_id: None,
    })
    .clone()
}

/// This machine's hostname (the uname node name, as `hostname` prints it).
pub(crate) fn local_hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// Whether `holder` is known to be dead. Only processes on this host can be checked; for any
/// other host, or when /proc is unavailable, the answer is "not known dead" and the lease has to
/// expire instead.
pub(crate) fn holder_is_dead(holder: &Holder, local_host: &str) -> bool {
    if holder.host != local_host || !proc_available() {
        return false;
    }
    match read_stat(&holder.pid.to_string()) {
        // No such process (or it vanished between the reads).
        None => true,
        // A zombie has exited; only its exit status is left for the parent to collect.
        Some(stat) if matches!(stat.state, 'Z' | 'X' | 'x') => true,
        // Same pid, other process: the recorded one is gone and its pid was reused.
        Some(stat) => holder
            .pid_start
            .is_some_and(|start| start != stat.start_time),
    }
}

fn proc_available() -> bool {
    std::path::Path::new("/proc/self/stat").exists()
}

struct Stat {
    state: char,
    /// Field 22: clock ticks after boot at which the process started.
    start_time: u64,
}

fn read_stat(pid: &str) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// Parses /proc/PID/stat. Field 2 is the command name in parentheses and may itself contain
/// spaces and parentheses, so the fixed fields are counted from the LAST ')'.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    // After the command come field 3 (state), 4, 5, ...; field 22 is the 20th of these.
    let state = fields.next()?.chars().next()?;
    let start_time = fields.nth(18)?.parse().ok()?;
    Some(Stat { state, start_time })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_parentheses_and_spaces_in_the_command() {
        let line = "4242 (we ird) (x) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 \
                    987654 1000 10 18446744073709551615";
        let stat = parse_stat(line).unwrap();
        assert_eq!(stat.state, 'S');
        assert_eq!(stat.start_time, 987654);
    }

    #[test]
    fn this_process_is_alive_and_has_a_start_time() {
        let me = this_process_holder();
        assert_eq!(me.pid, std::process::id());
        assert!(me.pid_start.is_some());
        assert!(!holder_is_dead(&me, &me.host));
        // The same pid with another start time is a different (reused-pid) process.
        let reused = Holder {
            pid_start: me.pid_start.map(|s| s + 1),
            ..me.clone()
        };
        assert!(holder_is_dead(&reused, &me.host));
        // Nothing can be known about a process on another host.
        let remote = Holder {
            host: format!("{}-elsewhere", me.host),
            pid: u32::MAX,
            ..me
        };
        assert!(!holder_is_dead(&remote, "this-host"));
    }
}
