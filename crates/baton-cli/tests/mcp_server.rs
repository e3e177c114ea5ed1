#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `baton mcp-server` driven by a client we did not write — the official Python SDK's
//! (`mcp` on PyPI, installed by `scripts/mcp-test-servers.sh`; `tests/mcp_client.py`): list the
//! tools, start a run against a scripted model, stop it during its slow command, resume it, see
//! it finish, read its events (from a sequence number on) and its diff, and get a tool error the
//! client can read for a missing argument.

mod support;

use std::path::PathBuf;

use baton_mcp::testing::python;
use serde_json::{Value, json};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_client_starts_stops_resumes_and_follows_a_run() {
    let server = ScriptedServer::start(vec![
        turn(&[("shell", json!({"command": "sleep 30"}))]),
        turn(&[(
            "write_file",
            json!({"path": "a.txt", "content": "from the run\n"}),
        )]),
        turn(&[("finish", json!({"summary": "wrote a.txt"}))]),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let workspace = ws.path().canonicalize().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let mut client = std::process::Command::new(python());
    client
        .arg(&script)
        .arg(baton_bin())
        .arg(&workspace)
        .arg(server.base_url())
        .arg(home.path());
    let out = tokio::task::spawn_blocking(move || client.output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        out.status.success(),
        "the client failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        seen["tools"],
        json!([
            "resume_run",
            "run_diff",
            "run_events",
            "run_status",
            "start_run",
            "stop_run"
        ])
    );
    assert_eq!(
        seen["read_only"],
        json!(["run_diff", "run_events", "run_status"])
    );
    assert_eq!(seen["after_stop"], "paused", "{seen}");
    assert_eq!(seen["final"], "finished", "{seen}");
    let types: Vec<&str> = seen["event_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        types.contains(&"run_paused") && types.contains(&"run_resumed"),
        "{types:?}"
    );
    assert_eq!(seen["since_seq"], json!([5, 6, 7]));
    assert!(
        seen["diff"].as_str().unwrap().contains("+from the run"),
        "{seen}"
    );
    assert_eq!(seen["missing_argument"]["is_error"], true);
    assert!(
        seen["missing_argument"]["text"]
            .as_str()
            .unwrap()
            .contains("`run_id` is required")
    );
    // The run is the CLI's run: the same journal, finished.
    let events = journal(ws.path(), home.path());
    assert_eq!(of_type(&events, "run_finished").len(), 1);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "from the run\n"
    );
}
