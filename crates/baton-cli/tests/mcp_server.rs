#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `baton mcp-server` driven by a client we did not write — the official Python SDK's
//! (`mcp` on PyPI, installed by `scripts/mcp-test-servers.sh`; `tests/mcp_client.py`): list the
//! tools, start a run against a scripted model, stop it during its slow command, resume it, see
//! it finish, read its events (from a sequence number on) and its diff, and get a tool error the
//! client can read for a missing argument or a base URL of its own. On streamable HTTP: the
//! token on every bind (made once into a private file), rebinding `Host`s refused, and only
//! workspaces the serving user trusted.

mod support;

use std::path::{Path, PathBuf};

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
    // Where the runs' requests go is the serving user's choice: their config file.
    user_config(
        home.path(),
        &format!("base_url = \"{}\"\n", server.base_url()),
    );
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
    // A caller cannot send the serving user's key elsewhere.
    assert_eq!(seen["base_url"]["is_error"], true, "{seen}");
    assert!(
        seen["base_url"]["text"]
            .as_str()
            .unwrap()
            .contains("start_run takes no `base_url`"),
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

fn user_config(home: &Path, text: &str) {
    let dir = home.join(".config/baton");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

/// `baton mcp-server --port P` with `extra` arguments, listening; and its stderr, read to the
/// end once it has stopped (join the handle after SIGTERM).
async fn start_http_server(
    ws: &Path,
    home: &Path,
    extra: &[&str],
) -> (std::process::Child, u16, std::thread::JoinHandle<String>) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = baton(ws, home)
        .args(["mcp-server", "--port", &port.to_string()])
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = server.stderr.take().unwrap();
    let said = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut text).unwrap();
        text
    });
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
    (server, port, said)
}

fn stop(mut server: std::process::Child) {
    let pid = rustix::process::Pid::from_raw(server.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    assert!(server.wait().unwrap().success());
}

/// The SDK's client over HTTP: lists the tools and makes `calls` ([tool, arguments] pairs).
async fn http_client(url: &str, token: &str, calls: Value) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_http_client.py");
    let mut python_client = std::process::Command::new(python());
    python_client
        .arg(&script)
        .arg(url)
        .arg(token)
        .arg(calls.to_string());
    let out = tokio::task::spawn_blocking(move || python_client.output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_server_on_streamable_http_answers_only_with_its_token_and_its_own_host() {
    use std::os::unix::fs::PermissionsExt;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    // No token given, on loopback: one is made, into a file only this user can read.
    let (server, port, said) = start_http_server(ws.path(), home.path(), &[]).await;
    let file = home.path().join(".local/state/baton/mcp-server.token");
    let token = std::fs::read_to_string(&file).unwrap().trim().to_owned();
    assert_eq!(token.len(), 64, "{token}");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let url = format!("http://127.0.0.1:{port}/mcp");
    // No token, a wrong one: refused before MCP is spoken.
    let client = reqwest::Client::new();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let post = |auth: Option<String>, host: Option<&str>| {
        let mut request = client
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .json(&initialize);
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        if let Some(host) = host {
            request = request.header("host", host);
        }
        request.send()
    };
    for auth in [None, Some("Bearer wrong".to_owned())] {
        let response = post(auth.clone(), None).await.unwrap();
        assert_eq!(response.status(), 401, "{auth:?}");
        assert!(response.text().await.unwrap().contains("Bearer"));
    }
    // With the token but addressed by another name (DNS rebinding) or port: refused.
    for host in [
        format!("rebind.evil.example:{port}"),
        "localhost:1".to_owned(),
    ] {
        let rebound = post(Some(format!("Bearer {token}")), Some(&host))
            .await
            .unwrap();
        assert_eq!(rebound.status(), 403, "{host}");
    }
    let own = post(
        Some(format!("Bearer {token}")),
        Some(&format!("localhost:{port}")),
    )
    .await
    .unwrap();
    assert_eq!(own.status(), 200);
    // With it, the SDK's client is served; a workspace nobody trusted is refused.
    let seen = http_client(
        &url,
        &token,
        json!([["run_status", {"workspace": ws.path(), "run_id": "no-such-run"}]]),
    )
    .await;
    assert_eq!(seen["tools"].as_array().unwrap().len(), 6, "{seen}");
    assert_eq!(seen["results"][0]["is_error"], true, "{seen}");
    assert!(
        seen["results"][0]["text"]
            .as_str()
            .unwrap()
            .contains("trust`"),
        "{seen}"
    );
    stop(server);
    let first = said.join().unwrap();
    assert_eq!(first.matches(&token).count(), 1, "printed once: {first}");

    // The next start keeps the token and does not print it.
    let (server, port, said) = start_http_server(ws.path(), home.path(), &[]).await;
    let seen = http_client(&format!("http://127.0.0.1:{port}/mcp"), &token, json!([])).await;
    assert_eq!(seen["tools"].as_array().unwrap().len(), 6, "{seen}");
    stop(server);
    let second = said.join().unwrap();
    assert!(!second.contains(&token), "{second}");
    assert!(second.contains(&file.display().to_string()), "{second}");

    // A token file another user could have read is refused.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    let open = baton(ws.path(), home.path())
        .args(["mcp-server", "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(open.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&open.stderr).contains("mode 0640"),
        "{}",
        String::from_utf8_lossy(&open.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_start_run_works_only_in_a_workspace_the_serving_user_trusted() {
    let server = ScriptedServer::start(vec![
        turn(&[(
            "write_file",
            json!({"path": "b.txt", "content": "trusted\n"}),
        )]),
        turn(&[("finish", json!({"summary": "wrote b.txt"}))]),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    user_config(
        home.path(),
        &format!("base_url = \"{}\"\n", server.base_url()),
    );
    let workspace = ws.path().canonicalize().unwrap();
    std::fs::create_dir_all(workspace.join(".baton")).unwrap();
    std::fs::write(
        workspace.join(".baton/config.toml"),
        "response_mode = \"streaming\"\n",
    )
    .unwrap();
    let (mcp, port, _said) =
        start_http_server(&workspace, home.path(), &["--token", "tok-4f9a2c"]).await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    let start =
        json!([["start_run", {"goal": "write b.txt", "workspace": workspace, "model": "m"}]]);

    // Not trusted: refused, naming `baton trust`; nothing ran.
    let seen = http_client(&url, "tok-4f9a2c", start.clone()).await;
    let refusal = &seen["results"][0];
    assert_eq!(refusal["is_error"], true, "{seen}");
    let text = refusal["text"].as_str().unwrap();
    assert!(
        text.contains("not trusted")
            && text.contains(&format!("baton --workspace {} trust", workspace.display())),
        "{text}"
    );
    assert_eq!(server.received().len(), 0, "no run asked the model");

    // Trusted by the serving user: the run starts and finishes.
    let trusted = baton(&workspace, home.path())
        .arg("trust")
        .output()
        .unwrap();
    assert!(
        trusted.status.success(),
        "{}",
        String::from_utf8_lossy(&trusted.stderr)
    );
    let seen = http_client(&url, "tok-4f9a2c", start.clone()).await;
    assert_eq!(seen["results"][0]["is_error"], false, "{seen}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !workspace.join("b.txt").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the run never wrote b.txt"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        std::fs::read_to_string(workspace.join("b.txt")).unwrap(),
        "trusted\n"
    );

    // Its files changed since `baton trust`: refused again; so is a plan from elsewhere.
    std::fs::write(
        workspace.join(".baton/config.toml"),
        "response_mode = \"whole\"\n",
    )
    .unwrap();
    let outside = tempfile::NamedTempFile::new().unwrap();
    let seen = http_client(
        &url,
        "tok-4f9a2c",
        json!([
            ["start_run", {"goal": "again", "workspace": workspace}],
            ["resume_run", {"workspace": workspace, "run_id": "x"}],
        ]),
    )
    .await;
    for result in seen["results"].as_array().unwrap() {
        assert_eq!(result["is_error"], true, "{seen}");
        assert!(
            result["text"].as_str().unwrap().contains("trust`"),
            "{seen}"
        );
    }
    let trusted = baton(&workspace, home.path())
        .arg("trust")
        .output()
        .unwrap();
    assert!(trusted.status.success());
    let seen = http_client(
        &url,
        "tok-4f9a2c",
        json!([["start_run", {"goal": "x", "workspace": workspace, "plan": outside.path()}]]),
    )
    .await;
    assert_eq!(seen["results"][0]["is_error"], true, "{seen}");
    assert!(
        seen["results"][0]["text"]
            .as_str()
            .unwrap()
            .contains("outside the workspace"),
        "{seen}"
    );
    stop(mcp);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_loopback_the_names_given_with_allow_host_are_answered_and_no_others() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (server, port, _said) = start_http_server(
        ws.path(),
        home.path(),
        &[
            "--bind",
            "0.0.0.0",
            "--token",
            "tok-7",
            "--allow-host",
            "mcp.example.org",
        ],
    )
    .await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let client = reqwest::Client::new();
    for (host, status) in [
        ("mcp.example.org".to_owned(), 200),
        (format!("127.0.0.1:{port}"), 200),
        (format!("rebind.evil.example:{port}"), 403),
    ] {
        let response = client
            .post(format!("http://127.0.0.1:{port}/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("host", &host)
            .bearer_auth("tok-7")
            .json(&initialize)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), status, "{host}");
    }
    stop(server);
}
