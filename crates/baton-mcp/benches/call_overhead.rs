#![allow(clippy::unwrap_used, clippy::expect_used)]
//! What baton adds to an MCP tool call on stdio: the same `echo` calls to the reference server
//! (`@modelcontextprotocol/server-everything`, installed by `scripts/mcp-test-servers.sh`) once
//! through baton's `McpTool` (rmcp session, argument parsing, result conversion) and once as
//! bare JSON-RPC lines written to and read from the server's pipes by hand — the server's own
//! time plus the pipe, the floor any client pays. Prints p50/p95 of both and the difference.
//!
//! `cargo bench -p baton-mcp --bench call_overhead [-- CALLS]`

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use baton_mcp::testing::everything_js;
use baton_mcp::{LaunchContext, McpServerConfig, ServerSpec, start_servers};
use baton_tools::{ExecEnv, ToolContext, Workspace};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn report(label: &str, mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    let (p50, p95) = (percentile(&times, 0.5), percentile(&times, 0.95));
    println!(
        "{label:<34} p50 {:>7.1} µs   p95 {:>7.1} µs   ({} calls)",
        p50.as_secs_f64() * 1e6,
        p95.as_secs_f64() * 1e6,
        times.len()
    );
    (p50, p95)
}

/// Bare JSON-RPC over the server's pipes: handshake, then `calls` echo calls, each timed.
fn raw_calls(calls: usize) -> Vec<Duration> {
    let mut child = Command::new("node")
        .args([everything_js().as_str(), "stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut send = |text: String| {
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}})
        .to_string(),
    );
    stdout.read_line(&mut line).unwrap();
    send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
    let mut times = Vec::with_capacity(calls);
    for id in 1..=calls {
        let request = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": format!("call {id}")}}})
        .to_string();
        let began = Instant::now();
        send(request);
        // Skip notifications (logging) until our response.
        loop {
            line.clear();
            stdout.read_line(&mut line).unwrap();
            if line.contains(&format!("\"id\":{id}")) {
                break;
            }
        }
        times.push(began.elapsed());
    }
    let _ = child.kill();
    let _ = child.wait();
    times
}

async fn baton_calls(calls: usize) -> Vec<Duration> {
    let ws = tempfile::tempdir().unwrap();
    let spec = ServerSpec::new(
        "ev",
        &McpServerConfig {
            command: Some("node".into()),
            args: vec![everything_js(), "stdio".into()],
            startup_timeout_secs: Some(60),
            ..Default::default()
        },
    )
    .unwrap();
    let context = LaunchContext {
        workspace: ws.path().to_path_buf(),
        sandbox: None,
    };
    let started = start_servers(vec![spec], context).await;
    let echo = started
        .tools
        .iter()
        .find(|t| t.spec().name == "mcp__ev__echo")
        .unwrap()
        .clone();
    let cx = ToolContext {
        workspace: Workspace::new(ws.path()).unwrap(),
        shell_timeout: Duration::from_secs(10),
        secret_env_vars: vec![],
        exec: ExecEnv::unconfined(),
        run: None,
    };
    let mut times = Vec::with_capacity(calls);
    for id in 0..calls {
        let arguments = serde_json::json!({"message": format!("call {id}")}).to_string();
        let began = Instant::now();
        let result = echo.call(&cx, &arguments).await;
        times.push(began.elapsed());
        assert_eq!(result.content, format!("Echo: call {id}"));
    }
    started.shutdown().await;
    times
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this as a smoke test.
    let full = std::env::args().any(|a| a == "--bench");
    let calls: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(if full { 2_000 } else { 20 });
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // Warm both paths once (node's JIT, the page cache), then measure.
    raw_calls(calls.min(100));
    let raw = raw_calls(calls);
    let through_baton = runtime.block_on(baton_calls(calls));
    println!("MCP tool call on stdio (server-everything `echo`):");
    let (raw50, raw95) = report("bare JSON-RPC over the pipes", raw);
    let (b50, b95) = report("through baton's McpTool (rmcp)", through_baton);
    println!(
        "baton's overhead over the server's own time: p50 {:+.1} µs, p95 {:+.1} µs",
        (b50.as_secs_f64() - raw50.as_secs_f64()) * 1e6,
        (b95.as_secs_f64() - raw95.as_secs_f64()) * 1e6
    );
}
