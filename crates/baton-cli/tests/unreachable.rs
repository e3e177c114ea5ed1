#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 16: a wrong base URL cost 128 seconds (ten retries, then "circuit breaker open"). A
//! first model call that cannot connect now gets two quick retries and then pauses with reason
//! `unreachable`, naming the URL and what to check.

mod support;

use serde_json::Value;
use support::*;

/// A loopback URL nothing listens on.
fn closed_url() -> String {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", closed.local_addr().unwrap());
    drop(closed);
    url
}

#[test]
fn a_first_call_that_cannot_connect_pauses_at_once_with_reason_unreachable() {
    let url = closed_url();
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let out = baton(ws.path(), home.path())
        .args(["run", "--base-url", &url, "--model", "m", "--json", "x"])
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    eprintln!("paused after {elapsed:?}");
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let failed: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "model_call_failed")
        .collect();
    assert_eq!(failed.len(), 3, "two quick retries: {failed:?}");
    assert!(failed.iter().all(|e| e["class"] == "unreachable"));
    // The waits are what bound the time: 0.5 s and 1 s, then no more.
    let waits: Vec<u64> = failed
        .iter()
        .filter_map(|e| e["retry_in_ms"].as_u64())
        .collect();
    assert_eq!(waits, [500, 1000]);
    assert!(failed[2]["retry_in_ms"].is_null());
    let paused: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "run_paused")
        .collect();
    assert_eq!(paused.len(), 1);
    assert_eq!(paused[0]["reason"], "unreachable");
    let detail = paused[0]["detail"].as_str().unwrap();
    assert!(
        detail.contains(&url) && detail.contains("baton doctor"),
        "{detail}"
    );

    // `status --json` says a person must act.
    let status = baton(ws.path(), home.path())
        .args(["status", "--json"])
        .output()
        .unwrap();
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["run"]["pause"]["needs_person"], true);
}

/// `resume --base-url` moves the run to an endpoint that never answered it: its first call
/// there fails fast too, although the run's earlier server had answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_moved_to_an_unreachable_url_pauses_at_once_too() {
    let server = ScriptedServer::start(vec![turn(&[(
        "shell",
        serde_json::json!({"command": "true"}),
    )])])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let first = baton_blocking(
        ws.path(),
        home.path(),
        &[
            "run",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
            "--max-turns",
            "1",
            "x",
        ],
    )
    .await;
    assert_eq!(first.status.code(), Some(3), "paused at the turn limit");
    let url = closed_url();
    let started = std::time::Instant::now();
    let out = baton_blocking(
        ws.path(),
        home.path(),
        &[
            "resume",
            "--last",
            "--base-url",
            &url,
            "--max-turns",
            "5",
            "--json",
        ],
    )
    .await;
    eprintln!("paused after {:?}", started.elapsed());
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = journal(ws.path(), home.path());
    let resumed = events
        .iter()
        .position(|e| e["type"] == "run_resumed")
        .unwrap();
    let after = &events[resumed..];
    let failed = of_type(after, "model_call_failed");
    assert_eq!(failed.len(), 3, "two quick retries: {failed:?}");
    let paused = of_type(after, "run_paused");
    assert_eq!(paused[0]["reason"], "unreachable");
    assert!(paused[0]["detail"].as_str().unwrap().contains(&url));
}
