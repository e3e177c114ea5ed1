//! Red-team findings of the second round (issue 47) about what a command can open by path, each
//! replayed as the attack it was, through the real sandbox on every backend this machine has, and
//! checked from outside: the test fails if the protection is removed.
//!
//! Covered here: the user's terminals (item 4: on the Landlock backend a command opened
//! `/dev/pts/N` by path, read the keystrokes typed there and wrote into it — and the other host
//! devices beside it: virtual consoles, their memory, the disk), secrets in the home directory
//! (item 5: other agents' tokens, git's XDG credentials, `.pgpass`, `.my.cnf`, rclone, s3cmd,
//! 1Password, OCI, shell and REPL histories, and anything else in the home: it is an allow-list
//! now), other workspaces' baton state (item 5: journals of other projects), and the system's
//! secrets (medium: a root sandbox read `/etc/shadow`; also `/etc/gshadow`, sudoers, host keys,
//! `/root`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use baton_sandbox::BackendChoice;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::*;

const T: Duration = Duration::from_secs(60);

/// Outside the sandbox: two pseudo-terminals in raw mode (no echo), "the user's". `own`'s input
/// holds `hello-own` (the command gets it as its stdin), `other`'s holds keystrokes. Prints both
/// slave paths, waits for a line, then reports, in order, what reached `other`'s master side
/// (what a command wrote there) and what is left of its input (what no command read). A sentinel
/// written after the commands ran ends each read, so nothing depends on timing.
const TERMINALS: &str = r#"
import os, pty, select, sys, tty
def pair(data):
    m, s = pty.openpty()
    tty.setraw(s)
    os.write(m, data)
    return m, s
own_m, own_s = pair(b"hello-own\n")
m, s = pair(b"KEYS-typed-by-the-user\n")
print(os.ttyname(own_s), os.ttyname(s), flush=True)
sys.stdin.readline()
def until_end(fd):
    got = b""
    while not got.endswith(b"END\n"):
        ready, _, _ = select.select([fd], [], [], 30)
        if not ready:
            break
        got += os.read(fd, 4096)
    return got
os.write(s, b"END\n")
print("master", repr(until_end(m)), flush=True)
os.write(m, b"END\n")
print("input", repr(until_end(s)), flush=True)
"#;

/// Inside: opens the terminal given for reading, writing and both (never becoming its
/// controlling terminal, never blocking), reads and writes what it can; prints each outcome.
const OPEN_TERMINAL: &str = r#"
import os, sys
path = sys.argv[1]
for name, flags in (("read", os.O_RDONLY), ("write", os.O_WRONLY), ("rw", os.O_RDWR)):
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as e:
        print(name, "refused", e.errno)
        continue
    try:
        if flags != os.O_WRONLY:
            try:
                print(name, "read", os.read(fd, 100))
            except OSError as e:
                print(name, "read-failed", e.errno)
        if flags != os.O_RDONLY:
            os.write(fd, b"INJECTED\n")
            print(name, "wrote")
    finally:
        os.close(fd)
"#;

#[test]
fn the_users_terminals_cannot_be_opened_but_the_commands_own_works() {
    for backend in backends() {
        let mut helper = Command::new("python3")
            .args(["-c", TERMINALS])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(helper.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let (own, other) = line.trim().split_once(' ').unwrap();
        let (own, other) = (own.to_string(), other.to_string());

        let ws = tempdir();
        std::fs::write(ws.path().join("open_terminal.py"), OPEN_TERMINAL).unwrap();
        let sb = sandbox(backend, ws.path(), |_| {});
        let r = sh(&sb, &format!("python3 open_terminal.py {other}"), T);
        let said = text(&r.stdout);
        assert_eq!(r.code(), 0, "{backend:?}: {said}{}", text(&r.stderr));
        for name in ["read", "write", "rw"] {
            // EACCES from Landlock; ENOENT in bubblewrap's private /dev/pts.
            assert!(
                said.contains(&format!("{name} refused 13"))
                    || said.contains(&format!("{name} refused 2")),
                "{backend:?}: opened {other} for {name}: {said}"
            );
        }

        // A terminal handed over as the command's stdin keeps working through its descriptor
        // (reading, ioctls); `/dev/stdout` (a pipe) opens. Reopening the terminal by path
        // (`/dev/stdin`) is refused: it is a terminal device like the user's others.
        let tty = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open(&own)
            .unwrap();
        let argv: Vec<OsString> = [
            "/bin/sh",
            "-c",
            "timeout 20 head -c 10; stty -g >/dev/null && echo stty-ok; echo to-stdout > /dev/stdout",
        ]
        .map(OsString::from)
        .to_vec();
        let prepared = sb
            .sandbox
            .prepare(ws.path(), &argv, std::env::vars_os())
            .unwrap();
        let mut command = prepared.command;
        let done = command
            .stdin(tty)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        drop(prepared.guard);
        let own_said = text(&done.stdout);
        assert!(
            own_said.contains("hello-own")
                && own_said.contains("stty-ok")
                && own_said.contains("to-stdout"),
            "{backend:?}: {own_said}{}",
            text(&done.stderr)
        );

        // From outside: nothing the command wrote reached the other terminal, and the user's
        // keystrokes are still there, unread.
        helper.stdin.take().unwrap().write_all(b"go\n").unwrap();
        let mut report = String::new();
        for _ in 0..2 {
            out.read_line(&mut report).unwrap();
        }
        helper.wait().unwrap();
        assert!(
            report.contains("master b'END\\n'"),
            "{backend:?}: the command wrote into the user's terminal: {report}"
        );
        assert!(
            report.contains("input b'KEYS-typed-by-the-user\\nEND\\n'"),
            "{backend:?}: the command read the user's keystrokes: {report}"
        );
        assert!(!said.contains("KEYS"), "{backend:?}: {said}");
    }
}

#[test]
fn host_devices_but_the_harmless_ones_cannot_be_opened() {
    // Virtual consoles and their memory (the screen's text), the console, a serial line, the
    // disk (the whole filesystem, /etc/shadow included, for root), the kernel log.
    let devices: Vec<&str> = [
        "/dev/console",
        "/dev/tty1",
        "/dev/vcs",
        "/dev/vcsa1",
        "/dev/ttyS0",
        "/dev/vda",
        "/dev/sda",
        "/dev/nvme0n1",
        "/dev/kmsg",
        "/dev/ptmx",
    ]
    .into_iter()
    .filter(|d| Path::new(d).exists())
    .collect();
    let probe = "import os, sys\n\
        for d in sys.argv[1:]:\n\
        \x20   try:\n\
        \x20       os.close(os.open(d, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY))\n\
        \x20       print(d, 'opened')\n\
        \x20   except OSError as e:\n\
        \x20       print(d, 'refused', e.errno)\n";
    for backend in backends() {
        let ws = tempdir();
        std::fs::write(ws.path().join("probe.py"), probe).unwrap();
        let sb = sandbox(backend, ws.path(), |_| {});
        let r = sh(&sb, &format!("python3 probe.py {}", devices.join(" ")), T);
        let said = text(&r.stdout);
        assert_eq!(r.code(), 0, "{backend:?}: {}", text(&r.stderr));
        for device in &devices {
            // bubblewrap's own /dev has a private /dev/ptmx (the command's own terminals).
            if backend == BackendChoice::Bwrap && *device == "/dev/ptmx" {
                continue;
            }
            assert!(
                said.contains(&format!("{device} refused")),
                "{backend:?}: {said}"
            );
        }
        // What commands need still works.
        let r = sh(
            &sb,
            "echo x > /dev/null && head -c 4 /dev/urandom | wc -c && head -c 2 /dev/zero | wc -c",
            T,
        );
        assert_eq!(
            text(&r.stdout),
            "4\n2\n",
            "{backend:?}: {}",
            text(&r.stderr)
        );
    }
}

/// One file of each class of secret (relative to the home), the toolchain files that must stay
/// readable, and the rest of the home, which the allow-list hides.
const SECRETS: &[&str] = &[
    ".claude/.credentials.json",
    ".claude.json",
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
    ".config/github-copilot/hosts.json",
    ".config/gh/hosts.yml",
    ".config/git/credentials",
    ".git-credentials",
    ".pgpass",
    ".my.cnf",
    ".config/rclone/rclone.conf",
    ".s3cfg",
    ".config/op/config",
    ".op/session",
    ".oci/config",
    ".bash_history",
    ".zsh_history",
    ".local/share/fish/fish_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".lesshst",
    ".irb_history",
    // Inside a toolchain's directory, which is shown.
    ".cargo/credentials.toml",
];

/// On no list: hidden because the home is an allow-list.
const UNLISTED: &[&str] = &[
    ".unknown-tool/token",
    "notes/private.txt",
    "other-project/.env",
];

const TOOLCHAIN_FILES: &[&str] = &[
    ".cargo/config.toml",
    ".rustup/settings.toml",
    ".pyenv/version",
    ".local/bin/tool",
    ".cache/pip/http/entry",
    ".gitconfig",
    ".config/git/ignore",
];

fn cat_each(dir: &Path, rels: &[&str]) -> String {
    rels.iter()
        .map(|rel| format!("cat '{}/{rel}' 2>/dev/null; ", dir.display()))
        .collect()
}

#[test]
fn secrets_of_every_class_and_the_rest_of_the_home_are_unreadable() {
    let home = tempdir_outside_tmp();
    let h = home.path().canonicalize().unwrap();
    for rel in SECRETS.iter().chain(UNLISTED).chain(TOOLCHAIN_FILES) {
        std::fs::create_dir_all(h.join(rel).parent().unwrap()).unwrap();
        std::fs::write(h.join(rel), format!("content of {rel}\n")).unwrap();
    }
    // The workspace lives in the home, as most do.
    let ws = h.join("project");
    std::fs::create_dir_all(&ws).unwrap();
    let home_var = h.display().to_string();
    let env = [("HOME", home_var.as_str())];
    let script = format!(
        "{}{}{}ls -a '{home_var}' 2>&1; echo work > mine.txt && cat mine.txt",
        cat_each(&h, SECRETS),
        cat_each(&h, UNLISTED),
        cat_each(&h, TOOLCHAIN_FILES)
    );
    for backend in backends() {
        let sb = sandbox(backend, &ws, |_| {});
        let r = sh_env(&sb, &script, T, &env);
        let out = text(&r.stdout);
        for rel in SECRETS.iter().chain(UNLISTED) {
            assert!(
                !out.contains(&format!("content of {rel}")),
                "{backend:?} read {rel}: {out}"
            );
        }
        for rel in TOOLCHAIN_FILES {
            assert!(
                out.contains(&format!("content of {rel}")),
                "{backend:?} cannot read {rel}: {out}{}",
                text(&r.stderr)
            );
        }
        // Listing the home shows none of the secrets' names; the workspace works.
        for name in [
            ".claude",
            ".pgpass",
            "notes",
            "other-project",
            ".bash_history",
        ] {
            assert!(
                !out.lines().any(|l| l == name),
                "{backend:?} listed {name}: {out}"
            );
        }
        assert!(
            out.ends_with("work\n"),
            "{backend:?}: {out}{}",
            text(&r.stderr)
        );

        // `allow_read` shows a path of the home again.
        let sb = sandbox(backend, &ws, |c| c.allow_read = vec!["~/notes".into()]);
        let r = sh_env(
            &sb,
            &cat_each(&h, &["notes/private.txt", ".pgpass"]),
            T,
            &env,
        );
        assert_eq!(
            text(&r.stdout),
            "content of notes/private.txt\n",
            "{backend:?}"
        );

        // A workspace that is the home itself shows all of it but the listed secrets. (Landlock
        // cannot take back a part of what a command may write: there only in read-only mode.)
        let sb = sandbox(backend, &h, |c| {
            if backend == BackendChoice::Landlock {
                c.mode = baton_sandbox::Mode::ReadOnly;
            }
        });
        let r = sh_env(&sb, &cat_each(&h, SECRETS), T, &env);
        let out = text(&r.stdout);
        assert_eq!(out, "", "{backend:?}: the workspace is the home: {out}");
        let r = sh_env(&sb, &cat_each(&h, UNLISTED), T, &env);
        assert_eq!(
            text(&r.stdout).lines().count(),
            UNLISTED.len(),
            "{backend:?}"
        );
    }
}

#[test]
fn real_tools_work_with_the_home_hidden() {
    // The test's own environment: HOME is the real home, where the toolchains may live
    // (~/.cargo, ~/.rustup, ~/.pyenv); they are shown, the rest is not. Each tool that works
    // outside must work inside (as an unprivileged user, root's ~/.cargo/bin is not reachable
    // even outside).
    let tools = [
        ("python3 -c 'print(6 * 7)'", "42\n"),
        ("git init -q . && git --version | cut -c1-3", "git\n"),
        ("cargo --version | cut -c1-5", "cargo\n"),
        ("sh -c 'echo sh'", "sh\n"),
    ];
    let ws = tempdir();
    let works_outside = |script: &str, expected: &str| {
        Command::new("/bin/sh")
            .args(["-c", script])
            .current_dir(ws.path())
            .output()
            .is_ok_and(|o| text(&o.stdout) == expected)
    };
    let tools: Vec<_> = tools
        .into_iter()
        .filter(|(t, expected)| works_outside(t, expected))
        .collect();
    assert!(tools.len() >= 3, "python3, git and sh at least: {tools:?}");
    for backend in backends() {
        let ws = tempdir();
        let sb = sandbox(backend, ws.path(), |_| {});
        for (tool, expected) in &tools {
            let r = sh(&sb, tool, T);
            assert_eq!(
                &text(&r.stdout),
                expected,
                "{backend:?} {tool}: {}",
                text(&r.stderr)
            );
        }
    }
}

/// Prepares a state directory with a journal holding `content`; returns its root.
fn state_with_journal(workspace: &Path, content: &str) -> baton_state::StateDir {
    let state = baton_state::StateDir::for_workspace(workspace);
    state.prepare().unwrap();
    std::fs::write(state.journal(), content).unwrap();
    state
}

/// Set for the copy of the state test that runs with the state outside every home directory.
const STATE_COPY: &str = "BATON_TEST_STATE_OUTSIDE_HOME";

#[test]
fn other_workspaces_state_is_unreadable_and_the_own_worktree_works() {
    if std::env::var_os(STATE_COPY).is_none() {
        // Once more in a process whose state base is outside every home directory (the hidden
        // home would hide it anyway): only the state's own rule can hide it there. The test
        // process cannot change its own environment (no unsafe), so it runs itself.
        let base = tempdir_outside_tmp();
        let name = "other_workspaces_state_is_unreadable_and_the_own_worktree_works";
        let copy = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--nocapture", "--test-threads=1"])
            .env(STATE_COPY, "1")
            .env(baton_state::STATE_DIR_ENV, base.path().join("state"))
            .output()
            .unwrap();
        let said = format!("{}{}", text(&copy.stdout), text(&copy.stderr));
        assert!(copy.status.success() && said.contains("1 passed"), "{said}");
    }
    let home = tempdir_outside_tmp();
    let home_var = home.path().canonicalize().unwrap().display().to_string();
    let env = [("HOME", home_var.as_str())];
    for backend in backends() {
        let (ws, other_ws) = (tempdir(), tempdir());
        let secret = format!("journal of another project {}", marker());
        let other = state_with_journal(other_ws.path(), &secret);
        let own = state_with_journal(ws.path(), "own journal");
        let worktree = own.worktree("child");
        std::fs::create_dir_all(&worktree).unwrap();
        let script = format!(
            "cat '{}' 2>/dev/null; ls '{}' 2>/dev/null; ls '{}' 2>&1 | grep -c '{}'; \
             echo work > done.txt && cat done.txt",
            other.journal().display(),
            other.root().display(),
            other.root().parent().unwrap().display(),
            other.root().file_name().unwrap().to_string_lossy(),
        );
        for (workspace, what) in [(ws.path(), "workspace"), (worktree.as_path(), "worktree")] {
            let sb = sandbox(backend, workspace, |_| {});
            let r = sh_env(&sb, &script, T, &env);
            let out = text(&r.stdout);
            assert!(!out.contains(&secret), "{backend:?} {what}: {out}");
            assert!(!out.contains("baton.db"), "{backend:?} {what}: {out}");
            assert!(
                out.ends_with("0\nwork\n"),
                "{backend:?} {what}: {out}{}",
                text(&r.stderr)
            );
        }
        assert_eq!(
            std::fs::read_to_string(worktree.join("done.txt")).unwrap(),
            "work\n"
        );
        let _ = std::fs::remove_dir_all(other.root());
        let _ = std::fs::remove_dir_all(own.root());
    }
}

/// The system's secrets root can read: (path, what to look for inside).
fn system_secrets() -> Vec<(String, String)> {
    let mut files = vec![
        "/etc/shadow".to_string(),
        "/etc/gshadow".to_string(),
        "/etc/sudoers".to_string(),
        "/root/.profile".to_string(),
        "/root/.bashrc".to_string(),
    ];
    if let Ok(entries) = std::fs::read_dir("/etc/ssh") {
        files.extend(
            entries
                .flatten()
                .map(|e| e.path().display().to_string())
                .filter(|p| p.contains("ssh_host_") && p.ends_with("_key")),
        );
    }
    if let Ok(entries) = std::fs::read_dir("/etc/sudoers.d") {
        files.extend(entries.flatten().map(|e| e.path().display().to_string()));
    }
    // Only what this user can read outside is a meaningful check (as root: all of it).
    files
        .into_iter()
        .filter_map(|path| {
            let content = std::fs::read_to_string(&path).ok()?;
            let line = content.lines().find(|l| l.trim().len() > 4)?.to_string();
            Some((path, line))
        })
        .collect()
}

#[test]
fn password_hashes_sudoers_host_keys_and_roots_home_are_unreadable() {
    let secrets = system_secrets();
    if secrets.is_empty() {
        eprintln!(
            "\n!!! none of the system's secrets is readable by this user: nothing to hide !!!\n"
        );
    }
    let home = tempdir_outside_tmp();
    let home_var = home.path().canonicalize().unwrap().display().to_string();
    let script: String = secrets
        .iter()
        .map(|(path, _)| format!("cat '{path}' 2>/dev/null; "))
        .collect();
    for backend in backends() {
        let ws = tempdir();
        let sb = sandbox(backend, ws.path(), |_| {});
        // With the real HOME and with another one: /root is root's either way.
        for env in [vec![], vec![("HOME", home_var.as_str())]] {
            let r = sh_env(&sb, &script, T, &env);
            let out = text(&r.stdout);
            for (path, line) in &secrets {
                assert!(
                    !out.contains(line.as_str()),
                    "{backend:?} read {path}: {out}"
                );
            }
        }
    }
}
