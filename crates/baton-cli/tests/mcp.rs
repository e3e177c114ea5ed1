#![allow(clippy::unwrap_used, clippy::expect_used)]
//! MCP servers in real runs: the real binary (supervised, so the servers reach the agent process
//! as data) against a scripted model that calls the tools of the protocol's reference server
//! from npm (installed by `scripts/mcp-test-servers.sh`), run under baton's sandbox. The tools
//! are offered and journaled at the start with their schemas and effects, their results reach
//! the journal and the model, a server that cannot start is reported and left out while the
//! run goes on, and `baton mcp list` / `baton mcp call` show and call them.

mod support;

use std::path::PathBuf;

use baton_mcp::testing::everything_js;
use serde_json::{Value, json};
use support::*;

fn script() -> Vec<Turn> {
    vec![
        turn(&[("mcp__ev__echo", json!({"message": "from the model"}))]),
        turn(&[("mcp__ev__get-sum", json!({"a": 20, "b": 22}))]),
        turn(&[("finish", json!({"summary": "asked the MCP server twice"}))]),
    ]
}

fn tool_results(events: &[Value]) -> Vec<String> {
    of_type(events, "tool_call_finished")
        .iter()
        .map(|e| e["result"]["content"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_calls_an_mcp_servers_tools_and_journals_them() {
    let server = ScriptedServer::start(script()).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mcp = format!("ev=node {} stdio", everything_js());
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--mcp", &mcp, "use the server"],
    )
    .await;
    assert_finished(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("mcp server ev (stdio"), "{stderr}");

    let events = journal(ws.path(), home.path());
    // Offered and journaled at the start, after the built-in tools, with schema and effect.
    let tools = of_type(&events, "run_started")[0]["tools"]
        .as_array()
        .unwrap()
        .clone();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let echo_at = names.iter().position(|n| *n == "mcp__ev__echo").unwrap();
    assert!(
        echo_at > names.iter().position(|n| *n == "finish").unwrap(),
        "{names:?}"
    );
    assert_eq!(tools[echo_at]["effect"], "read_only");
    assert_eq!(
        tools[echo_at]["parameters"]["properties"]["message"]["type"],
        "string"
    );
    // The model was offered them.
    let offered = &server.received()[0].body["tools"];
    assert!(
        offered
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "mcp__ev__get-sum"),
        "{offered}"
    );
    // The server's start, with its version, is journaled too.
    let started = of_type(&events, "mcp_server_started");
    assert_eq!(started.len(), 1, "{started:?}");
    assert_eq!(started[0]["server"], "ev");
    assert!(
        started[0]["version"]
            .as_str()
            .unwrap()
            .contains("everything")
    );
    assert!(started[0]["tools"].to_string().contains("mcp__ev__echo"));
    let results = tool_results(&events);
    assert_eq!(results[0], "Echo: from the model");
    assert!(results[1].contains("42"), "{}", results[1]);
    // And read them back.
    let second = &server.received()[1].body;
    assert!(second.to_string().contains("Echo: from the model"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_is_reported_and_the_run_goes_on() {
    let server = ScriptedServer::start(script()).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let good = format!("ev=node {} stdio", everything_js());
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &[
            "--mcp",
            "broken=/nonexistent/mcp-server",
            "--mcp",
            &good,
            "use the server",
        ],
    )
    .await;
    assert_finished(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("mcp server broken failed"), "{stderr}");
    let events = journal(ws.path(), home.path());
    assert_eq!(tool_results(&events)[0], "Echo: from the model");
    let tools = of_type(&events, "run_started")[0]["tools"].to_string();
    assert!(!tools.contains("mcp__broken__"), "{tools}");
    // Journaled once, and shown by `status` (text and JSON) and `logs`.
    let failed = of_type(&events, "mcp_server_failed");
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["server"], "broken");
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/mcp-server")
    );
    let status = baton_blocking(ws.path(), home.path(), &["status"]).await;
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("server broken did not start"), "{status}");
    let json = baton_blocking(ws.path(), home.path(), &["status", "--json"]).await;
    let json: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["run"]["mcp_failures"][0]["server"], "broken", "{json}");
    let logs = baton_blocking(ws.path(), home.path(), &["logs"]).await;
    assert!(String::from_utf8_lossy(&logs.stdout).contains("MCP server broken did not start"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_list_and_call_use_the_configured_servers() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    write_user_config(
        home.path(),
        &format!(
            "[mcp_servers.ev]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\nread_only_tools = [\"toggle-simulated-logging\"]\n\n\
             [mcp_servers.gone]\ncommand = \"/nonexistent/mcp-server\"\n",
            everything_js()
        ),
    );
    let out = baton_blocking(ws.path(), home.path(), &["mcp", "list", "--json"]).await;
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    // A server that failed makes the listing exit 1 (so scripts notice), but it is listed.
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(listed[0]["name"], "ev");
    assert_eq!(listed[0]["status"], "ready");
    let tools = listed[0]["tools"].as_array().unwrap();
    let effect = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["effect"].as_str().unwrap().to_string())
    };
    assert_eq!(effect("mcp__ev__echo").as_deref(), Some("read_only"));
    assert_eq!(
        effect("mcp__ev__gzip-file-as-resource").as_deref(),
        Some("mutating")
    );
    // The configuration overrides the annotation.
    assert_eq!(
        effect("mcp__ev__toggle-simulated-logging").as_deref(),
        Some("read_only")
    );
    assert_eq!(listed[1]["name"], "gone");
    assert_eq!(listed[1]["status"], "failed");
    assert!(listed[1]["error"].as_str().unwrap().contains("\"gone\""));

    let out = baton_blocking(
        ws.path(),
        home.path(),
        &["mcp", "call", "ev", "echo", r#"{"message": "debugging"}"#],
    )
    .await;
    assert_finished(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "Echo: debugging"
    );
    let out = baton_blocking(
        ws.path(),
        home.path(),
        &["mcp", "call", "ev", "no-such-tool"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no tool \"no-such-tool\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misconfigured_server_is_a_usage_error_naming_it() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    write_user_config(
        home.path(),
        "[mcp_servers.docs]\ncommand = \"x\"\nurl = \"https://mcp.example/mcp\"\n",
    );
    let out = baton_blocking(ws.path(), home.path(), &["mcp", "list"]).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("\"docs\"") && stderr.contains("not both"),
        "{stderr}"
    );
    // --no-mcp runs without them (nothing is started, nothing to misconfigure).
    let out = baton_blocking(ws.path(), home.path(), &["mcp", "list", "--no-mcp"]).await;
    assert_finished(&out);
}

/// The failure server of `crates/baton-mcp/tests/servers/failures.py` on the SDK's Python,
/// copied into `workspace`: the sandbox, which the server runs in, shows it the workspace but
/// not a checkout under /tmp. `settings`: the script's extra `NAME=VALUE` arguments.
fn failure_server_config(calls: &std::path::Path, settings: &[&str]) -> String {
    let workspace = calls.parent().unwrap();
    let script = workspace.join("failures.py");
    std::fs::copy(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../baton-mcp/tests/servers/failures.py"),
        &script,
    )
    .unwrap();
    let mut args = vec![
        format!("{:?}", script.display().to_string()),
        format!("{:?}", format!("MCP_CALLS_FILE={}", calls.display())),
    ];
    args.extend(settings.iter().map(|s| format!("{s:?}")));
    format!(
        "[mcp_servers.f]\ncommand = {:?}\nargs = [{}]\n",
        baton_mcp::testing::python().display().to_string(),
        args.join(", ")
    )
}

fn calls_of(calls: &std::path::Path, tool: &str) -> usize {
    std::fs::read_to_string(calls)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.split(' ').next() == Some(tool))
        .count()
}

/// SIGKILLs the agent (`--no-supervise`: the process that holds the MCP session) once the server
/// has recorded `n` calls of `tool` — the call is in flight, its intent journaled.
fn kill_when_called(mut cmd: std::process::Command, calls: &std::path::Path, tool: &str, n: usize) {
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while calls_of(calls, tool) < n {
        assert!(
            child.try_wait().unwrap().is_none(),
            "baton ended before calling {tool}"
        );
        assert!(
            std::time::Instant::now() < deadline,
            "{tool} was never called"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_call_a_read_only_mcp_call_is_rerun_and_a_mutating_one_reported_interrupted() {
    let server = ScriptedServer::start(vec![
        turn(&[("mcp__f__lookup", json!({"key": "k"}))]),
        turn(&[("mcp__f__write_note", json!({"text": "n"}))]),
        turn(&[("finish", json!({"summary": "done"}))]),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    // Inside the workspace: the sandboxed server may write there.
    let calls = ws.path().join("calls.txt");
    write_user_config(
        home.path(),
        &failure_server_config(&calls, &["MCP_SLOW_FIRST=lookup=60,write_note=60"]),
    );
    let (w, h, c, url) = (
        ws.path().to_path_buf(),
        home.path().to_path_buf(),
        calls.clone(),
        server.base_url(),
    );
    let out = tokio::task::spawn_blocking(move || {
        // 1. Killed during the read-only lookup.
        let mut run = baton(&w, &h);
        run.args([
            "run",
            "--no-supervise",
            "--base-url",
            &url,
            "--model",
            "m",
            "use f",
        ]);
        kill_when_called(run, &c, "lookup", 1);
        // 2. Resumed: the lookup is called again; killed during the mutating write.
        let mut resume = baton(&w, &h);
        resume.args(["resume", "--last", "--no-supervise"]);
        kill_when_called(resume, &c, "write_note", 1);
        assert_eq!(
            calls_of(&c, "lookup"),
            2,
            "the read-only call was not re-run"
        );
        // 3. Resumed again: the write is not sent again; the run finishes.
        let mut resume = baton(&w, &h);
        resume.args(["resume", "--last", "--no-supervise"]);
        resume.output().unwrap()
    })
    .await
    .unwrap();
    assert_finished(&out);
    assert_eq!(calls_of(&calls, "lookup"), 2);
    assert_eq!(
        calls_of(&calls, "write_note"),
        1,
        "the mutating call was sent twice"
    );

    let events = journal(ws.path(), home.path());
    let finished: Vec<&Value> = of_type(&events, "tool_call_finished");
    let lookup = finished
        .iter()
        .find(|e| e["result"]["content"] == "value of k")
        .expect("the re-run lookup's result is journaled");
    assert_eq!(lookup["result"]["outcome"], "success");
    let interrupted: Vec<&&Value> = finished
        .iter()
        .filter(|e| e["result"]["outcome"] == "interrupted")
        .collect();
    assert_eq!(interrupted.len(), 1, "{finished:?}");
    // The model read that the write was interrupted.
    let last = server.received().last().unwrap().body.to_string();
    assert!(last.contains("interrupted"), "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_run_keeps_its_journaled_tools_and_reports_the_servers_changes() {
    let server = ScriptedServer::start(vec![
        turn(&[("mcp__f__lookup", json!({"key": "k"}))]),
        turn(&[("finish", json!({"summary": "done"}))]),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let calls = ws.path().join("calls.txt");
    write_user_config(home.path(), &failure_server_config(&calls, &[]));
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--max-turns", "1", "use f"],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Between the runs the server gained a tool.
    write_user_config(
        home.path(),
        &failure_server_config(&calls, &["MCP_EXTRA_TOOL=1"]),
    );
    let out = baton_blocking(
        ws.path(),
        home.path(),
        &["resume", "--last", "--max-turns", "5"],
    )
    .await;
    assert_finished(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("mcp tool mcp__f__extra is new since the run started"),
        "{stderr}"
    );
    // The model was never offered it: the run's tools are the journaled ones.
    let last = server.received().last().unwrap().body["tools"].to_string();
    assert!(!last.contains("mcp__f__extra"), "{last}");
    assert!(last.contains("mcp__f__lookup"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_runs_in_the_sandbox_like_a_command() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let calls = ws.path().join("calls.txt");
    write_user_config(home.path(), &failure_server_config(&calls, &[]));
    let touch = |path: std::path::PathBuf| {
        let args = json!({ "path": path }).to_string();
        let (ws, home) = (ws.path().to_path_buf(), home.path().to_path_buf());
        async move { baton_blocking(&ws, &home, &["mcp", "call", "f", "touch", &args]).await }
    };
    // Inside the workspace: allowed.
    let inside = ws.path().join("made-by-the-server.txt");
    let out = touch(inside.clone()).await;
    assert_finished(&out);
    assert!(inside.is_file());
    // Outside it: refused by the sandbox, as the server's own error. (Not under /tmp, which the
    // sandbox replaces with a private directory that a write would land in harmlessly: beside
    // the test servers, outside any checkout.)
    let elsewhere = tempfile::tempdir_in(baton_mcp::testing::servers_dir()).unwrap();
    let outside = elsewhere.path().join("escaped.txt");
    let out = touch(outside.clone()).await;
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("cannot create"));
    assert!(!outside.exists(), "the server wrote outside the workspace");
    // With `sandbox = "full-access"` the same call goes through: the refusal was the sandbox's.
    write_user_config(
        home.path(),
        &format!(
            "{}sandbox = \"full-access\"\n",
            failure_server_config(&calls, &[])
        ),
    );
    let out = touch(outside.clone()).await;
    assert_finished(&out);
    assert!(outside.is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_starts_every_configured_server_and_says_what_failed() {
    let model = ScriptedServer::start_repeating_last(vec![text_turn("ok")]).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    write_user_config(
        home.path(),
        &format!(
            "[mcp_servers.ev]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n\n\
             [mcp_servers.gone]\ncommand = \"/nonexistent/mcp-server\"\n",
            everything_js()
        ),
    );
    let url = model.base_url();
    let args = ["doctor", "--json", "--base-url", &url, "--model", "m"];
    let out = baton_blocking(ws.path(), home.path(), &args).await;
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{report}");
    assert_eq!(report["ok"], false);
    let mcp = report["mcp"].to_string();
    assert!(mcp.contains("mcp server ev (stdio"), "{mcp}");
    assert!(mcp.contains("mcp server gone failed"), "{mcp}");
    assert!(mcp.contains("/nonexistent/mcp-server"), "{mcp}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_a_failing_server_echoes_is_redacted_everywhere() {
    let server = ScriptedServer::start(vec![turn(&[("finish", json!({"summary": "done"}))])]).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    // A server that prints the value it was given, then dies (a name no marker calls secret).
    write_user_config(
        home.path(),
        "[mcp_servers.leaky]\ncommand = \"sh\"\nargs = [\"-c\", \"echo started with $LEAKY_VALUE >&2; exit 1\"]\nenv = [\"LEAKY_VALUE\"]\n",
    );
    let secret = "v4lue-9b1e7f3a";
    let mut list = baton(ws.path(), home.path());
    list.env("LEAKY_VALUE", secret)
        .args(["mcp", "list", "--json"]);
    let out = tokio::task::spawn_blocking(move || list.output())
        .await
        .unwrap()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("started with"),
        "the stderr was not shown: {text}"
    );
    assert!(!text.contains(secret), "{text}");

    let mut run = baton(ws.path(), home.path());
    run.env("LEAKY_VALUE", secret).args([
        "run",
        "--base-url",
        &server.base_url(),
        "--model",
        "m",
        "go",
    ]);
    let out = tokio::task::spawn_blocking(move || run.output())
        .await
        .unwrap()
        .unwrap();
    assert_finished(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("mcp server leaky failed"), "{stderr}");
    assert!(!stderr.contains(secret), "{stderr}");
    let events = journal(ws.path(), home.path());
    let failed = of_type(&events, "mcp_server_failed");
    assert!(
        failed[0]["error"]
            .as_str()
            .unwrap()
            .contains("started with")
    );
    assert!(!serde_json::to_string(&events).unwrap().contains(secret));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_choice_may_name_an_mcp_tool_and_an_unknown_one_is_refused_before_the_run() {
    let server = ScriptedServer::start(script()).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mcp = format!("ev=node {} stdio", everything_js());
    // Not among the standard tools: only the engine, with the server's tools, knows it.
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &[
            "--mcp",
            &mcp,
            "--tool-choice",
            "mcp__ev__echo",
            "use the server",
        ],
    )
    .await;
    assert_finished(&out);
    let first = &server.received()[0].body;
    assert_eq!(
        first["tool_choice"]["function"]["name"], "mcp__ev__echo",
        "{first}"
    );

    let sent = server.received().len();
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--mcp", &mcp, "--tool-choice", "mcp__ev__launch", "again"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("mcp__ev__launch") && stderr.contains("mcp__ev__get-sum"),
        "the refusal names the choice and the tools there are: {stderr}"
    );
    assert_eq!(
        server.received().len(),
        sent,
        "nothing was sent to the model"
    );
    let store = open_journal(ws.path(), home.path()).await;
    let runs = baton_store::Store::list_runs(&store).await.unwrap();
    assert_eq!(runs.len(), 1, "no second run was created: {runs:?}");
}
