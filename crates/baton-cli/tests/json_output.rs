#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 16: `status`, `ls` and `cost` print JSON in the shapes docs/json.md documents, and a
//! pause says whether a person must act (`needs_person`).

mod support;

use serde_json::{Value, json};
use support::*;

async fn json_of(ws: &std::path::Path, home: &std::path::Path, args: &[&str]) -> Value {
    let out = baton_blocking(ws, home, args).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?} is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_ls_and_cost_print_their_documented_shapes() {
    // The model keeps ending with the same text (it is nudged once, then the run pauses).
    let server = ScriptedServer::start_repeating_last(vec![
        turn(&[("list_dir", json!({}))]),
        turn(&[("list_dir", json!({}))]),
        text_turn("I am done."),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    // A limit: max_turns, no person needed.
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--max-turns", "1", "look"],
    )
    .await;
    assert_eq!(out.status.code(), Some(3));
    let status = json_of(ws.path(), home.path(), &["status", "--json"]).await;
    let run = &status["run"];
    assert_eq!(run["status"], "paused");
    assert_eq!(run["pause"]["reason"], "max_turns");
    assert_eq!(run["pause"]["needs_person"], false);
    assert_eq!(run["turns"], 1);
    for key in [
        "id",
        "goal",
        "workspace",
        "model",
        "tokens",
        "cost",
        "event_count",
        "created_at",
        "running_ms",
        "children",
        "depth",
    ] {
        assert!(!run[key].is_null(), "status.run.{key} missing: {run}");
    }
    assert!(run["running_ms"].is_u64() && run["children"].is_array());
    assert_eq!(run["cost"]["text"], "unknown");
    assert!(status["tasks"].is_object() && status["turns"].is_array());

    // A text reply with --on-text-reply pause: a person decides.
    let out = baton_blocking(
        ws.path(),
        home.path(),
        &[
            "resume",
            "--last",
            "--max-turns",
            "10",
            "--on-text-reply",
            "pause",
        ],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = json_of(ws.path(), home.path(), &["status", "--json"]).await;
    assert_eq!(status["run"]["pause"]["reason"], "text_reply");
    assert_eq!(status["run"]["pause"]["needs_person"], true);

    let ls = json_of(ws.path(), home.path(), &["ls", "--json"]).await;
    let runs = ls.as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["id"], status["run"]["id"]);
    assert_eq!(runs[0]["status"], "paused");

    let cost = json_of(ws.path(), home.path(), &["cost", "--json"]).await;
    let calls = cost["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 4);
    for call in calls {
        for key in ["seq", "turn", "kind", "model", "usage", "duration_ms"] {
            assert!(!call[key].is_null(), "cost.calls[].{key} missing: {call}");
        }
        assert!(
            call["cost_usd"].is_null(),
            "an unpriced call has no cost: {call}"
        );
    }
    assert_eq!(cost["cost"]["unknown_calls"], 4);
    // The same totals as `status` reports.
    assert_eq!(cost["tokens"], status["run"]["tokens"]);
    assert!(cost["tokens"]["input"].as_u64().unwrap() >= 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_snapshots_doctor_and_the_last_message() {
    let server = ScriptedServer::start(vec![
        turn(&[("write_file", json!({"path": "a.txt", "content": "1\n"}))]),
        turn(&[("finish", json!({"summary": "wrote a.txt"}))]),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let last = ws.path().join("last.txt");
    let last_arg = last.display().to_string();
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--json", "--output-last-message", &last_arg, "write"],
    )
    .await;
    assert_finished(&out);
    assert_eq!(std::fs::read_to_string(&last).unwrap(), "wrote a.txt\n");
    // The stream ends with the totals.
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let totals: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(totals["type"], "run_totals");
    assert_eq!(
        (totals["end"].as_str(), totals["turns"].as_u64()),
        (Some("finished"), Some(2))
    );
    assert_eq!(totals["summary"], "wrote a.txt");
    assert!(
        totals["cost_usd"].is_null(),
        "unpriced: unknown, not 0: {totals}"
    );

    let plan = json_of(ws.path(), home.path(), &["plan", "--json"]).await;
    assert!(
        plan["run"].is_string() && plan["tasks"].is_object(),
        "{plan}"
    );
    let snapshots = json_of(ws.path(), home.path(), &["snapshots", "--json"]).await;
    let list = snapshots["snapshots"].as_array().unwrap();
    assert!(list.len() >= 2, "{snapshots}");
    assert_eq!(list[0]["reason"], "run_start");
    assert_eq!(list[0]["number"], 1);
    assert!(
        list[1]["files_changed"].as_u64().unwrap() >= 1,
        "{snapshots}"
    );

    let doctor = baton(ws.path(), home.path())
        .args([
            "doctor",
            "--json",
            "--base-url",
            &server.base_url(),
            "--model",
            "m",
        ])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&doctor.stdout).unwrap();
    assert_eq!(report["ok"], doctor.status.code() == Some(0));
    assert!(
        report["model"].as_array().unwrap()[0]
            .as_str()
            .unwrap()
            .starts_with("ok:")
            || report["ok"] == false
    );
    assert!(
        report["sandbox"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().starts_with("sandbox: "))
    );
}
