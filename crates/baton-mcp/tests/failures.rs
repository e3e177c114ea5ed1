//! Failures of a real server — one written with the official Python SDK (`mcp` on PyPI,
//! `tests/servers/failures.py`, installed by `scripts/mcp-test-servers.sh`) — each bounded and
//! reported: a slow start past its timeout, a call that hangs, a server that dies mid-call
//! (restarted once, then gone), a huge result, an `isError` result.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use baton_core::ToolOutcome;
use baton_mcp::testing::python;
use baton_mcp::{
    LaunchContext, McpError, McpServerConfig, ServerSpec, ServerStatus, start_servers,
};
use baton_tools::{ExecEnv, Tool, ToolContext, Workspace};

fn script() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/servers/failures.py")
        .display()
        .to_string()
}

/// The failure server with `settings` (`NAME=VALUE` arguments, see the script).
fn spec(name: &str, startup_secs: u64, tool_secs: u64, settings: &[&str]) -> ServerSpec {
    ServerSpec::new(
        name,
        &McpServerConfig {
            command: Some(python().display().to_string()),
            args: std::iter::once(script())
                .chain(settings.iter().map(|s| s.to_string()))
                .collect(),
            startup_timeout_secs: Some(startup_secs),
            tool_timeout_secs: Some(tool_secs),
            ..Default::default()
        },
    )
    .unwrap()
}

fn context(ws: &tempfile::TempDir) -> LaunchContext {
    LaunchContext {
        workspace: ws.path().to_path_buf(),
        sandbox: None,
    }
}

fn cx(ws: &tempfile::TempDir) -> ToolContext<'static> {
    ToolContext {
        workspace: Workspace::new(ws.path()).unwrap(),
        shell_timeout: Duration::from_secs(10),
        secret_env_vars: vec![],
        exec: ExecEnv::unconfined(),
        run: None,
    }
}

fn tool<'a>(tools: &'a [Arc<dyn Tool>], name: &str) -> &'a Arc<dyn Tool> {
    tools.iter().find(|t| t.spec().name == name).unwrap()
}

#[tokio::test]
async fn a_server_slower_than_its_start_up_timeout_is_left_out() {
    let ws = tempfile::tempdir().unwrap();
    let slow = spec("slow", 1, 10, &["MCP_SLOW_START=30"]);
    let started = start_servers(vec![slow], context(&ws)).await;
    let ServerStatus::Failed(e) = &started.servers[0].1 else {
        panic!("the slow server started");
    };
    assert!(matches!(e, McpError::StartTimeout { .. }), "{e}");
    assert!(e.to_string().contains("\"slow\""), "{e}");
    assert!(started.tools.is_empty());
}

#[tokio::test]
async fn hangs_crashes_huge_results_and_errors_are_each_bounded() {
    let ws = tempfile::tempdir().unwrap();
    let calls = ws.path().join("calls.txt");
    let calls_arg = format!("MCP_CALLS_FILE={}", calls.display());
    let started = start_servers(vec![spec("f", 60, 2, &[&calls_arg])], context(&ws)).await;
    assert_eq!(started.failures().count(), 0);
    let tools = &started.tools;
    let cx = cx(&ws);

    // A hang ends at the tool timeout, as a tool error naming server, tool and setting.
    let hung = tool(tools, "mcp__f__hang").call(&cx, "{}").await;
    assert_eq!(hung.outcome, ToolOutcome::Error);
    assert!(
        hung.content.contains("tool_timeout_secs"),
        "{}",
        hung.content
    );
    // The server still answers after it.
    let value = tool(tools, "mcp__f__lookup")
        .call(&cx, r#"{"key": "a"}"#)
        .await;
    assert_eq!(value.content, "value of a");

    // isError reaches the model as a tool error with the server's message.
    let failed = tool(tools, "mcp__f__fail")
        .call(&cx, r#"{"reason": "no such issue"}"#)
        .await;
    assert_eq!(failed.outcome, ToolOutcome::Error);
    assert!(
        failed.content.contains("no such issue"),
        "{}",
        failed.content
    );

    // 5 MB capped to head and tail.
    let huge = tool(tools, "mcp__f__huge").call(&cx, "{}").await;
    assert_eq!(huge.outcome, ToolOutcome::Success);
    assert!(huge.content.len() < 70_000, "{}", huge.content.len());
    assert!(huge.content.contains("bytes cut"));

    // A crash mid-call: a tool error; the server is started again once for later calls.
    let crashed = tool(tools, "mcp__f__crash").call(&cx, "{}").await;
    assert_eq!(crashed.outcome, ToolOutcome::Error, "{}", crashed.content);
    let after = tool(tools, "mcp__f__lookup")
        .call(&cx, r#"{"key": "b"}"#)
        .await;
    assert_eq!(after.content, "value of b", "not restarted");
    // A second crash: no second restart; the server is gone and says so.
    let again = tool(tools, "mcp__f__crash").call(&cx, "{}").await;
    assert_eq!(again.outcome, ToolOutcome::Error);
    let gone = tool(tools, "mcp__f__lookup")
        .call(&cx, r#"{"key": "c"}"#)
        .await;
    assert_eq!(gone.outcome, ToolOutcome::Error);
    assert!(gone.content.contains("is gone"), "{}", gone.content);
    // Each call the server received once: the crashing ones were not sent again, and the call
    // to the gone server was not sent at all.
    let received = std::fs::read_to_string(&calls).unwrap();
    let count = |tool: &str| received.lines().filter(|l| l.starts_with(tool)).count();
    assert_eq!(count("crash "), 2, "{received}");
    assert_eq!(count("lookup "), 2, "{received}");
    // Shut down, it stays down: no call starts it again.
    started.shutdown().await;
    let after = tool(tools, "mcp__f__lookup")
        .call(&cx, r#"{"key": "d"}"#)
        .await;
    assert_eq!(after.outcome, ToolOutcome::Error);
}
