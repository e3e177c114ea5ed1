//! Helpers shared by the sandbox integration tests: building a sandbox per backend, running a
//! command, and finding processes that carry a test's marker.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use baton_sandbox::{BackendChoice, Finished, Output, Sandbox, SandboxConfig};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub const TRAMPOLINE: &str = env!("CARGO_BIN_EXE_baton-sandbox-exec");
pub const MARKER_VAR: &str = "BATON_TEST_MARKER";

/// Both backends. A backend this machine cannot provide is reported loudly and skipped (CI
/// installs bubblewrap, so there it never is).
pub fn backends() -> Vec<BackendChoice> {
    let platform = baton_sandbox::detect(Path::new(TRAMPOLINE));
    let mut out = Vec::new();
    if platform.bwrap.is_some() {
        out.push(BackendChoice::Bwrap);
    } else {
        eprintln!(
            "\n!!! SKIPPING the bwrap backend: {} !!!\n",
            platform.bwrap_problem.as_deref().unwrap_or("unavailable")
        );
    }
    if platform.landlock != "none" {
        out.push(BackendChoice::Landlock);
    } else {
        eprintln!("\n!!! SKIPPING the landlock backend: Landlock is not enforced here !!!\n");
    }
    assert!(!out.is_empty(), "no sandbox backend works on this machine");
    out
}

/// A directory outside `/tmp` (bubblewrap replaces `/tmp`, which would make "outside" trivially
/// invisible instead of really protected).
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// A directory the sandbox sees from inside with everything above it: never under the host's
/// `/tmp`, which bubblewrap replaces with the command's private one (a checkout under /tmp —
/// a fresh clone made with `mktemp -d` — would hide the directories above the workspace).
pub fn tempdir_outside_tmp() -> tempfile::TempDir {
    let target = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let base = if target.starts_with("/tmp") {
        std::path::Path::new("/var/tmp")
    } else {
        target
    };
    tempfile::tempdir_in(base).unwrap()
}

/// A sandbox bound to the workspace the tests' commands run in.
pub struct Sb {
    pub sandbox: Sandbox,
    pub workspace: PathBuf,
}

pub fn sandbox(
    backend: BackendChoice,
    workspace: &Path,
    adjust: impl FnOnce(&mut SandboxConfig),
) -> Sb {
    let mut config = SandboxConfig {
        backend,
        env_allowlist: vec![MARKER_VAR.to_string()],
        ..SandboxConfig::default()
    };
    adjust(&mut config);
    Sb {
        sandbox: Sandbox::new(config, Path::new(TRAMPOLINE)).unwrap(),
        workspace: workspace.to_path_buf(),
    }
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A value unique to one command, put in its environment so its processes can be found.
pub fn marker() -> String {
    format!(
        "m{}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

pub fn sh(sandbox: &Sb, script: &str, timeout: Duration) -> Finished {
    sh_env(sandbox, script, timeout, &[])
}

pub fn sh_env(
    sandbox: &Sb,
    script: &str,
    timeout: Duration,
    extra_env: &[(&str, &str)],
) -> Finished {
    let argv: Vec<OsString> = ["/bin/sh", "-c", script].map(OsString::from).to_vec();
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    env.extend(extra_env.iter().map(|(k, v)| (k.into(), v.into())));
    let prepared = sandbox
        .sandbox
        .prepare(&sandbox.workspace, &argv, env)
        .unwrap();
    baton_sandbox::run(prepared, timeout, Output::Capture(1 << 20)).unwrap()
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Live (non-zombie) processes whose environment carries `marker`.
pub fn marked_processes(marker: &str) -> Vec<i32> {
    let needle = format!("{MARKER_VAR}={marker}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
        })
        .collect()
}

/// Waits (generously) until no process carries `marker`; returns the ones left.
pub fn wait_gone(marker: &str) -> Vec<i32> {
    let start = std::time::Instant::now();
    loop {
        let left = marked_processes(marker);
        if left.is_empty() || start.elapsed() > Duration::from_secs(20) {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn outside_file(dir: &Path) -> PathBuf {
    dir.join("escaped.txt")
}

/// Live (non-zombie) members of process group `pgid`. Zombies do not count: orphans are
/// reparented to the container's init, which may never reap them, and a zombie runs nothing.
pub fn group_members(pgid: i32) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // Fields after the command name: state, ppid, pgrp, …
            let mut after = stat.rsplit(')').next().unwrap_or("").split_whitespace();
            let state = after.next();
            let pgrp = after.nth(1).and_then(|p| p.parse::<i32>().ok());
            state != Some("Z") && pgrp == Some(pgid)
        })
        .collect()
}

pub fn wait_group_empty(pgid: i32) -> Vec<i32> {
    let start = std::time::Instant::now();
    loop {
        let left = group_members(pgid);
        if left.is_empty() || start.elapsed() > Duration::from_secs(20) {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
