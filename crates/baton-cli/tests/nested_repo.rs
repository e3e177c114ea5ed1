#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Red-team round 2, finding 1, replayed through the real binary: a sandboxed command makes a
//! repository of its own inside the workspace, commits a file, plants a `filter.NAME.clean`
//! driver in that repository's config with `* filter=NAME` in its `.git/info/attributes`, and
//! touches the file. baton's next snapshot (`git add --all` on the shadow repository) and
//! `baton diff` made git ask the nested repository for its status, which ran the driver outside
//! the sandbox, with the API key in its environment. Checked from outside: the driver's marker
//! (a path outside the workspace, which the sandboxed command itself cannot write) must never
//! appear, and no git baton runs may see the key.

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::json;
use support::*;

const SECRET: &str = "sk-nested-repo-test-5c1e";

/// The attack's first half: the nested repository, its commit, the planted driver.
fn plant(marker: &Path) -> String {
    format!(
        "set -e; mkdir -p vendor/evil && cd vendor/evil && git init -q && echo one > f && \
         git add f && git -c user.name=a -c user.email=a@b commit -qm one && \
         git config filter.evil.clean \"sh -c 'env > {marker}; cat'\" && \
         echo '* filter=evil' > .git/info/attributes && echo planted",
        marker = marker.display()
    )
}

/// A `git` ahead of the real one on PATH that notes, for each call baton makes on its shadow
/// repository, its environment and whether it runs confined (the sandboxed commands' own git
/// calls are left alone). It writes into the shadow repository: confined, that is all it may
/// write besides the workspace.
fn recording_git(bin: &Path) {
    let real = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v git"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let script = format!(
        "#!/bin/sh
case \"$GIT_DIR\" in *shadow.git) {{ env; grep -E '^(NoNewPrivs|Seccomp):' \
         /proc/self/status; }} > \"$GIT_DIR/recorded-env.$$\" ;; esac\nexec {} \"$@\"\n",
        real.trim()
    );
    let path = bin.join("git");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[tokio::test]
async fn a_filter_planted_in_a_nested_repository_never_runs_in_a_snapshot_or_a_diff() {
    let outside = tempfile::tempdir().unwrap();
    let marker = outside.path().join("filter-ran");

    // Turn 1 makes the nested repository (the snapshot after it sees it for the first time);
    // turn 2 touches its file, which made the next `git add` ask the nested repository whether
    // it is modified — running its filter.
    let server = ScriptedServer::start(vec![
        turn(&[("shell", json!({"command": plant(&marker)}))]),
        turn(&[(
            "shell",
            json!({"command": "sleep 1; touch vendor/evil/f; echo top > top.txt"}),
        )]),
        turn(&[("finish", json!({"summary": "done"}))]),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (ws, home) = (ws.path(), home.path());
    std::fs::write(ws.join("orig.txt"), "original\n").unwrap();
    // In the workspace (ignored, so in no snapshot): the one place outside of which a confined
    // git could not find it wherever the test runs — the sandbox hides the host's /tmp and home.
    std::fs::write(ws.join(".gitignore"), ".tools/\n").unwrap();
    let bin = ws.join(".tools/bin");
    std::fs::create_dir_all(&bin).unwrap();
    recording_git(&bin);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = baton(ws, home);
    cmd.env("PATH", &path)
        .env("BATON_API_KEY", SECRET)
        .env("OPENAI_API_KEY", SECRET)
        .args(["run", "--base-url", &server.base_url(), "--model", "m"])
        .arg("plant a filter");
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    assert_finished(&out);
    let journal = journal(ws, home);
    let results: Vec<String> = of_type(&journal, "tool_call_finished")
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert!(
        results.iter().any(|r| r.contains("planted")),
        "the attack did not get going: {results:?}"
    );
    // run_start and after turn 2 (after turn 1 the tree is unchanged: the nested repository is
    // not part of it, so that snapshot is not journaled again).
    assert!(
        of_type(&journal, "snapshot_taken").len() >= 2,
        "the run took no snapshots: {:?}",
        journal
            .iter()
            .map(|e| e["type"].to_string())
            .collect::<Vec<_>>()
    );
    assert!(
        !marker.exists(),
        "a snapshot ran the nested repository's filter outside the sandbox: {}",
        std::fs::read_to_string(&marker).unwrap_or_default()
    );

    // `baton diff` stages the workspace as it is now: the same attack once more.
    std::fs::write(ws.join("vendor/evil/f"), "two\n").unwrap();
    let mut diff = baton(ws, home);
    diff.env("PATH", &path)
        .env("BATON_API_KEY", SECRET)
        .arg("diff");
    let out = diff.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("top.txt"), "{shown}");
    assert!(
        !shown.contains("vendor/evil"),
        "a nested repository is not snapshotted: {shown}"
    );
    assert!(
        !marker.exists(),
        "`baton diff` ran the nested repository's filter outside the sandbox"
    );

    // Defence in depth: baton's git calls have an environment of their own, without the key,
    // and run in the sandbox (no new privileges, a seccomp filter).
    let shadow = state_dir(ws, home).shadow_git();
    let seen: Vec<_> = std::fs::read_dir(&shadow)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("recorded-env."))
        .collect();
    assert!(
        !seen.is_empty(),
        "baton's git calls were not seen by the recording git"
    );
    for entry in seen {
        let env = std::fs::read_to_string(entry.path()).unwrap();
        assert!(!env.contains(SECRET), "a git call saw the API key:\n{env}");
        assert!(
            env.lines().any(|l| l == "NoNewPrivs:\t1")
                && env
                    .lines()
                    .any(|l| l.starts_with("Seccomp:") && !l.ends_with('0')),
            "a git call ran outside the sandbox:\n{env}"
        );
    }
}
