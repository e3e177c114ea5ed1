#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Ctrl-C / SIGTERM pause a run cleanly (exit 3, journaled) and `resume` finishes it.

mod support;

use std::time::Duration;

use serde_json::json;
use support::*;

fn signal(pid: u32, sig: &str) {
    let status = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_and_sigterm_pause_cleanly_and_resume_finishes() {
    let mut slow = turn(&[("shell", json!({"command": "sleep 30"}))]);
    slow.delay = Some(Duration::from_secs(3));
    let server =
        ScriptedServer::start(vec![slow, turn(&[("finish", json!({"summary": "ok"}))])]).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.args([
        "run",
        "--base-url",
        &server.base_url(),
        "--model",
        "m",
        "--json",
        "x",
    ]);
    let (w, h) = (ws.path().to_path_buf(), home.path().to_path_buf());
    let (first, second, last) = tokio::task::spawn_blocking(move || {
        // SIGINT while the model request is in flight.
        let (child, mut events) = spawn_json(cmd);
        events.until(|e| e["type"] == "model_call_started").unwrap();
        signal(child.id(), "-INT");
        let paused = events.until(|e| e["type"] == "run_paused");
        let first = child.wait_with_output().unwrap();
        assert!(paused.is_some(), "no run_paused event after SIGINT");
        // SIGTERM while `sleep 30` runs.
        let mut resume = baton(&w, &h);
        resume.args(["resume", "--last", "--json"]);
        let (child, mut events) = spawn_json(resume);
        events.until(|e| e["type"] == "tool_call_started").unwrap();
        signal(child.id(), "-TERM");
        let paused = events.until(|e| e["type"] == "run_paused");
        let second = child.wait_with_output().unwrap();
        assert!(paused.is_some(), "no run_paused event after SIGTERM");
        let mut resume = baton(&w, &h);
        resume.args(["resume", "--last"]);
        (first, second, resume.output().unwrap())
    })
    .await
    .unwrap();
    assert_eq!(first.status.code(), Some(3));
    assert_eq!(second.status.code(), Some(3));
    assert_eq!(
        last.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&last.stderr)
    );

    let journal = journal(ws.path(), home.path());
    let paused = of_type(&journal, "run_paused");
    assert_eq!(paused.len(), 2);
    assert!(paused.iter().all(|p| p["reason"] == "interrupted"));
    let shell = of_type(&journal, "tool_call_finished")[0];
    assert_eq!(shell["result"]["outcome"], "interrupted");
    assert!(shell["duration_ms"].as_u64().unwrap() < 30_000);
}
