//! A real fork bomb, on every backend: the process bound holds (also as root), the machine
//! keeps working, and the timeout leaves nothing behind.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use support::*;

const LIMIT: u64 = 64;

#[test]
fn a_fork_bomb_is_bounded_and_cleaned_up() {
    for backend in backends() {
        let ws = tempdir();
        let sb = sandbox(backend, ws.path(), |c| c.limits.max_processes = Some(LIMIT));
        let m = marker();

        // Watch the bomb's process count from outside while it runs.
        let done = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicUsize::new(0));
        let watcher = {
            let (done, peak, m) = (done.clone(), peak.clone(), m.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    peak.fetch_max(marked_processes(&m).len(), Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        };
        let r = sh_env(
            &sb,
            // The wait after the bomb is a shell loop, not `sleep`: with the process table full
            // `sleep` cannot even start, the shell would exit at once and the watcher might
            // never see anything. The loop keeps the shell (and the full table) until the
            // timeout.
            "bomb() { bomb | bomb & }; bomb; while :; do :; done",
            Duration::from_secs(8),
            &[(MARKER_VAR, &m)],
        );
        done.store(true, Ordering::Relaxed);
        watcher.join().unwrap();

        // Either the timeout ends it or the top shell itself can no longer fork `sleep` and
        // exits: both are the bound at work; what matters is below.
        eprintln!("{backend:?}: timed out: {}, exit {}", r.timed_out, r.code());
        let peak = peak.load(Ordering::Relaxed) as u64;
        assert!(peak > 0, "{backend:?}: the watcher never saw the bomb");
        // The bound counts threads and the sandbox's own helpers (bwrap, the shell) too.
        assert!(
            peak <= LIMIT,
            "{backend:?}: {peak} processes, limit {LIMIT}"
        );
        assert!(
            text(&r.stderr).contains("Cannot fork"),
            "{backend:?}: the limit was never hit: {}",
            text(&r.stderr)
        );
        let left = wait_gone(&m);
        assert!(left.is_empty(), "{backend:?}: left behind: {left:?}");
        // The machine is fine: a new process starts.
        assert!(
            std::process::Command::new("true")
                .status()
                .unwrap()
                .success()
        );
    }
}
