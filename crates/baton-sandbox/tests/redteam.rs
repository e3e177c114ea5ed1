//! Red-team findings (issue 15), each replayed as the attack it was, through the real sandbox on
//! every backend this machine has: the test fails if the protection is removed.
//!
//! Covered here: the terminal (finding 5: `TIOCSTI` typed a command into the user's shell), the
//! private tmp (finding 8: a predictable, reused name that another user could plant) and other
//! processes' limits and priorities (finding 12: `prlimit --pid BATON --cpu=0:0` killed baton).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;
use support::*;

const T: Duration = Duration::from_secs(60);

/// The session id of this (the test's) process, as field 6 of /proc/self/stat.
fn own_session() -> String {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    after_comm.split(' ').nth(3).unwrap().to_string()
}

#[test]
fn commands_run_in_a_session_of_their_own_without_the_users_terminal() {
    let mine = own_session();
    for backend in backends() {
        let ws = tempdir();
        let sb = sandbox(backend, ws.path(), |_| {});
        // Field 6 of /proc/self/stat is the session; inside bubblewrap's pid namespace a session
        // from outside reads as 0.
        let r = sh(&sb, "cut -d' ' -f6 /proc/self/stat", T);
        assert_eq!(r.code(), 0, "{backend:?}: {}", text(&r.stderr));
        let session = text(&r.stdout).trim().to_string();
        assert_ne!(
            session, mine,
            "{backend:?}: the command shares baton's session"
        );
        assert_ne!(
            session, "0",
            "{backend:?}: the command is in a session from outside"
        );
        // Without a controlling terminal, /dev/tty cannot be opened.
        let r = sh(&sb, "exec 3</dev/tty && echo opened", T);
        assert!(
            !text(&r.stdout).contains("opened"),
            "{backend:?}: /dev/tty opened"
        );
    }
}

#[test]
fn typing_into_a_terminal_is_refused_by_seccomp() {
    // Any terminal the command could get hold of: stdin is /dev/null, so without the filter
    // the kernel answers ENOTTY (25); the filter answers EPERM (1) before looking at the fd.
    let attack = "import fcntl, sys, termios\n\
        for request in (termios.TIOCSTI, getattr(termios, 'TIOCLINUX', 0x541C)):\n\
        \x20   try:\n\
        \x20       fcntl.ioctl(0, request, b'x')\n\
        \x20       print('accepted')\n\
        \x20   except OSError as e:\n\
        \x20       print(e.errno)\n";
    for backend in backends() {
        let ws = tempdir();
        std::fs::write(ws.path().join("tiocsti.py"), attack).unwrap();
        let sb = sandbox(backend, ws.path(), |_| {});
        let r = sh(&sb, "python3 tiocsti.py </dev/null", T);
        assert_eq!(r.code(), 0, "{backend:?}: {}", text(&r.stderr));
        let lines: Vec<String> = text(&r.stdout).lines().map(str::to_string).collect();
        assert_eq!(
            lines,
            vec![libc_eperm(), libc_eperm()],
            "{backend:?}: {lines:?}"
        );
        // Other ioctls still work (a terminal query on a non-terminal is ENOTTY, not EPERM).
        let r = sh(
            &sb,
            "python3 -c 'import fcntl,termios\ntry:\n fcntl.ioctl(0, termios.TIOCGWINSZ, bytes(8))\nexcept OSError as e:\n print(e.errno)' </dev/null",
            T,
        );
        assert_eq!(text(&r.stdout).trim(), "25", "{backend:?}");
    }
}

fn libc_eperm() -> String {
    "1".to_string()
}

#[test]
fn private_tmps_are_fresh_private_and_removed() {
    for backend in backends() {
        let ws = tempdir();
        let sb = sandbox(backend, ws.path(), |c| {
            c.mode = baton_sandbox::Mode::FullAccess
        });
        // In full-access mode the command sees its private tmp under its real path ($TMPDIR).
        let first = sh(&sb, "echo \"$TMPDIR\"; stat -c '%a %u' \"$TMPDIR\"", T);
        let second = sh(&sb, "echo \"$TMPDIR\"", T);
        let lines: Vec<String> = text(&first.stdout).lines().map(str::to_string).collect();
        assert_eq!(lines.len(), 2, "{backend:?}: {lines:?}");
        let (path, mode_owner) = (&lines[0], &lines[1]);
        assert_ne!(
            path,
            text(&second.stdout).trim(),
            "{backend:?}: a private tmp was reused"
        );
        let uid = std::fs::metadata("/proc/self").unwrap().uid();
        assert_eq!(mode_owner, &format!("700 {uid}"), "{backend:?}");
        // The name is not derivable from the pid and a counter.
        let name = std::path::Path::new(path)
            .file_name()
            .unwrap()
            .to_string_lossy();
        let pid = std::process::id();
        assert!(name.starts_with(&format!("baton-sbx-{pid}-")), "{name}");
        let suffix = &name[format!("baton-sbx-{pid}-").len()..];
        assert!(
            suffix.len() >= 6 && suffix.parse::<u64>().is_err(),
            "{name}"
        );
        assert!(
            !std::path::Path::new(path).exists(),
            "{backend:?}: {path} left behind"
        );
    }
}

#[test]
fn stale_private_tmps_of_dead_processes_are_removed_without_following_symlinks() {
    let tmp = std::env::temp_dir();
    // A pid that is certainly gone: a child that has exited and been reaped.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = tmp.join(format!("baton-sbx-{dead}-staleXY"));
    std::fs::create_dir_all(stale.join("inner")).unwrap();
    std::fs::write(stale.join("inner/file"), "x").unwrap();
    // A planted symlink under a stale-looking name pointing at a directory that must survive.
    let victim = tempdir();
    std::fs::write(victim.path().join("keep"), "keep").unwrap();
    let planted = tmp.join(format!("baton-sbx-{dead}-linkXY"));
    let _ = std::fs::remove_file(&planted);
    std::os::unix::fs::symlink(victim.path(), &planted).unwrap();
    // A live process's tmp stays.
    let live = tmp.join(format!("baton-sbx-{}-liveXY", std::process::id()));
    std::fs::create_dir_all(&live).unwrap();
    std::fs::set_permissions(&live, std::fs::Permissions::from_mode(0o700)).unwrap();

    baton_sandbox::remove_stale_private_tmps();
    assert!(!stale.exists(), "a dead process's private tmp was left");
    assert!(
        victim.path().join("keep").exists(),
        "a symlink was followed"
    );
    assert!(live.exists(), "a live process's private tmp was removed");
    let _ = std::fs::remove_file(&planted);
    let _ = std::fs::remove_dir_all(&live);
}

/// A field of `/proc/PID/limits` ("Max open files  1024  1048576  files" → "1024 1048576").
fn open_files_limit(pid: u32) -> String {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    line.split_whitespace()
        .skip(3)
        .take(2)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The nice value, field 19 of `/proc/PID/stat`.
fn nice(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
    after_comm.split(' ').nth(16).unwrap().to_string()
}

#[test]
fn other_processes_limits_and_priorities_cannot_be_changed() {
    for backend in backends() {
        // A process outside the sandbox, of the same user: what baton is to its commands.
        let mut victim = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let pid = victim.id();
        let (limits, priority) = (open_files_limit(pid), nice(pid));
        let ws = tempdir();
        let sb = sandbox(backend, ws.path(), |_| {});
        let r = sh(
            &sb,
            &format!(
                "prlimit --pid {pid} --nofile=4:4; echo prlimit=$?; renice -n 7 -p {pid}; \
                 echo renice=$?; ulimit -n 64 && echo own-limit-ok; nice -n 3 true && echo own-nice-ok"
            ),
            T,
        );
        let out = text(&r.stdout);
        assert_eq!(
            open_files_limit(pid),
            limits,
            "{backend:?}: {out}{}",
            text(&r.stderr)
        );
        assert_eq!(nice(pid), priority, "{backend:?}: {out}{}", text(&r.stderr));
        assert!(!out.contains("prlimit=0"), "{backend:?}: {out}");
        assert!(!out.contains("renice=0"), "{backend:?}: {out}");
        // Its own limits and priority stay the command's to change.
        assert!(
            out.contains("own-limit-ok"),
            "{backend:?}: {out}{}",
            text(&r.stderr)
        );
        assert!(
            out.contains("own-nice-ok"),
            "{backend:?}: {out}{}",
            text(&r.stderr)
        );
        victim.kill().unwrap();
        victim.wait().unwrap();
    }
}
