#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `baton snapshots`, `baton diff` and `baton rollback` on a real run of the real binary
//! against a scripted model: the run journals its snapshots, the listing and diffs show them,
//! a rollback restores one exactly (by `#N` or id prefix) and is refused while the run is
//! running; `--no-snapshots` and a missing git leave the run alone.

mod support;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn script() -> Vec<Turn> {
    vec![
        turn(&[("write_file", json!({"path": "a.txt", "content": "v1\n"}))]),
        turn(&[
            ("write_file", json!({"path": "a.txt", "content": "v2\n"})),
            ("write_file", json!({"path": "dir/b.txt", "content": "b\n"})),
        ]),
        turn(&[("read_file", json!({"path": "a.txt"}))]),
        turn(&[("finish", json!({"summary": "done"}))]),
    ]
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn baton_out(ws: &Path, home: &Path, args: &[&str]) -> Output {
    baton(ws, home).args(args).output().unwrap()
}

fn snapshot_ids(journal: &[Value]) -> Vec<(String, String)> {
    of_type(journal, "snapshot_taken")
        .iter()
        .map(|e| {
            (
                e["snapshot"].as_str().unwrap().to_string(),
                e["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn snapshots_diff_and_rollback_on_a_real_run() {
    let server = ScriptedServer::start(script()).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (ws, home) = (ws.path(), home.path());
    std::fs::write(ws.join("orig.txt"), "original\n").unwrap();
    let out = run_against(&server, ws, home, &["make files"]).await;
    assert_finished(&out);

    let journal = journal(ws, home);
    let run = journal[0]["run_id"].as_str().unwrap().to_string();
    let snaps = snapshot_ids(&journal);
    let reasons: Vec<&str> = snaps.iter().map(|s| s.1.as_str()).collect();
    assert_eq!(reasons, ["run_start", "after_tools", "after_tools"]);

    // The listing: number, short id, reason, files changed since the previous one.
    let out = baton_out(ws, home, &["snapshots"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let listing = text(&out);
    let rows: Vec<Vec<&str>> = listing
        .lines()
        .filter(|l| l.trim_start().starts_with('#') && !l.contains("SNAPSHOT"))
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 3, "{listing}");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row[0], format!("#{}", i + 1), "{listing}");
        assert_eq!(row[1], &snaps[i].0[..12], "{listing}");
        assert_eq!(row[2], snaps[i].1, "{listing}");
    }
    let files: Vec<&str> = rows.iter().map(|r| *r.last().unwrap()).collect();
    assert_eq!(files, ["1", "1", "2"], "{listing}");

    // Diffs: from the first snapshot to now, between two, as a stat.
    let out = baton_out(ws, home, &["diff", &run[..8]]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let patch = text(&out);
    assert!(
        patch.contains("+v2") && patch.contains("dir/b.txt"),
        "{patch}"
    );
    assert!(!patch.contains("orig.txt"), "{patch}");
    let out = baton_out(ws, home, &["diff", "--from", "#2", "--to", "#3"]);
    let patch = text(&out);
    assert!(patch.contains("-v1\n+v2\n"), "{patch}");
    let out = baton_out(ws, home, &["diff", "--stat"]);
    assert!(text(&out).contains("2 files changed"), "{}", text(&out));

    // A person's edits after the run, then a rollback to #2 (after turn 1).
    std::fs::write(ws.join("orig.txt"), "edited by hand\n").unwrap();
    std::fs::write(ws.join("c.txt"), "new\n").unwrap();
    let out = baton_out(ws, home, &["rollback", &run, "--to", "#2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = text(&out);
    assert!(
        report.contains(&snaps[1].0[..12]) && report.contains("(#2)"),
        "{report}"
    );
    assert!(
        report.contains("M a.txt") && report.contains("M orig.txt"),
        "{report}"
    );
    assert!(
        report.contains("- c.txt") && report.contains("- dir/b.txt"),
        "{report}"
    );
    let expect_after_turn_1 = vec![
        ("a.txt".to_string(), b"v1\n".to_vec()),
        ("orig.txt".to_string(), b"original\n".to_vec()),
    ];
    assert_eq!(snapshot_files(ws), expect_after_turn_1);
    assert!(!ws.join("dir").exists(), "emptied directories are removed");

    // By id prefix, back to the end of the run; then to the start.
    let out = baton_out(
        ws,
        home,
        &["rollback", &run[..10], "--to", &snaps[2].0[..9]],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(ws.join("dir/b.txt")).unwrap(),
        "b\n"
    );
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "v2\n");
    let out = baton_out(ws, home, &["rollback", &run, "--to", &snaps[0].0]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        snapshot_files(ws),
        vec![("orig.txt".to_string(), b"original\n".to_vec())]
    );
    // Again: nothing to do.
    let out = baton_out(ws, home, &["rollback", &run, "--to", "#1"]);
    assert!(text(&out).contains("nothing changed"), "{}", text(&out));

    // Bad selectors are usage errors that change nothing.
    for bad in ["#9", "#x", "zzzz", "abc"] {
        let out = baton_out(ws, home, &["rollback", &run, "--to", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        assert!(!stderr(&out).is_empty());
    }
    assert_eq!(snapshot_files(ws).len(), 1);
    // The journal did not change (rollbacks are not journaled yet) and still replays.
    assert_eq!(support::journal(ws, home).len(), journal.len());
    let out = baton_out(ws, home, &["status"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[tokio::test]
async fn rollback_is_refused_while_the_run_is_running() {
    let mut slow = turn(&[("write_file", json!({"path": "x.txt", "content": "x\n"}))]);
    slow.delay = Some(Duration::from_millis(2500));
    let server = ScriptedServer::start(vec![
        turn(&[("write_file", json!({"path": "a.txt", "content": "1\n"}))]),
        slow,
        turn(&[("finish", json!({"summary": "done"}))]),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (ws_path, home_path) = (ws.path().to_path_buf(), home.path().to_path_buf());
    for supervised in [true, false] {
        std::fs::remove_dir_all(state_dir(&ws_path, &home_path).root()).ok();
        let mut cmd = baton(&ws_path, &home_path);
        cmd.args([
            "run",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
            "--json",
        ]);
        if !supervised {
            cmd.arg("--no-supervise");
        }
        cmd.arg("go");
        let (ws2, home2) = (ws_path.clone(), home_path.clone());
        let (refused, child_out) = tokio::task::spawn_blocking(move || {
            let (mut child, mut events) = spawn_json(cmd);
            // Turn 2's answer is held back: the run is live, its first snapshots taken.
            let started = events
                .until(|e| e["type"] == "model_call_started" && e["turn"] == 2)
                .expect("turn 2 started");
            let run = started["run_id"].as_str().unwrap().to_string();
            let refused = baton(&ws2, &home2)
                .args(["rollback", &run, "--to", "#1"])
                .output()
                .unwrap();
            while events.until(|_| true).is_some() {}
            (refused, child.wait().unwrap())
        })
        .await
        .unwrap();
        assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
        assert!(
            stderr(&refused).contains("being run by"),
            "supervised={supervised}: {}",
            stderr(&refused)
        );
        assert!(child_out.success());
        // Nothing was restored: the run's files are all there.
        assert!(ws_path.join("a.txt").exists() && ws_path.join("x.txt").exists());
    }
}

#[tokio::test]
async fn no_snapshots_flag_and_missing_git_leave_the_run_alone() {
    let server = ScriptedServer::start(script()).await;
    // --no-snapshots: no events, no shadow repository.
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = run_against(&server, ws.path(), home.path(), &["--no-snapshots", "go"]).await;
    assert_finished(&out);
    assert!(of_type(&journal(ws.path(), home.path()), "snapshot_taken").is_empty());
    assert!(!state_dir(ws.path(), home.path()).shadow_git().exists());
    let out = baton_out(ws.path(), home.path(), &["snapshots"]);
    assert!(text(&out).contains("has no snapshots"), "{}", text(&out));

    // No git on PATH: the run finishes all the same, with a warning that says what to install.
    let server = ScriptedServer::start(script()).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let empty_path = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.env("PATH", empty_path.path()).args([
        "run",
        "--base-url",
        &server.base_url(),
        "--model",
        "m",
        "go",
    ]);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    assert_finished(&out);
    assert!(stderr(&out).contains("install git"), "{}", stderr(&out));
    assert_eq!(
        stderr(&out).matches("snapshot failed").count(),
        1,
        "said once: {}",
        stderr(&out)
    );
    assert!(of_type(&journal(ws.path(), home.path()), "snapshot_taken").is_empty());
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "v2\n"
    );
    // And `baton diff` without git says the same.
    let out = baton(ws.path(), home.path())
        .env("PATH", empty_path.path())
        .args(["diff"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("install git"), "{}", stderr(&out));
}

/// A person's rollback of a paused run is journaled, and the resumed agent is told about it.
#[tokio::test]
async fn a_rollback_of_a_paused_run_is_journaled_and_the_model_is_told() {
    let server = ScriptedServer::start(script()).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (ws, home) = (ws.path(), home.path());
    let out = run_against(&server, ws, home, &["--max-turns", "2", "make files"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let run = journal(ws, home)[0]["run_id"].as_str().unwrap().to_string();

    let out = baton_out(ws, home, &["rollback", &run[..8], "--to", "#2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "v1\n");
    assert!(!ws.join("dir/b.txt").exists());
    let events = journal(ws, home);
    let started = of_type(&events, "rollback_started");
    assert_eq!(started.len(), 1);
    assert!(started[0].get("task").is_none());
    assert_eq!(of_type(&events, "rollback_finished").len(), 1);

    let requests_before = server.received().len();
    let out = baton_blocking(ws, home, &["resume", "--last", "--max-turns", "10"]).await;
    assert_finished(&out);
    let next = &server.received()[requests_before];
    assert!(
        next.body
            .to_string()
            .contains("A person restored the workspace to snapshot"),
        "{}",
        next.body
    );
}
