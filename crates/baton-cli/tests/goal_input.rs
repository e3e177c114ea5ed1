#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 16: the goal from stdin (`baton run -`, or piped with none given) and from
//! `--goal-file` (longer than one argument may be), and a goal too big for the context window
//! refused before anything starts.

mod support;

use serde_json::{Value, json};
use std::io::Write;
use std::process::Stdio;
use support::*;

/// `baton run ARGS…` with `stdin` piped in; returns the output.
async fn run_with_stdin(
    server: &ScriptedServer,
    ws: &std::path::Path,
    home: &std::path::Path,
    args: &[&str],
    stdin: &'static str,
) -> std::process::Output {
    let mut cmd = baton(ws, home);
    cmd.args(["run", "--base-url", &server.base_url(), "--model", "m"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    tokio::task::spawn_blocking(move || {
        let mut child = cmd.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

fn started_goal(ws: &std::path::Path, home: &std::path::Path) -> String {
    let events = journal(ws, home);
    let started: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "run_started")
        .collect();
    started[0]["goal"].as_str().unwrap().to_string()
}

fn finish() -> Turn {
    turn(&[("finish", json!({"summary": "done"}))])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_goal_is_read_from_stdin_with_a_dash_or_when_none_is_given() {
    let server = ScriptedServer::start(vec![finish(), finish()]).await;
    for args in [&["-"][..], &[]] {
        let ws = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let out = run_with_stdin(&server, ws.path(), home.path(), args, "Write the answer\n").await;
        assert_finished(&out);
        assert_eq!(
            started_goal(ws.path(), home.path()),
            "Write the answer",
            "{args:?}"
        );
    }
    // Nothing on stdin, no goal: a usage error, nothing started.
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = run_with_stdin(&server, ws.path(), home.path(), &[], "").await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the goal is empty"));
    assert_eq!(server.received().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_file_longer_than_an_argument_reaches_the_model_whole() {
    let server = ScriptedServer::start(vec![finish()]).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    // 150 KiB: more than one argument may hold (128 KiB), so the supervised agent process
    // cannot get it on its command line.
    let goal: String = (0..5000)
        .map(|i| format!("step {i:05}: do the thing well.\n"))
        .collect();
    assert!(goal.len() > 140 * 1024);
    let file = ws.path().join("goal.md");
    std::fs::write(&file, &goal).unwrap();
    let file_arg = file.display().to_string();
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--context-window", "1000000", "--goal-file", &file_arg],
    )
    .await;
    assert_finished(&out);
    assert_eq!(started_goal(ws.path(), home.path()), goal.trim_end());
    let sent = server.received()[0].body.to_string();
    assert!(
        sent.contains("step 04999: do the thing well."),
        "the goal's end was lost"
    );

    // The same goal against a 32k-token window: refused, nothing sent.
    let ws = tempfile::tempdir().unwrap();
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--context-window", "32768", "--goal-file", &file_arg],
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("more than a quarter of the model's 32768-token context window"),
        "{stderr}"
    );
    assert_eq!(server.received().len(), 1);

    // Both a goal and a file: which one? A usage error.
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--goal-file", &file_arg, "x"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
}
