//! Red-team findings (issue 15), each replayed as the attack it was, through the real sandbox on
//! every backend this machine has: the test fails if the protection is removed.
//!
//! Covered here: baton's state (finding 1: a command rewrote or truncated the journal in
//! `.baton/`), the terminal (finding 5: `TIOCSTI` typed a command into the user's shell), the
//! private tmp (finding 8: a predictable, reused name that another user could plant) and other
//! processes' limits and priorities (finding 12: `prlimit --pid BATON --cpu=0:0` killed baton),
//! host UNIX sockets (finding 4: `psql -h /var/run/postgresql` connected as superuser, and
//! `COPY … TO PROGRAM` ran a program outside the sandbox), root's capabilities and setuid files
//! and devices (findings 6 and 7: `mknod` of a block device, `chown` of outside files,
//! `clock_settime`; a setuid shell built in the workspace gave another user uid 0), and other
//! processes' environments (finding 9: `/proc/BATON/environ` held the API keys), credentials in
//! the home directory (finding 10: `~/.ssh`, `~/.aws/credentials` were readable), and resource
//! bounds (finding 14: no bound on what the private tmp holds; the memory limit was per
//! process, so a tree of processes exceeded it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use baton_sandbox::BackendChoice;
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
        // I/O priority and CPU affinity of another process: refused; its own: fine.
        let affinity = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap()
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list"))
            .map(String::from);
        let r2 = sh(
            &sb,
            &format!(
                "ionice -c 3 -p {pid}; echo ionice=$?; taskset -p -c 0 {pid} >/dev/null; \
                 echo taskset=$?; taskset -c 0 true && echo own-affinity-ok"
            ),
            T,
        );
        let out2 = text(&r2.stdout);
        assert!(
            !out2.contains("ionice=0") && !out2.contains("taskset=0"),
            "{backend:?}: {out2}"
        );
        assert!(
            out2.contains("own-affinity-ok"),
            "{backend:?}: {out2}{}",
            text(&r2.stderr)
        );
        let affinity_after = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap()
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list"))
            .map(String::from);
        assert_eq!(affinity, affinity_after, "{backend:?}");
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

/// Every way a command could change a file or directory of baton's, each printing a line only
/// if it worked.
const TAMPER: &str = r#"
S="$1"
(printf x >> "$S/baton.db") 2>/dev/null && echo "appended to the journal"
(: > "$S/baton.db") 2>/dev/null && echo "truncated the journal"
rm -f "$S/baton.db-wal" 2>/dev/null; [ -e "$S/baton.db-wal" ] || echo "deleted the WAL"
mv "$S/baton.db" "$S/moved" 2>/dev/null && echo "renamed the journal"
(printf '[filter "x"]\n' >> "$S/shadow.git/config") 2>/dev/null && echo "armed the shadow repository"
mkdir "$S/supervisors/x" 2>/dev/null && echo "made a directory"
ln -s / "$S/link" 2>/dev/null && echo "made a symlink"
[ "$2" = metadata ] && chmod 777 "$S" 2>/dev/null && echo "changed its mode"
true
"#;

/// Landlock has no right for metadata: a command may chmod a file it owns outside the workspace
/// (it still cannot write it). Only the read-only mounts of bubblewrap stop that.
fn tamper(backend: BackendChoice, state: &str) -> String {
    let metadata = if backend == BackendChoice::Bwrap {
        "metadata"
    } else {
        "data"
    };
    format!("sh tamper.sh '{state}' {metadata}")
}

/// A state directory as baton leaves it, with bytes to compare afterwards.
fn fake_state(state: &baton_state::StateDir) {
    state.prepare().unwrap();
    std::fs::write(state.journal(), "journal").unwrap();
    std::fs::write(state.root().join("baton.db-wal"), "wal").unwrap();
    std::fs::create_dir_all(state.shadow_git()).unwrap();
    std::fs::write(state.shadow_git().join("config"), "[core]\n").unwrap();
    std::fs::create_dir_all(state.supervisors()).unwrap();
}

fn assert_state_intact(backend: BackendChoice, state: &baton_state::StateDir, out: &str) {
    assert_eq!(out, "", "{backend:?}: {out}");
    assert_eq!(std::fs::read_to_string(state.journal()).unwrap(), "journal");
    assert!(state.root().join("baton.db-wal").exists(), "{backend:?}");
    assert_eq!(
        std::fs::read_to_string(state.shadow_git().join("config")).unwrap(),
        "[core]\n"
    );
    let mode = std::fs::metadata(state.root())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700, "{backend:?}");
}

#[test]
fn commands_cannot_change_the_state_of_their_workspace() {
    for backend in backends() {
        let ws = tempdir();
        let state = baton_state::StateDir::for_workspace(ws.path());
        assert!(!state.root().starts_with(ws.path()));
        fake_state(&state);
        std::fs::write(ws.path().join("tamper.sh"), TAMPER).unwrap();
        let sb = sandbox(backend, ws.path(), |_| {});
        let r = sh(
            &sb,
            &tamper(backend, &state.root().display().to_string()),
            T,
        );
        assert_eq!(r.code(), 0, "{backend:?}: {}", text(&r.stderr));
        assert_state_intact(backend, &state, &text(&r.stdout));
    }
}

#[test]
fn a_parallel_tasks_worktree_is_writable_but_the_state_around_it_is_not() {
    for backend in backends() {
        // Outside /tmp, so that under bubblewrap the state directory is really visible (and
        // really protected, not just hidden by the private /tmp).
        let base = tempdir_outside_tmp();
        let ws = tempdir();
        let state = baton_state::StateDir::under(Some(base.path()), ws.path());
        fake_state(&state);
        let worktree = state.worktree("child");
        std::fs::create_dir_all(&worktree).unwrap();
        std::fs::write(worktree.join("tamper.sh"), TAMPER).unwrap();
        let sb = sandbox(backend, &worktree, |_| {});
        let script = format!("echo work > done.txt && {}", tamper(backend, "../.."));
        let r = sh(&sb, &script, T);
        assert_eq!(r.code(), 0, "{backend:?}: {}", text(&r.stderr));
        assert_state_intact(backend, &state, &text(&r.stdout));
        assert_eq!(
            std::fs::read_to_string(worktree.join("done.txt")).unwrap(),
            "work\n"
        );
    }
}

#[test]
fn a_writable_path_holding_the_state_is_masked_by_bwrap_and_refused_by_landlock() {
    for backend in backends() {
        let base = tempdir_outside_tmp();
        let ws = tempdir();
        // A command may write `base` (say a cache directory the user allowed), which holds the
        // state directory of a worktree workspace.
        let state = baton_state::StateDir::under(Some(base.path()), ws.path());
        fake_state(&state);
        let worktree = state.worktree("child");
        std::fs::create_dir_all(&worktree).unwrap();
        std::fs::write(worktree.join("tamper.sh"), TAMPER).unwrap();
        let sb = sandbox(backend, &worktree, |c| {
            c.writable_paths = vec![base.path().canonicalize().unwrap()]
        });
        match backend {
            BackendChoice::Landlock => {
                let argv = ["sh".into(), "-c".into(), "true".into()];
                let err = sb
                    .sandbox
                    .prepare(&worktree, &argv, std::iter::empty())
                    .unwrap_err();
                assert!(err.to_string().contains("BATON_STATE_DIR"), "{err}");
            }
            _ => {
                let r = sh(&sb, &tamper(backend, "../.."), T);
                assert_eq!(r.code(), 0, "{backend:?}: {}", text(&r.stderr));
                assert_state_intact(backend, &state, &text(&r.stdout));
                let r = sh(&sb, &format!("touch '{}/other'", base.path().display()), T);
                assert_eq!(r.code(), 0, "the rest stays writable: {}", text(&r.stderr));
            }
        }
    }
}

#[test]
fn under_bubblewrap_the_workspaces_baton_inputs_are_read_only() {
    // Landlock cannot take a subtree back from the writable workspace: there a changed
    // `.baton/config.toml` is caught by the trust check instead (see the CLI's tests).
    if !backends().contains(&BackendChoice::Bwrap) {
        return;
    }
    let ws = tempdir();
    std::fs::create_dir_all(ws.path().join(".baton")).unwrap();
    std::fs::write(ws.path().join(".baton/config.toml"), "model = \"m\"\n").unwrap();
    let sb = sandbox(BackendChoice::Bwrap, ws.path(), |_| {});
    let r = sh(
        &sb,
        "echo 'base_url = \"http://evil\"' >> .baton/config.toml; \
         rm -f .baton/config.toml; mv .baton .b; echo ok > mine.txt",
        T,
    );
    assert_eq!(r.code(), 0, "{}", text(&r.stderr));
    assert_eq!(
        std::fs::read_to_string(ws.path().join(".baton/config.toml")).unwrap(),
        "model = \"m\"\n"
    );
    assert!(ws.path().join("mine.txt").is_file());
}

/// Connects to each argument (a path, or `@name` for an abstract socket) and prints `connected`
/// or the errno; then checks that an unnamed socket pair still works.
const CONNECT: &str = r#"
import socket, sys
for target in sys.argv[1:]:
    address = "\0" + target[1:] if target.startswith("@") else target
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(address)
        print("connected")
    except OSError as e:
        print(e.errno)
a, b = socket.socketpair()
a.send(b"x")
print("pair " + b.recv(1).decode())
"#;

const POSTGRES: &str = "/var/run/postgresql/.s.PGSQL.5432";

#[test]
fn host_unix_sockets_are_unreachable_unless_allowlisted() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    let dir = tempdir_outside_tmp();
    let path = dir.path().join("host.sock");
    let _listener = UnixListener::bind(&path).unwrap();
    let name = format!("baton-redteam-{}", std::process::id());
    let _abstract =
        UnixListener::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
    // The machine's real PostgreSQL, where there is one (CI starts it).
    let postgres = std::path::Path::new(POSTGRES).exists();
    let mut targets = vec![path.display().to_string(), format!("@{name}")];
    if postgres {
        targets.push(POSTGRES.to_string());
    }
    let script = format!("python3 connect.py {}", targets.join(" "));
    let eperm = libc_eperm();
    for backend in backends() {
        let ws = tempdir();
        std::fs::write(ws.path().join("connect.py"), CONNECT).unwrap();
        for allow_network in [false, true] {
            let sb = sandbox(backend, ws.path(), |c| c.allow_network = allow_network);
            let r = sh(&sb, &script, T);
            assert_eq!(r.code(), 0, "{backend:?}: {}", text(&r.stderr));
            let mut expected = vec![eperm.clone(); targets.len()];
            expected.push("pair x".to_string());
            let lines: Vec<String> = text(&r.stdout).lines().map(str::to_string).collect();
            assert_eq!(lines, expected, "{backend:?}, network {allow_network}");
        }

        // Allowlisted: that socket is reachable; an abstract one outside the sandbox still is
        // not (Landlock's scope); the host's others are masked under bubblewrap.
        let sb = sandbox(backend, ws.path(), |c| c.unix_sockets = vec![path.clone()]);
        let r = sh(&sb, &script, T);
        assert_eq!(r.code(), 0, "{backend:?}: {}", text(&r.stderr));
        let lines: Vec<String> = text(&r.stdout).lines().map(str::to_string).collect();
        assert_eq!(lines[0], "connected", "{backend:?}: {lines:?}");
        // EPERM from Landlock's scope, or ECONNREFUSED in bubblewrap's own network namespace
        // (abstract names are per namespace).
        assert!(
            ["1", "111"].contains(&lines[1].as_str()),
            "{backend:?}: {lines:?}"
        );
        if postgres && backend == BackendChoice::Bwrap {
            assert_eq!(lines[2], "2", "bwrap masks /run: ENOENT, {lines:?}");
        }
    }
}

/// Each privileged operation prints its errno, or `ok`.
const PRIVILEGED: &str = r#"
import os, stat, sys, time
outside = sys.argv[1]
def attempt(name, f):
    try:
        f()
        print(name, "ok")
    except OSError as e:
        print(name, e.errno)
attempt("block-device", lambda: os.mknod("blk", 0o600 | stat.S_IFBLK, os.makedev(7, 0)))
attempt("char-device", lambda: os.mknod("chr", 0o600 | stat.S_IFCHR, os.makedev(1, 3)))
attempt("fifo", lambda: os.mkfifo("fifo"))
attempt("create-setuid", lambda: os.close(os.open("suid", os.O_CREAT | os.O_WRONLY, 0o4755)))
open("plain", "w").close()
attempt("chmod-setuid", lambda: os.chmod("plain", 0o4755))
attempt("chmod-setgid", lambda: os.chmod("plain", 0o2755))
attempt("chmod-exec", lambda: os.chmod("plain", 0o755))
def fchmod():
    fd = os.open("plain", os.O_RDONLY)
    try:
        os.fchmod(fd, 0o4755)
    finally:
        os.close(fd)
attempt("fchmod-setuid", fchmod)
attempt("chown-outside", lambda: os.chown(outside, 4321, 4321))
attempt("clock", lambda: time.clock_settime(time.CLOCK_REALTIME, time.clock_gettime(time.CLOCK_REALTIME)))
"#;

#[test]
fn commands_have_no_privileges_and_cannot_make_setuid_files_or_devices() {
    let root = rustix_is_root();
    for backend in backends() {
        let ws = tempdir();
        let outside = tempdir_outside_tmp();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "x").unwrap();
        std::fs::write(ws.path().join("privileged.py"), PRIVILEGED).unwrap();
        let sb = sandbox(backend, ws.path(), |_| {});
        let r = sh(
            &sb,
            "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/self/status",
            T,
        );
        let status = text(&r.stdout);
        for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
            assert!(
                status.contains(&format!("{set}:\t0000000000000000")),
                "{backend:?}: {status}"
            );
        }
        // Root under Landlock drops the bounding set too; inside bubblewrap it cannot (no
        // CAP_SETPCAP left), and no_new_privs keeps an exec from gaining any capability.
        if root && backend == BackendChoice::Landlock {
            assert!(
                status.contains("CapBnd:\t0000000000000000"),
                "{backend:?}: {status}"
            );
        }
        assert!(status.contains("NoNewPrivs:\t1"), "{backend:?}: {status}");

        let script = format!("python3 privileged.py '{}'", victim.display());
        let r = sh(&sb, &script, T);
        assert_eq!(r.code(), 0, "{backend:?}: {}", text(&r.stderr));
        let said: std::collections::BTreeMap<String, String> = text(&r.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let eperm = libc_eperm();
        for refused in [
            "block-device",
            "char-device",
            "create-setuid",
            "chmod-setuid",
            "chmod-setgid",
            "fchmod-setuid",
            "clock",
        ] {
            assert_eq!(
                said.get(refused),
                Some(&eperm),
                "{backend:?} {refused}: {said:?}"
            );
        }
        assert_eq!(said.get("fifo").map(String::as_str), Some("ok"), "{said:?}");
        assert_eq!(
            said.get("chmod-exec").map(String::as_str),
            Some("ok"),
            "{said:?}"
        );
        // EPERM without CAP_CHOWN, EROFS (30) under bubblewrap's read-only root.
        let chown = said.get("chown-outside").map(String::as_str);
        assert!(
            matches!(chown, Some("1") | Some("30")),
            "{backend:?}: {said:?}"
        );
        let meta = std::fs::metadata(&victim).unwrap();
        assert_ne!(meta.uid(), 4321);
        assert!(!ws.path().join("blk").exists() && !ws.path().join("suid").exists());
        let mode = std::fs::metadata(ws.path().join("plain"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o6000, 0, "{mode:o}");
    }
}

#[test]
fn other_processes_environments_are_unreadable() {
    let secret = format!("sk-environ-{}", std::process::id());
    let mut outside = std::process::Command::new("sleep")
        .arg("60")
        .env("BATON_REDTEAM_SECRET", &secret)
        .spawn()
        .unwrap();
    let pid = outside.id();
    for backend in backends() {
        let ws = tempdir();
        let sb = sandbox(backend, ws.path(), |_| {});
        for file in ["environ", "cmdline", "mem", "fd/0"] {
            let r = sh(
                &sb,
                &format!("cat /proc/{pid}/{file} 2>&1 | head -c 4096"),
                T,
            );
            let out = text(&r.stdout);
            assert!(
                !out.contains(&secret),
                "{backend:?} read /proc/{pid}/{file}"
            );
            if file == "environ" {
                assert!(
                    out.contains("Permission denied") || out.contains("No such file"),
                    "{backend:?}: {out}"
                );
            }
        }
    }
    outside.kill().unwrap();
    outside.wait().unwrap();
}

fn rustix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        == Some("0")
}

#[test]
fn credentials_in_the_home_directory_are_unreadable() {
    let home = tempdir_outside_tmp();
    let h = home.path().canonicalize().unwrap();
    let files = [
        (".ssh/id_ed25519", false),
        (".aws/credentials", false),
        (".config/gh/hosts.yml", false),
        (".docker/config.json", false),
        (".netrc", false),
        (".cargo/credentials.toml", false),
        (".config/baton/trusted.toml", false),
        ("secrets/extra.txt", false),
        // Not secrets, but outside the home directory's allow-list (see redteam_paths.rs).
        (".bashrc", false),
        (".docker/contexts.json", false),
        (".cargo/config.toml", true),
        (".config/git/config", true),
    ];
    for (rel, _) in files {
        std::fs::create_dir_all(h.join(rel).parent().unwrap()).unwrap();
        std::fs::write(h.join(rel), format!("content of {rel}\n")).unwrap();
    }
    let home_var = h.display().to_string();
    let script: String = files
        .iter()
        .map(|(rel, _)| {
            format!(
                "cat '{}/{rel}' 2>/dev/null || echo 'refused {rel}'; ",
                h.display()
            )
        })
        .collect();
    for backend in backends() {
        let ws = tempdir();
        let sb = sandbox(backend, ws.path(), |c| {
            c.deny_read = vec!["~/secrets".into()]
        });
        let r = sh_env(&sb, &script, T, &[("HOME", &home_var)]);
        let out = text(&r.stdout);
        for (rel, readable) in files {
            let shown = out.contains(&format!("content of {rel}"));
            assert_eq!(shown, readable, "{backend:?} {rel}: {out}");
        }
        // Listing ~/.ssh shows nothing of it either.
        let r = sh_env(
            &sb,
            &format!("ls -a '{}/.ssh' 2>&1", h.display()),
            T,
            &[("HOME", &home_var)],
        );
        assert!(!text(&r.stdout).contains("id_ed25519"), "{backend:?}");

        // allow_read takes one back.
        let sb = sandbox(backend, ws.path(), |c| {
            c.allow_read = vec!["~/.netrc".into()]
        });
        let r = sh_env(
            &sb,
            &format!("cat '{}/.netrc'", h.display()),
            T,
            &[("HOME", &home_var)],
        );
        assert_eq!(text(&r.stdout), "content of .netrc\n", "{backend:?}");
    }
}

#[test]
fn the_private_tmp_has_a_size_under_bubblewrap() {
    if !backends().contains(&BackendChoice::Bwrap) {
        return;
    }
    let ws = tempdir();
    let sb = sandbox(BackendChoice::Bwrap, ws.path(), |c| {
        c.limits.tmp_bytes = Some(8 << 20)
    });
    let r = sh(
        &sb,
        "head -c 20000000 /dev/zero > /tmp/big; echo \"code $?\"; wc -c < /tmp/big",
        T,
    );
    let out = text(&r.stdout);
    let written: u64 = out.lines().last().unwrap().trim().parse().unwrap();
    assert!(out.contains("code 1"), "{out} {}", text(&r.stderr));
    assert!(written <= 8 << 20, "{written}");
}

#[test]
fn the_memory_bound_holds_for_the_whole_command_tree() {
    let platform = baton_sandbox::detect(std::path::Path::new(TRAMPOLINE));
    // Three processes of 120 MB each, every one within the 256 MB per-process limit.
    let script = "for i in 1 2 3; do (python3 -c \"b = b'x' * (120 << 20); import time; time.sleep(3)\" && echo ok) & done; wait";
    for backend in backends() {
        let ws = tempdir();
        let sb = sandbox(backend, ws.path(), |c| {
            c.limits.memory_bytes = Some(256 << 20)
        });
        let r = sh(&sb, script, T);
        let survived = text(&r.stdout).matches("ok").count();
        if platform.memory_cgroup_base.is_some() {
            assert!(
                survived < 3,
                "{backend:?}: the tree used 360 MB under a 256 MB bound"
            );
        } else {
            eprintln!("\n!!! no memory cgroup can be made here: only RLIMIT_AS per process !!!\n");
            assert_eq!(survived, 3, "{backend:?}: {}", text(&r.stderr));
        }
    }
}
