//! Real sandboxed processes, on every backend this machine has, each asserting the exact
//! outcome of an escape attempt.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use baton_sandbox::{BackendChoice, Mode};
use std::io::Read;
use std::net::TcpListener;
use std::time::Duration;
use support::*;

const T: Duration = Duration::from_secs(60);

/// The error a write outside the writable set gets: bubblewrap's read-only bind mount answers
/// before Landlock does.
/// Whether `stderr` says a write was refused by the sandbox. Under bubblewrap the host is
/// mounted read-only, except /tmp, which is the sandbox's own: a path under the host's /tmp
/// (a checkout there keeps its test directories there) does not exist inside at all.
fn denied(backend: BackendChoice, stderr: &str) -> bool {
    match backend {
        BackendChoice::Bwrap => {
            stderr.contains("Read-only file system") || stderr.contains("Directory nonexistent")
        }
        // Landlock; or, where the trampoline made its private mount namespace (root, or a
        // user namespace), the read-only mount answers first.
        _ => stderr.contains("Permission denied") || stderr.contains("Read-only file system"),
    }
}

#[test]
fn writes_inside_the_workspace_work_and_outside_are_denied() {
    for backend in backends() {
        let ws = tempdir();
        let outside = tempdir();
        let sb = sandbox(backend, ws.path(), |_| {});
        let target = outside_file(outside.path());
        let r = sh(
            &sb,
            &format!("echo inside > in.txt && echo out > '{}'", target.display()),
            T,
        );
        assert_eq!(r.code(), 2, "{backend:?}: {}", text(&r.stderr));
        assert!(
            denied(backend, &text(&r.stderr)),
            "{backend:?}: {}",
            text(&r.stderr)
        );
        assert_eq!(
            std::fs::read_to_string(ws.path().join("in.txt")).unwrap(),
            "inside\n"
        );
        assert!(!target.exists(), "{backend:?}: the write escaped");
        // Nothing lands in the host's /tmp either: under bubblewrap /tmp is the private one,
        // under Landlock only the private tmp ($TMPDIR) is writable.
        let host_tmp = std::env::temp_dir().join(format!("{}-tmp", marker()));
        let r = sh(
            &sb,
            &format!("echo x > '{}' && echo y > $TMPDIR/ok", host_tmp.display()),
            T,
        );
        let expected = match backend {
            BackendChoice::Bwrap => 0,
            _ => 2,
        };
        assert_eq!(r.code(), expected, "{backend:?}: {}", text(&r.stderr));
        assert!(!host_tmp.exists(), "{backend:?}");
    }
}

#[test]
fn read_only_mode_denies_workspace_writes() {
    for backend in backends() {
        let ws = tempdir();
        let sb = sandbox(backend, ws.path(), |c| c.mode = Mode::ReadOnly);
        let r = sh(&sb, "cat /etc/hostname >/dev/null && echo x > f.txt", T);
        assert_eq!(r.code(), 2, "{backend:?}: {}", text(&r.stderr));
        assert!(denied(backend, &text(&r.stderr)));
        assert!(!ws.path().join("f.txt").exists());
    }
}

#[test]
fn writing_through_a_symlink_that_points_out_is_denied() {
    for backend in backends() {
        let ws = tempdir();
        let outside = tempdir();
        std::os::unix::fs::symlink(outside.path(), ws.path().join("link")).unwrap();
        std::os::unix::fs::symlink(outside_file(outside.path()), ws.path().join("file-link"))
            .unwrap();
        let sb = sandbox(backend, ws.path(), |_| {});
        let r = sh(&sb, "echo x > link/escaped.txt", T);
        assert_eq!(r.code(), 2, "{backend:?}: {}", text(&r.stderr));
        assert!(denied(backend, &text(&r.stderr)));
        let r = sh(&sb, "echo x > file-link", T);
        assert_eq!(r.code(), 2, "{backend:?}: {}", text(&r.stderr));
        assert!(!outside_file(outside.path()).exists(), "{backend:?}");
    }
}

/// Tries to connect to the test's own listener on 127.0.0.1 with bash's /dev/tcp.
fn connect_script(port: u16) -> String {
    format!("exec /bin/bash -c 'echo hello > /dev/tcp/127.0.0.1/{port}'")
}

#[test]
fn network_is_off_by_default_and_on_with_allow_network() {
    for backend in backends() {
        let ws = tempdir();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();

        let off = sandbox(backend, ws.path(), |_| {});
        let r = sh(&off, &connect_script(port), T);
        assert_eq!(r.code(), 1, "{backend:?}: {}", text(&r.stderr));
        // seccomp refuses the socket itself (under bubblewrap the network namespace would also
        // leave nobody listening on its own 127.0.0.1).
        assert!(
            text(&r.stderr).contains("socket: Operation not permitted"),
            "{backend:?}: {}",
            text(&r.stderr)
        );
        assert_eq!(
            listener.accept().map(|_| ()).unwrap_err().kind(),
            std::io::ErrorKind::WouldBlock,
            "{backend:?}: a connection got through"
        );

        let on = sandbox(backend, ws.path(), |c| c.allow_network = true);
        let r = sh(&on, &connect_script(port), T);
        assert_eq!(r.code(), 0, "{backend:?}: {}", text(&r.stderr));
        listener.set_nonblocking(false).unwrap();
        let (mut conn, _) = listener.accept().unwrap();
        let mut got = String::new();
        conn.read_to_string(&mut got).unwrap();
        assert_eq!(got, "hello\n");
    }
}

#[test]
fn api_keys_are_not_in_the_environment() {
    for backend in backends() {
        let ws = tempdir();
        let sb = sandbox(backend, ws.path(), |_| {});
        let r = sh_env(
            &sb,
            "env; printenv OPENAI_API_KEY",
            T,
            &[
                ("OPENAI_API_KEY", "sk-test-very-secret-1"),
                ("GITHUB_TOKEN", "ghp-very-secret-2"),
                ("LD_PRELOAD", "/evil.so"),
            ],
        );
        assert_eq!(r.code(), 1, "{backend:?}: printenv must find nothing");
        let out = text(&r.stdout);
        for secret in ["sk-test-very-secret-1", "ghp-very-secret-2", "/evil.so"] {
            assert!(
                !out.contains(secret),
                "{backend:?}: {secret} leaked:\n{out}"
            );
        }
        assert!(out.contains("PATH="), "{out}");
        let home = out.lines().find_map(|l| l.strip_prefix("HOME=")).unwrap();
        let tmpdir = out.lines().find_map(|l| l.strip_prefix("TMPDIR=")).unwrap();
        assert_eq!(home, tmpdir, "HOME is the private tmp");
    }
}

#[test]
fn a_file_size_limit_stops_a_10_gb_write() {
    for backend in backends() {
        let ws = tempdir();
        let limit: u64 = 16 << 20;
        let sb = sandbox(backend, ws.path(), |c| {
            c.limits.file_size_bytes = Some(limit)
        });
        let r = sh(
            &sb,
            "exec dd if=/dev/zero of=big.bin bs=1M count=10240 status=none",
            T,
        );
        // SIGXFSZ (25) kills dd the moment it writes past the limit.
        assert_eq!(r.code(), 128 + 25, "{backend:?}: {}", text(&r.stderr));
        assert_eq!(
            std::fs::metadata(ws.path().join("big.bin")).unwrap().len(),
            limit
        );
    }
}

#[test]
fn sleep_1000_is_killed_at_the_timeout_with_nothing_left_behind() {
    for backend in backends() {
        let ws = tempdir();
        let sb = sandbox(backend, ws.path(), |_| {});
        let m = marker();
        let r = sh_env(
            &sb,
            "sleep 1000 & sleep 1000",
            Duration::from_secs(2),
            &[(MARKER_VAR, &m)],
        );
        assert!(r.timed_out, "{backend:?}");
        let members = wait_group_empty(r.pgid as i32);
        assert!(
            members.is_empty(),
            "{backend:?}: group still has {members:?}"
        );
        let left = wait_gone(&m);
        assert!(left.is_empty(), "{backend:?}: left behind: {left:?}");
    }
}

#[test]
fn a_process_that_left_the_group_is_killed_with_the_command_in_every_setup() {
    // Red-team finding 13 (issue 15): `setsid` and double-forked children survived the
    // command, its timeout and a killed baton where no pid namespace or cgroup held them. The
    // trampoline's supervisor is their subreaper now. Without a process limit there is no pids
    // cgroup either, so this also holds where one cannot be made (an unprivileged user).
    for backend in backends() {
        for limit in [Some(512), None] {
            let ws = tempdir();
            let sb = sandbox(backend, ws.path(), |c| c.limits.max_processes = limit);
            for (script, timeout) in [
                // Ends at the timeout.
                ("setsid sleep 1000 & sleep 1000", Duration::from_secs(2)),
                // Ends at once, leaving a setsid child and a double-forked grandchild.
                ("setsid sleep 1000 & (sleep 1000 &) ; exit 0", T),
            ] {
                let m = marker();
                let r = sh_env(&sb, script, timeout, &[(MARKER_VAR, &m)]);
                assert_eq!(r.timed_out, timeout != T, "{backend:?} {script}");
                let left = wait_gone(&m);
                assert!(
                    left.is_empty(),
                    "{backend:?}, limit {limit:?}, `{script}`: left behind: {left:?}"
                );
            }
        }
    }
}

#[test]
fn killing_the_parent_from_inside_fails() {
    let me = std::process::id().to_string();
    for backend in backends() {
        let ws = tempdir();
        let sb = sandbox(backend, ws.path(), |_| {});
        let r = sh(&sb, &format!("kill -TERM {me}; kill -KILL {me}"), T);
        // Outside bubblewrap's pid namespace baton's pid does not exist; Landlock's signal
        // scope refuses it where it does.
        let expected = match backend {
            BackendChoice::Bwrap => "No such process",
            _ => "Operation not permitted",
        };
        assert_eq!(r.code(), 1, "{backend:?}");
        assert!(
            text(&r.stderr).contains(expected),
            "{backend:?}: {}",
            text(&r.stderr)
        );
    }
    // Still here.
}

#[test]
fn ptrace_and_io_uring_are_denied() {
    for backend in backends() {
        let ws = tempdir();
        let sb = sandbox(backend, ws.path(), |_| {});
        // python3 makes the raw syscalls; its absence would fail loudly below.
        let script = "import ctypes, os\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             r1 = libc.ptrace(16, os.getppid(), 0, 0)\n\
             e1 = ctypes.get_errno()\n\
             r2 = libc.syscall(425, 8, ctypes.create_string_buffer(120))\n\
             e2 = ctypes.get_errno()\n\
             print(r1, e1, r2, e2)\n";
        std::fs::write(ws.path().join("probe.py"), script).unwrap();
        let r = sh(&sb, "python3 probe.py", T);
        assert_eq!(r.code(), 0, "{backend:?}: {}", text(&r.stderr));
        // -1 with EPERM (1) for both ptrace(PTRACE_ATTACH) and io_uring_setup.
        assert_eq!(text(&r.stdout), "-1 1 -1 1\n", "{backend:?}");
    }
}

#[test]
fn git_in_a_parallel_tasks_worktree_does_not_find_the_users_repository() {
    for backend in backends() {
        // A state directory inside a git repository (a home directory kept in git). It must be
        // visible inside the sandbox for the second half of the test to mean anything.
        let home = tempdir_outside_tmp();
        let git = |dir: &std::path::Path, args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(dir)
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", text(&out.stderr));
        };
        git(home.path(), &["init", "-q"]);
        let ws = tempdir();
        let state = baton_state::StateDir::under(Some(&home.path().join("state")), ws.path());
        state.prepare().unwrap();
        let worktree = state.worktree("child");
        std::fs::create_dir_all(&worktree).unwrap();
        let plain = home.path().join("src");
        std::fs::create_dir_all(&plain).unwrap();

        let in_worktree = sh(
            &sandbox(backend, &worktree, |_| {}),
            "git rev-parse --git-dir",
            T,
        );
        assert_ne!(
            in_worktree.status.code(),
            Some(0),
            "{backend:?}: {}",
            text(&in_worktree.stdout)
        );
        assert!(
            text(&in_worktree.stderr).contains("not a git repository"),
            "{backend:?}: {}",
            text(&in_worktree.stderr)
        );
        // Any other directory in that repository still finds it.
        let in_src = sh(
            &sandbox(backend, &plain, |_| {}),
            "git rev-parse --show-toplevel",
            T,
        );
        assert_eq!(
            in_src.status.code(),
            Some(0),
            "{backend:?}: {}",
            text(&in_src.stderr)
        );
    }
}
