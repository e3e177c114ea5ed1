//! baton's MCP client against servers no one on this team wrote: the protocol's reference
//! servers from npm (`@modelcontextprotocol/server-everything` on stdio and on streamable HTTP,
//! `@modelcontextprotocol/server-filesystem` on stdio), installed by
//! `scripts/mcp-test-servers.sh`; and the failures a real server can have at start-up (a
//! program that does not exist, one that exits, one that never answers), each bounded and
//! reported with the server's name.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::{ToolEffect, ToolOutcome};
use baton_mcp::testing::{everything_js, filesystem_js};
use baton_mcp::{
    LaunchContext, McpError, McpServerConfig, ServerSpec, ServerStatus, start_servers,
};
use baton_tools::{ExecEnv, Tool, ToolContext, Workspace};

fn stdio(name: &str, command: &str, args: &[&str], startup_secs: u64) -> ServerSpec {
    ServerSpec::new(
        name,
        &McpServerConfig {
            command: Some(command.into()),
            args: args.iter().map(|a| a.to_string()).collect(),
            startup_timeout_secs: Some(startup_secs),
            tool_timeout_secs: Some(30),
            ..Default::default()
        },
    )
    .unwrap()
}

fn context(workspace: &tempfile::TempDir) -> LaunchContext {
    LaunchContext {
        workspace: workspace.path().to_path_buf(),
        sandbox: None,
    }
}

fn tool_context(workspace: &tempfile::TempDir) -> ToolContext<'static> {
    ToolContext {
        workspace: Workspace::new(workspace.path()).unwrap(),
        shell_timeout: Duration::from_secs(10),
        secret_env_vars: vec![],
        exec: ExecEnv::unconfined(),
        run: None,
    }
}

/// Every server started, or the failures shown.
fn assert_all_started(started: &baton_mcp::McpTools) {
    let failures: Vec<String> = started.failures().map(ToString::to_string).collect();
    assert!(failures.is_empty(), "{failures:?}");
}

fn find<'a>(tools: &'a [Arc<dyn Tool>], name: &str) -> &'a Arc<dyn Tool> {
    tools
        .iter()
        .find(|t| t.spec().name == name)
        .unwrap_or_else(|| {
            let names: Vec<String> = tools.iter().map(|t| t.spec().name).collect();
            panic!("no tool {name} among {names:?}")
        })
}

#[tokio::test]
async fn the_reference_server_on_stdio_lists_and_answers_its_tools() {
    let ws = tempfile::tempdir().unwrap();
    let spec = stdio("everything", "node", &[&everything_js(), "stdio"], 60);
    let started = start_servers(vec![spec], context(&ws)).await;
    assert_all_started(&started);
    let ServerStatus::Ready { server, tools } = &started.servers[0].1 else {
        unreachable!()
    };
    assert!(
        server.version().contains("everything"),
        "{}",
        server.version()
    );
    assert!(
        tools.iter().all(|t| t.starts_with("mcp__everything__")),
        "{tools:?}"
    );

    // Effects come from the server's annotations.
    let echo = find(&started.tools, "mcp__everything__echo");
    assert_eq!(echo.spec().effect, ToolEffect::ReadOnly);
    assert_eq!(
        echo.spec().parameters["properties"]["message"]["type"],
        "string"
    );
    let toggle = find(&started.tools, "mcp__everything__toggle-simulated-logging");
    assert_eq!(toggle.spec().effect, ToolEffect::Mutating);

    let cx = tool_context(&ws);
    let echoed = echo.call(&cx, r#"{"message": "hello from baton"}"#).await;
    assert_eq!(echoed.outcome, ToolOutcome::Success);
    assert_eq!(echoed.content, "Echo: hello from baton");

    let sum = find(&started.tools, "mcp__everything__get-sum")
        .call(&cx, r#"{"a": 2, "b": 40}"#)
        .await;
    assert!(sum.content.contains("42"), "{}", sum.content);

    let image = find(&started.tools, "mcp__everything__get-tiny-image")
        .call(&cx, "{}")
        .await;
    assert!(
        image.content.contains("[image: image/png"),
        "{}",
        image.content
    );
    assert!(
        image.content.len() < 1_000,
        "image bytes reached the model: {}",
        image.content.len()
    );

    let weather = find(&started.tools, "mcp__everything__get-structured-content")
        .call(&cx, r#"{"location": "Chicago"}"#)
        .await;
    assert!(weather.content.contains("36"), "{}", weather.content);

    // Arguments the server's schema refuses: the model reads an error, nothing breaks.
    let refused = echo.call(&cx, r#"{"message": 7}"#).await;
    assert_eq!(refused.outcome, ToolOutcome::Error, "{}", refused.content);
    let not_json = echo.call(&cx, "message=hi").await;
    assert_eq!(not_json.outcome, ToolOutcome::Error);
    assert!(
        not_json.content.contains("not JSON"),
        "{}",
        not_json.content
    );
    started.shutdown().await;
}

#[tokio::test]
async fn enabled_and_disabled_tools_limit_what_is_offered() {
    let ws = tempfile::tempdir().unwrap();
    let spec = ServerSpec::new(
        "ev",
        &McpServerConfig {
            command: Some("node".into()),
            args: vec![everything_js(), "stdio".into()],
            enabled_tools: Some(vec!["echo".into(), "get-sum".into()]),
            disabled_tools: vec!["get-sum".into()],
            read_only_tools: vec![],
            mutating_tools: vec!["echo".into()],
            startup_timeout_secs: Some(60),
            ..Default::default()
        },
    )
    .unwrap();
    let started = start_servers(vec![spec], context(&ws)).await;
    let names: Vec<String> = started.tools.iter().map(|t| t.spec().name).collect();
    assert_eq!(names, ["mcp__ev__echo"]);
    // The configuration overrides the server's read-only annotation.
    assert_eq!(started.tools[0].spec().effect, ToolEffect::Mutating);
    started.shutdown().await;
}

#[tokio::test]
async fn the_filesystem_server_reads_the_workspace() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "durable runs\n").unwrap();
    let js = filesystem_js();
    let root = ws.path().canonicalize().unwrap();
    let spec = stdio("fs", "node", &[&js, root.to_str().unwrap()], 60);
    let started = start_servers(vec![spec], context(&ws)).await;
    assert_all_started(&started);
    let read = find(&started.tools, "mcp__fs__read_text_file");
    assert_eq!(read.spec().effect, ToolEffect::ReadOnly);
    let path = root.join("notes.txt");
    let args = serde_json::json!({ "path": path }).to_string();
    let result = read.call(&tool_context(&ws), &args).await;
    assert_eq!(result.outcome, ToolOutcome::Success, "{}", result.content);
    assert_eq!(result.content.trim_end(), "durable runs");
    // Outside its allowed directory: the server's own error, as a tool error.
    let outside = read
        .call(&tool_context(&ws), r#"{"path": "/etc/hostname"}"#)
        .await;
    assert_eq!(outside.outcome, ToolOutcome::Error, "{}", outside.content);
    started.shutdown().await;
}

/// A free port on loopback (bound, then released for the server to take).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn the_reference_server_over_streamable_http() {
    let ws = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut server = tokio::process::Command::new("node")
        .args([&everything_js(), "streamableHttp"])
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Until it listens (bounded: a server that never does fails the test, not hangs it).
    let deadline = Instant::now() + Duration::from_secs(60);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the HTTP server never listened");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let spec = ServerSpec::new(
        "remote",
        &McpServerConfig {
            url: Some(format!("http://127.0.0.1:{port}/mcp")),
            startup_timeout_secs: Some(30),
            ..Default::default()
        },
    )
    .unwrap();
    let started = start_servers(vec![spec], context(&ws)).await;
    assert_all_started(&started);
    let echo = find(&started.tools, "mcp__remote__echo");
    let result = echo
        .call(&tool_context(&ws), r#"{"message": "over http"}"#)
        .await;
    assert_eq!(result.content, "Echo: over http");
    started.shutdown().await;
    server.kill().await.unwrap();
}

#[tokio::test]
async fn failing_servers_are_bounded_reported_and_leave_the_others_working() {
    let ws = tempfile::tempdir().unwrap();
    let specs = vec![
        stdio("absent", "/nonexistent/mcp-server", &[], 10),
        stdio(
            "exits",
            "sh",
            &["-c", "echo 'bad config: no API key' >&2; exit 3"],
            10,
        ),
        stdio("silent", "sleep", &["300"], 4),
        stdio("quiet", "sleep", &["300"], 4),
        stdio("good", "node", &[&everything_js(), "stdio"], 60),
    ];
    let began = Instant::now();
    let started = start_servers(specs, context(&ws)).await;
    // All at once: the two silent servers' 4 s do not add up (one after the other: 8 s or more).
    assert!(
        began.elapsed() < Duration::from_secs(7),
        "{:?}",
        began.elapsed()
    );
    let status = |name: &str| &started.servers.iter().find(|(n, _)| n == name).unwrap().1;
    let failed = |name: &str| match status(name) {
        ServerStatus::Failed(e) => e,
        ServerStatus::Ready { .. } => panic!("{name} started"),
    };
    let absent = failed("absent");
    assert!(matches!(absent, McpError::Start { .. }), "{absent}");
    assert!(absent.to_string().contains("\"absent\""), "{absent}");
    let exits = failed("exits");
    assert!(matches!(exits, McpError::Start { .. }), "{exits}");
    assert!(exits.to_string().contains("no API key"), "{exits}");
    let silent = failed("silent");
    assert!(matches!(silent, McpError::StartTimeout { .. }), "{silent}");
    assert!(matches!(failed("quiet"), McpError::StartTimeout { .. }));
    assert!(
        silent.to_string().contains("startup_timeout_secs"),
        "{silent}"
    );
    assert!(matches!(status("good"), ServerStatus::Ready { .. }));
    let echo = find(&started.tools, "mcp__good__echo");
    let result = echo
        .call(&tool_context(&ws), r#"{"message": "still here"}"#)
        .await;
    assert_eq!(result.content, "Echo: still here");
    started.shutdown().await;
}

#[tokio::test]
async fn an_http_server_that_comes_up_late_is_reached_by_retrying_the_handshake() {
    let ws = tempfile::tempdir().unwrap();
    let port = free_port();
    let spec = |name: &str, port: u16, secs: u64| {
        ServerSpec::new(
            name,
            &McpServerConfig {
                url: Some(format!("http://127.0.0.1:{port}/mcp")),
                startup_timeout_secs: Some(secs),
                ..Default::default()
            },
        )
        .unwrap()
    };
    let starting = tokio::spawn(start_servers(vec![spec("late", port, 60)], context(&ws)));
    // The server comes up while baton keeps trying.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut server = tokio::process::Command::new("node")
        .args([&everything_js(), "streamableHttp"])
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let started = starting.await.unwrap();
    assert_all_started(&started);
    let echo = find(&started.tools, "mcp__late__echo");
    let result = echo
        .call(&tool_context(&ws), r#"{"message": "late"}"#)
        .await;
    assert_eq!(result.content, "Echo: late");
    started.shutdown().await;
    server.kill().await.unwrap();

    // Nothing ever listens: bounded by the start-up timeout, with the tries and the cause.
    let began = Instant::now();
    let nobody = start_servers(vec![spec("nobody", free_port(), 3)], context(&ws)).await;
    assert!(
        began.elapsed() < Duration::from_secs(6),
        "{:?}",
        began.elapsed()
    );
    let ServerStatus::Failed(e) = &nobody.servers[0].1 else {
        panic!("started without a server")
    };
    assert!(matches!(e, McpError::Start { .. }), "{e}");
    let message = e.to_string();
    assert!(
        message.contains("attempt(s)") && !message.contains("(1 attempt"),
        "{message}"
    );
}
