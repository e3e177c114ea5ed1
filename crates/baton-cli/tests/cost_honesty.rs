#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 16: an unknown cost is never shown as $0 — not on the terminal, in `status` or in
//! `cost` — and a USD budget on a model without a price is refused before anything starts.

mod support;

use serde_json::json;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_usd_budget_on_an_unpriced_model_is_refused_before_anything_runs() {
    let server = ScriptedServer::start(vec![turn(&[("finish", json!({"summary": "x"}))])]).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    for flag in ["--budget-usd", "--task-budget-usd"] {
        let out = run_against(&server, ws.path(), home.path(), &[flag, "1", "go"]).await;
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("[prices.\"m\"]") && stderr.contains("--budget-tokens"),
            "{flag}: {stderr}"
        );
    }
    assert!(server.received().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpriced_run_says_unknown_and_never_zero_dollars() {
    let server = ScriptedServer::start(vec![
        turn(&[("list_dir", json!({}))]),
        turn(&[("finish", json!({"summary": "looked"}))]),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = run_against(&server, ws.path(), home.path(), &["look around"]).await;
    assert_finished(&out);
    let terminal = String::from_utf8_lossy(&out.stderr).into_owned();
    let status = baton_blocking(ws.path(), home.path(), &["status"]).await;
    let cost = baton_blocking(ws.path(), home.path(), &["cost"]).await;
    // Not a terminal: no live status line, but no $0 anywhere either.
    assert!(!terminal.contains("$0.0000"), "{terminal}");
    for (what, text) in [
        (
            "status",
            String::from_utf8_lossy(&status.stdout).into_owned(),
        ),
        ("cost", String::from_utf8_lossy(&cost.stdout).into_owned()),
    ] {
        assert!(!text.contains("$0.0000"), "{what} shows $0: {text}");
        assert!(
            text.contains("unknown"),
            "{what} does not say unknown: {text}"
        );
    }
}
