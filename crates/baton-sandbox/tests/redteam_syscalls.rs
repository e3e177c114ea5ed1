//! Red-team findings of the second round (issue 47) about system calls and processes, each
//! replayed as the attack it was, through the real sandbox on every backend this machine has,
//! and checked from outside: the test fails if the protection is removed.
//!
//! Covered here: root on the Landlock backend changed the mode of a root-owned file outside the
//! workspace (item 6: mode 666, then written by another user); a UNIX datagram socket reached a
//! host socket with `sendto`; a file descriptor inherited from baton's parent reached the
//! command; the kernel keyrings were readable (writable on Landlock); the host's SysV IPC was
//! reachable on Landlock (a private IPC namespace; seccomp refuses SysV IPC where none can be
//! made); and `setsid` children survived a command that killed its supervisor on Landlock as an
//! unprivileged user (and, the same way, a supervisor terminated from outside: `kill`, `pkill`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use baton_sandbox::BackendChoice;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;
use support::*;

const T: Duration = Duration::from_secs(60);
const EROFS: &str = "30";

/// Whether this machine makes the Landlock backend's private namespaces (root, or a user
/// namespace for another user); CI's does.
fn landlock_namespaces() -> bool {
    baton_sandbox::detect(Path::new(TRAMPOLINE)).namespaces
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self").unwrap().uid() == 0
}

/// Each metadata change prints its errno, or `ok`.
const METADATA: &str = r#"
import os, sys
victim = sys.argv[1]
def attempt(name, f):
    try:
        f()
        print(name, "ok")
    except OSError as e:
        print(name, e.errno)
attempt("chmod", lambda: os.chmod(victim, 0o666))
attempt("chown", lambda: os.chown(victim, os.getuid(), os.getgid()))
attempt("utime", lambda: os.utime(victim, (0, 0)))
attempt("setxattr", lambda: os.setxattr(victim, "user.baton", b"x"))
open("build.sh", "w").close()
attempt("chmod-own", lambda: os.chmod("build.sh", 0o755))
"#;

#[test]
fn files_outside_the_writable_paths_keep_their_mode_and_owner() {
    // The file belongs to whoever runs the test: for root that is what every file in /etc is.
    let outside = tempdir_outside_tmp();
    let victim = outside.path().join("victim.conf");
    std::fs::write(&victim, "setting = 1\n").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mtime = std::fs::metadata(&victim).unwrap().mtime();
    for backend in backends() {
        if backend == BackendChoice::Landlock && !landlock_namespaces() {
            if is_root() {
                let config = baton_sandbox::SandboxConfig {
                    backend,
                    ..Default::default()
                };
                let err = baton_sandbox::Sandbox::new(config, Path::new(TRAMPOLINE)).unwrap_err();
                assert!(
                    err.to_string()
                        .contains(baton_sandbox::ALLOW_ROOT_LANDLOCK_ENV),
                    "{err}"
                );
            } else {
                eprintln!(
                    "\n!!! no user namespace here: on Landlock a command may change the mode of \
                     its own user's files outside the workspace !!!\n"
                );
            }
            continue;
        }
        let ws = tempdir();
        std::fs::write(ws.path().join("metadata.py"), METADATA).unwrap();
        let sb = sandbox(backend, ws.path(), |_| {});
        let r = sh(
            &sb,
            &format!("python3 metadata.py '{}'", victim.display()),
            T,
        );
        assert_eq!(r.code(), 0, "{backend:?}: {}", text(&r.stderr));
        let said: std::collections::BTreeMap<String, String> = text(&r.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for refused in ["chmod", "chown", "utime"] {
            assert_eq!(
                said.get(refused).map(String::as_str),
                Some(EROFS),
                "{backend:?} {refused}: {said:?}"
            );
        }
        assert_ne!(said.get("setxattr").map(String::as_str), Some("ok"));
        // Builds still make their scripts executable.
        assert_eq!(
            said.get("chmod-own").map(String::as_str),
            Some("ok"),
            "{said:?}"
        );
        // From outside: nothing changed.
        let meta = std::fs::metadata(&victim).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o644, "{backend:?}");
        assert_eq!(meta.mtime(), mtime, "{backend:?}");
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "setting = 1\n",
            "{backend:?}"
        );
    }
}

/// Sends a datagram to the path in argv[1] from an unnamed datagram pair and from a datagram
/// socket, printing `sent` or the errno for each; then checks a stream pair still works.
const DATAGRAM: &str = r#"
import socket, sys
target = sys.argv[1]
try:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.sendto(b"from the pair", target)
    print("pair sent")
except OSError as e:
    print("pair", e.errno)
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.sendto(b"from a socket", target)
    print("socket sent")
except OSError as e:
    print("socket", e.errno)
a, b = socket.socketpair()
a.send(b"x")
print("stream " + b.recv(1).decode())
"#;

#[test]
fn unix_datagrams_do_not_reach_host_sockets() {
    use std::os::unix::net::UnixDatagram;
    let dir = tempdir_outside_tmp();
    let path = dir.path().join("host.sock");
    let host = UnixDatagram::bind(&path).unwrap();
    host.set_nonblocking(true).unwrap();
    for backend in backends() {
        let ws = tempdir();
        std::fs::write(ws.path().join("datagram.py"), DATAGRAM).unwrap();
        for allow_network in [false, true] {
            let sb = sandbox(backend, ws.path(), |c| c.allow_network = allow_network);
            let r = sh(&sb, &format!("python3 datagram.py '{}'", path.display()), T);
            assert_eq!(r.code(), 0, "{backend:?}: {}", text(&r.stderr));
            let lines: Vec<String> = text(&r.stdout).lines().map(str::to_string).collect();
            assert_eq!(
                lines,
                ["pair 1", "socket 1", "stream x"],
                "{backend:?}, network {allow_network}"
            );
            // From outside: nothing arrived.
            let mut buf = [0u8; 64];
            let got = host.recv(&mut buf);
            assert!(
                got.is_err(),
                "{backend:?}: the host socket received {:?}",
                String::from_utf8_lossy(&buf[..got.unwrap_or(0)])
            );
        }
        // Allowlisted, the socket is reachable, with datagrams as with streams.
        let sb = sandbox(backend, ws.path(), |c| c.unix_sockets = vec![path.clone()]);
        let r = sh(&sb, &format!("python3 datagram.py '{}'", path.display()), T);
        assert_eq!(r.code(), 0, "{backend:?}: {}", text(&r.stderr));
        assert!(
            text(&r.stdout).contains("socket sent"),
            "{backend:?}: {}",
            text(&r.stdout)
        );
        let mut buf = [0u8; 64];
        while host.recv(&mut buf).is_ok() {}
    }
}

/// Reads every descriptor from 3 to 63 and prints what it got, then the open descriptors.
const READ_FDS: &str = r#"
import os
for fd in range(3, 64):
    try:
        os.set_blocking(fd, False)
        os.lseek(fd, 0, 0)
    except OSError:
        pass
    try:
        data = os.read(fd, 4096)
    except OSError:
        continue
    print(fd, data)
print("open", sorted(os.listdir("/proc/self/fd"), key=int))
"#;

#[test]
fn descriptors_inherited_from_batons_parent_do_not_reach_the_command() {
    let secret_dir = tempdir_outside_tmp();
    let secret = format!("sk-inherited-{}", marker());
    let secret_path = secret_dir.path().join("token");
    std::fs::write(&secret_path, &secret).unwrap();
    // What a parent leaves open for baton: a descriptor without close-on-exec.
    let file = std::fs::File::open(&secret_path).unwrap();
    rustix::io::fcntl_setfd(&file, rustix::io::FdFlags::empty()).unwrap();
    // The path itself is unreadable, so the descriptor is the only way to the secret.
    let hidden = secret_dir.path().canonicalize().unwrap();
    for backend in backends() {
        let ws = tempdir();
        std::fs::write(ws.path().join("read_fds.py"), READ_FDS).unwrap();
        let sb = sandbox(backend, ws.path(), |c| c.deny_read = vec![hidden.clone()]);
        let r = sh(&sb, "python3 read_fds.py", T);
        assert_eq!(r.code(), 0, "{backend:?}: {}", text(&r.stderr));
        let out = text(&r.stdout);
        assert!(!out.contains(&secret), "{backend:?}: {out}");
        let r = sh(&sb, &format!("cat '{}'", secret_path.display()), T);
        assert!(!text(&r.stdout).contains(&secret), "{backend:?}");
    }
    drop(file);
}

/// Runs one keyring call through ctypes, printing its result or errno: `NAME ok N` / `NAME E`.
const KEYRING: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
keyctl, add_key = int(sys.argv[1]), int(sys.argv[2])
serial = int(sys.argv[3])
def call(name, *args):
    r = libc.syscall(*args)
    print(name, "ok %d" % r if r >= 0 else ctypes.get_errno())
KEY_SPEC_USER_KEYRING = -4
KEY_SPEC_SESSION_KEYRING = -3
buf = ctypes.create_string_buffer(256)
call("read", keyctl, 11, serial, buf, 256)
call("user-keyring", keyctl, 0, KEY_SPEC_USER_KEYRING, 0)
call("add", add_key, b"user", b"planted", b"x", 1, KEY_SPEC_SESSION_KEYRING)
call("update", keyctl, 2, serial, b"changed", 7)
if b"sk-key" in buf.raw:
    print("leaked")
"#;

/// Adds a `user` key to this user's keyring outside the sandbox; returns its serial.
fn add_outside_key(payload: &str) -> i64 {
    let script = format!(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n\
         r = libc.syscall({}, b'user', b'baton-redteam', b'{payload}', {}, -4)\n\
         print(r if r >= 0 else -ctypes.get_errno())",
        libc::SYS_add_key,
        payload.len()
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    text(&out.stdout).trim().parse().unwrap()
}

/// The payload of key `serial`, read outside the sandbox.
fn read_outside_key(serial: i64) -> String {
    let script = format!(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nbuf = ctypes.create_string_buffer(256)\n\
         r = libc.syscall({}, 11, {serial}, buf, 256)\nprint(buf.raw[:r].decode() if r >= 0 else -ctypes.get_errno())",
        libc::SYS_keyctl
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    text(&out.stdout).trim().to_string()
}

#[test]
fn the_kernel_keyrings_are_out_of_reach() {
    let payload = format!("sk-key-{}", std::process::id());
    let serial = add_outside_key(&payload);
    assert!(serial > 0, "adding a key outside failed: {serial}");
    let _revoke = RevokeKey(serial);
    assert_eq!(read_outside_key(serial), payload);
    let script = format!(
        "python3 keyring.py {} {} {serial}",
        libc::SYS_keyctl,
        libc::SYS_add_key
    );
    for backend in backends() {
        let ws = tempdir();
        std::fs::write(ws.path().join("keyring.py"), KEYRING).unwrap();
        let sb = sandbox(backend, ws.path(), |_| {});
        let r = sh(&sb, &script, T);
        assert_eq!(r.code(), 0, "{backend:?}: {}", text(&r.stderr));
        let lines: Vec<String> = text(&r.stdout).lines().map(str::to_string).collect();
        assert_eq!(
            lines,
            ["read 1", "user-keyring 1", "add 1", "update 1"],
            "{backend:?}"
        );
        // From outside: the key is as it was.
        assert_eq!(read_outside_key(serial), payload, "{backend:?}");
    }
}

/// Revokes a key on drop: nothing can read it any more, and the kernel collects it.
struct RevokeKey(i64);

impl Drop for RevokeKey {
    fn drop(&mut self) {
        let script = format!(
            "import ctypes\nctypes.CDLL(None).syscall({}, 3, {})",
            libc::SYS_keyctl,
            self.0
        );
        let _ = std::process::Command::new("python3")
            .args(["-c", &script])
            .status();
    }
}

/// Attaches the segment `argv[1]` and writes into it, then makes a private one: `NAME ok` or
/// the errno for each.
const SYSV: &str = r#"
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shmid = int(sys.argv[1])
addr = libc.shmat(shmid, None, 0)
if addr in (None, ctypes.c_void_p(-1).value):
    print("attach", ctypes.get_errno())
else:
    ctypes.memmove(addr, b"written from inside", 19)
    print("attach ok")
own = libc.shmget(0, 4096, 0o1600)
print("own", "ok" if own >= 0 else ctypes.get_errno())
"#;

/// A SysV shared memory segment made outside the sandbox (by `ipcmk`), removed on drop.
struct Segment(String);

impl Segment {
    fn make() -> Segment {
        let made = std::process::Command::new("ipcmk")
            .args(["-M", "4096"])
            .output()
            .unwrap();
        let id = text(&made.stdout)
            .trim()
            .rsplit(' ')
            .next()
            .unwrap()
            .to_string();
        Segment(id)
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ipcrm")
            .args(["-m", &self.0])
            .status();
    }
}

/// The `atime` and `lpid` of segment `shmid` in `/proc/sysvipc/shm` (both 0 until someone
/// attaches it).
fn segment_use(shmid: &str) -> Option<(String, String)> {
    let table = std::fs::read_to_string("/proc/sysvipc/shm").unwrap();
    let header: Vec<&str> = table.lines().next()?.split_whitespace().collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (id, atime, lpid) = (col("shmid"), col("atime"), col("lpid"));
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields[id] == shmid).then(|| (fields[atime].to_string(), fields[lpid].to_string()))
    })
}

#[test]
fn the_hosts_sysv_ipc_is_out_of_reach() {
    let segment = Segment::make();
    let shmid = segment.0.clone();
    let before = segment_use(&shmid).expect("the segment ipcmk made");
    for backend in backends() {
        let ws = tempdir();
        std::fs::write(ws.path().join("sysv.py"), SYSV).unwrap();
        let sb = sandbox(backend, ws.path(), |_| {});
        let r = sh(&sb, &format!("python3 sysv.py {shmid}"), T);
        assert_eq!(r.code(), 0, "{backend:?}: {}", text(&r.stderr));
        let said: std::collections::BTreeMap<String, String> = text(&r.stdout)
            .lines()
            .filter_map(|l| l.split_once(' '))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        // EINVAL (no such segment in a namespace of its own) or EPERM (seccomp, where no
        // namespace could be made).
        let private = backend == BackendChoice::Bwrap || landlock_namespaces();
        let expected = if private { "22" } else { "1" };
        assert_eq!(
            said.get("attach").map(String::as_str),
            Some(expected),
            "{backend:?}: {said:?}"
        );
        // A namespace of its own still has SysV IPC of its own (PostgreSQL needs a segment).
        if private {
            assert_eq!(said.get("own").map(String::as_str), Some("ok"), "{said:?}");
        }
        // From outside: nobody attached it.
        assert_eq!(segment_use(&shmid), Some(before.clone()), "{backend:?}");
    }
}

#[test]
fn without_an_ipc_namespace_seccomp_refuses_sysv_ipc() {
    // What the trampoline applies where no namespace can be made (a user without user
    // namespaces on the Landlock backend): the same confinement, the host's IPC namespace.
    // This machine can make one, so the spec is given to the trampoline directly.
    let segment = Segment::make();
    let shmid = segment.0.clone();
    let before = segment_use(&shmid).expect("the segment ipcmk made");
    let ws = tempdir();
    std::fs::write(ws.path().join("sysv.py"), SYSV).unwrap();
    let workspace = ws.path().canonicalize().unwrap();
    let spec = serde_json::json!({
        "mode": "workspace-write",
        "allow_network": false,
        "limits": {},
        "nproc_offset": 0,
        "writable": [workspace],
        "landlock": true,
        "seccomp": true,
        "cgroup_procs": null,
        "parent_pid": null,
        "wrapper": [],
        "trampoline": TRAMPOLINE,
        "namespaces": "host",
    });
    let out = std::process::Command::new(TRAMPOLINE)
        .args(["__sandbox-exec", "--spec", &spec.to_string(), "--"])
        .args(["python3", "sysv.py", &shmid])
        .current_dir(&workspace)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "attach 1\nown 1\n");
    assert_eq!(segment_use(&shmid), Some(before));
}

#[test]
fn setsid_children_die_with_a_command_that_killed_its_supervisor() {
    // Without a cgroup (an unprivileged user; here made so for root too by setting no process
    // or memory bound) only the supervisor knows these processes: a command that killed it
    // left its `setsid` children running for good.
    for backend in backends() {
        let ws = tempdir();
        let sb = sandbox(backend, ws.path(), |c| {
            c.limits.max_processes = None;
            c.limits.memory_bytes = None;
        });
        // The child has left the command's session (and process group) before the kill: it
        // says so through a FIFO once `setsid` is done.
        let start = "rm -f started; mkfifo started; \
                     setsid sh -c 'echo >started; exec sleep 1000' & read _ <started;";
        for kill in [
            "kill -KILL $PPID; echo killed=$?",
            // The command's own process group holds the supervisor on the Landlock backend.
            "kill -KILL 0",
        ] {
            let script = format!("{start} {kill}");
            let m = marker();
            let r = sh_env(&sb, &script, T, &[(MARKER_VAR, &m)]);
            assert!(!r.timed_out, "{backend:?} {script}");
            let left = wait_gone(&m);
            for pid in &left {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
            assert!(
                left.is_empty(),
                "{backend:?} `{script}`: left behind {left:?} ({})",
                text(&r.stdout)
            );
        }
    }
}

#[test]
fn setsid_children_die_with_a_supervisor_terminated_from_outside() {
    // `kill PID` or `pkill baton` reaches the supervisors too. Without a cgroup (see above) a
    // supervisor that died of it left the command's `setsid` children running.
    use std::io::BufRead;
    for backend in backends() {
        let ws = tempdir();
        let sb = sandbox(backend, ws.path(), |c| {
            c.limits.max_processes = None;
            c.limits.memory_bytes = None;
        });
        let m = marker();
        let script = "rm -f started; mkfifo started; \
                      setsid sh -c 'echo >started; exec sleep 1000' & read _ <started; \
                      echo ready; grep SigBlk /proc/self/status; exec sleep 1000";
        let argv: Vec<std::ffi::OsString> = ["/bin/sh", "-c", script].map(Into::into).to_vec();
        let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os().collect();
        env.push((MARKER_VAR.into(), m.clone().into()));
        let baton_sandbox::Prepared { mut command, guard } =
            sb.sandbox.prepare(&sb.workspace, &argv, env).unwrap();
        let mut supervisor = command
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = std::io::BufReader::new(supervisor.stdout.take().unwrap());
        let (mut ready, mut mask) = (String::new(), String::new());
        out.read_line(&mut ready).unwrap();
        out.read_line(&mut mask).unwrap();
        assert_eq!(ready, "ready\n", "{backend:?}");
        // The command does not inherit what the supervisor blocks.
        assert_eq!(mask, "SigBlk:\t0000000000000000\n", "{backend:?}");
        // The process spawned here is the supervisor (the trampoline's first stage).
        let pid = rustix::process::Pid::from_raw(supervisor.id() as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        let status = supervisor.wait().unwrap();
        let left = wait_gone(&m);
        for pid in &left {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        assert!(
            left.is_empty(),
            "{backend:?}: left behind {left:?} ({status})"
        );
        drop(guard);
    }
}
