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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_server_on_streamable_http_answers_only_with_its_token() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = baton(ws.path(), home.path())
        .args([
            "mcp-server",
            "--port",
            &port.to_string(),
            "--token",
            "tok-4f9a2c",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "mcp-server never listened"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let url = format!("http://127.0.0.1:{port}/mcp");
    // No token, a wrong one: refused before MCP is spoken.
    let client = reqwest::Client::new();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    for auth in [None, Some("Bearer wrong")] {
        let mut request = client
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        assert_eq!(request.send().await.unwrap().status(), 401, "{auth:?}");
    }
    // With it, the SDK's client is served.
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_http_client.py");
    let mut python_client = std::process::Command::new(python());
    python_client
        .arg(&script)
        .arg(&url)
        .arg("tok-4f9a2c")
        .arg(ws.path());
    let out = tokio::task::spawn_blocking(move || python_client.output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["tools"].as_array().unwrap().len(), 6, "{seen}");
    assert_eq!(seen["is_error"], true, "{seen}");
    assert!(
        seen["text"].as_str().unwrap().contains("baton status"),
        "{seen}"
    );
    // Beyond loopback only with a token.
    let open = baton(ws.path(), home.path())
        .args(["mcp-server", "--port", "0", "--bind", "0.0.0.0"])
        .env_remove("BATON_MCP_SERVER_TOKEN")
        .output()
        .unwrap();
    assert_eq!(open.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&open.stderr).contains("--token"));
    // SIGTERM ends it cleanly.
    let pid = rustix::process::Pid::from_raw(server.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    assert!(server.wait().unwrap().success());
}
