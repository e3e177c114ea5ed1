//! One live server, on rmcp: starting it (a child process on stdio, or a streamable-HTTP
//! session), listing its tools, calling them with a timeout, and restarting a dead stdio server
//! once. This is the only module that touches rmcp's API, so that an upgrade touches one file.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::{RoleClient, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{Peer, ServiceExt};
use tokio::io::AsyncBufReadExt;

use crate::McpError;
use crate::config::{ServerSpec, Transport};

/// Lines of a server's stderr kept for error messages.
const STDERR_LINES: usize = 20;
/// How long a failed start waits for the rest of the server's stderr.
const STDERR_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Where and how servers are started.
#[derive(Clone)]
pub struct LaunchContext {
    /// The run's workspace: a stdio server's default working directory.
    pub workspace: PathBuf,
    /// Confines stdio servers like commands; `None` runs them with the allowlisted
    /// environment only (library use, tests of the protocol).
    pub sandbox: Option<Arc<baton_tools::baton_sandbox::Sandbox>>,
}

/// A tool as the server lists it.
#[derive(Clone, Debug)]
pub struct ListedTool {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
    /// The server's `readOnlyHint` annotation.
    pub read_only_hint: Option<bool>,
}

/// The last lines a process wrote to stderr.
#[derive(Clone, Default)]
struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() == STDERR_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    fn text(&self) -> String {
        let lines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

type Running = RunningService<RoleClient, ()>;

/// A started server. Calls go through a clone of its peer; the running service is kept so that
/// the session (and a stdio child) ends when the server is dropped.
pub struct Server {
    spec: ServerSpec,
    context: LaunchContext,
    state: tokio::sync::Mutex<Live>,
    version: String,
}

struct Live {
    running: Option<Running>,
    peer: Option<Peer<RoleClient>>,
    stderr: StderrTail,
    restarted: bool,
    /// Shut down on purpose: never started again.
    closed: bool,
    /// Keeps a sandboxed server's private tmp (and cgroups) until the server is gone.
    guard: Option<baton_tools::baton_sandbox::Guard>,
}

impl Live {
    /// Ends what this session holds off the async threads: dropping a sandbox guard removes its
    /// cgroups, which waits (blocking) for the killed process tree to be gone.
    async fn dispose(running: Option<Running>, guard: Option<baton_tools::baton_sandbox::Guard>) {
        if let Some(running) = running {
            let _ = running.cancel().await;
        }
        if let Some(guard) = guard {
            let _ = tokio::task::spawn_blocking(move || drop(guard)).await;
        }
    }
}

impl Server {
    /// Starts the server and lists its tools, all within its start-up timeout.
    pub async fn start(
        spec: ServerSpec,
        context: LaunchContext,
    ) -> Result<(Arc<Server>, Vec<ListedTool>), McpError> {
        // One deadline for the start and the tool list together.
        let deadline = tokio::time::Instant::now() + spec.startup_timeout;
        let live = connect_within_timeout(&spec, &context).await?;
        let peer = live.peer.clone().ok_or_else(|| gone(&spec, "no session"))?;
        let listed = tokio::time::timeout_at(deadline, peer.list_all_tools()).await;
        let tools = match listed {
            Ok(Ok(tools)) => tools,
            Ok(Err(e)) => {
                let error = McpError::Start {
                    server: spec.name.clone(),
                    detail: format!("listing its tools failed: {e}"),
                    stderr: live.stderr.text(),
                };
                Live::dispose(live.running, live.guard).await;
                return Err(error);
            }
            Err(_) => {
                let error = McpError::StartTimeout {
                    server: spec.name.clone(),
                    after: spec.startup_timeout,
                    stderr: live.stderr.text(),
                };
                Live::dispose(live.running, live.guard).await;
                return Err(error);
            }
        };
        let version = peer
            .peer_info()
            .and_then(|info| info.server_info.clone())
            .map(|i| format!("{} {}", i.name, i.version))
            .unwrap_or_default();
        let tools = tools
            .into_iter()
            .map(|t| ListedTool {
                name: t.name.to_string(),
                description: t.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: serde_json::Value::Object((*t.input_schema).clone()),
                read_only_hint: t.annotations.and_then(|a| a.read_only_hint),
            })
            .collect();
        let server = Server {
            spec,
            context,
            state: tokio::sync::Mutex::new(live),
            version,
        };
        Ok((Arc::new(server), tools))
    }

    pub fn spec(&self) -> &ServerSpec {
        &self.spec
    }

    /// The server's name and version from its handshake (empty when it gave none).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Calls `tool` with `arguments`, within the tool timeout. A stdio server found dead is
    /// restarted once for later calls; the call that found it dead is not sent again (it may
    /// have had its effect).
    pub async fn call(
        &self,
        tool: &str,
        arguments: JsonObject,
    ) -> Result<CallToolResult, McpError> {
        let peer = self.peer().await?;
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = Some(arguments);
        let answer = tokio::time::timeout(self.spec.tool_timeout, peer.call_tool(params)).await;
        match answer {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(ServiceError::McpError(e))) => Err(McpError::Call {
                server: self.spec.name.clone(),
                tool: tool.to_owned(),
                detail: e.message.to_string(),
            }),
            Ok(Err(e)) => {
                let closed = peer.is_transport_closed();
                if closed {
                    self.restart_once().await;
                }
                Err(McpError::Call {
                    server: self.spec.name.clone(),
                    tool: tool.to_owned(),
                    detail: if closed {
                        format!("the server's connection closed during the call ({e})")
                    } else {
                        e.to_string()
                    },
                })
            }
            Err(_) => Err(McpError::CallTimeout {
                server: self.spec.name.clone(),
                tool: tool.to_owned(),
                after: self.spec.tool_timeout,
            }),
        }
    }

    /// The live session's peer; a closed one is replaced once.
    async fn peer(&self) -> Result<Peer<RoleClient>, McpError> {
        {
            let live = self.state.lock().await;
            if live.closed {
                return Err(gone(&self.spec, "it was shut down"));
            }
            if let Some(peer) = &live.peer
                && !peer.is_transport_closed()
            {
                return Ok(peer.clone());
            }
        }
        self.restart_once().await;
        let live = self.state.lock().await;
        match &live.peer {
            Some(peer) if !peer.is_transport_closed() => Ok(peer.clone()),
            _ => Err(gone(&self.spec, &live.stderr.text())),
        }
    }

    /// Replaces a closed session with a new one, the first time only.
    async fn restart_once(&self) {
        let mut live = self.state.lock().await;
        if live.closed
            || live.restarted
            || live.peer.as_ref().is_some_and(|p| !p.is_transport_closed())
        {
            return;
        }
        live.restarted = true;
        tracing::warn!(server = %self.spec.name, "MCP server closed its connection; restarting it once");
        // The dead session's leftovers go once the lock is released.
        let (old_running, old_guard) = (live.running.take(), live.guard.take());
        match connect_within_timeout(&self.spec, &self.context).await {
            Ok(mut fresh) => {
                fresh.restarted = true;
                *live = fresh;
            }
            Err(e) => {
                tracing::warn!(server = %self.spec.name, "MCP server did not restart: {e}");
                live.peer = None;
            }
        }
        drop(live);
        Live::dispose(old_running, old_guard).await;
    }

    /// Ends the session (and a stdio server's process); later calls return errors and the
    /// server is never started again.
    pub async fn shutdown(&self) {
        let (running, guard) = {
            let mut live = self.state.lock().await;
            live.closed = true;
            live.peer = None;
            (live.running.take(), live.guard.take())
        };
        Live::dispose(running, guard).await;
    }
}

fn gone(spec: &ServerSpec, detail: &str) -> McpError {
    McpError::Gone {
        server: spec.name.clone(),
        detail: if detail.trim().is_empty() {
            "no output on stderr".into()
        } else {
            detail.trim_end().to_owned()
        },
    }
}

async fn connect_within_timeout(
    spec: &ServerSpec,
    context: &LaunchContext,
) -> Result<Live, McpError> {
    let stderr = StderrTail::default();
    match tokio::time::timeout(spec.startup_timeout, connect(spec, context, &stderr)).await {
        Ok(result) => result,
        Err(_) => Err(McpError::StartTimeout {
            server: spec.name.clone(),
            after: spec.startup_timeout,
            stderr: stderr.text(),
        }),
    }
}

async fn connect(
    spec: &ServerSpec,
    context: &LaunchContext,
    stderr: &StderrTail,
) -> Result<Live, McpError> {
    let failed = |detail: String| McpError::Start {
        server: spec.name.clone(),
        detail,
        stderr: stderr.text(),
    };
    match &spec.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let dir = cwd.clone().unwrap_or_else(|| context.workspace.clone());
            let (command, guard) =
                stdio_command(spec, command, args, env, &dir, context).map_err(&failed)?;
            let (transport, child_stderr) = TokioChildProcess::builder(command)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| failed(format!("cannot run it: {e}")))?;
            let reader = child_stderr.map(|child_stderr| {
                let tail = stderr.clone();
                tokio::spawn(async move {
                    let mut lines = tokio::io::BufReader::new(child_stderr).lines();
                    while let Ok(Some(line)) = lines.next_line().await {
                        tail.push(line);
                    }
                })
            });
            let running = match ().serve(transport).await {
                Ok(running) => running,
                Err(e) => {
                    // A server that exited has said why on stderr: read it to the end (briefly).
                    if let Some(reader) = reader {
                        let _ = tokio::time::timeout(STDERR_GRACE, reader).await;
                    }
                    return Err(McpError::Start {
                        server: spec.name.clone(),
                        detail: format!("the handshake failed: {e}"),
                        stderr: stderr.text(),
                    });
                }
            };
            Ok(live(running, stderr.clone(), guard))
        }
        Transport::StreamableHttp {
            url,
            bearer_token_env,
        } => {
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.clone());
            if let Some(var) = bearer_token_env {
                let token = std::env::var(var)
                    .map_err(|_| failed(format!("the bearer token variable {var} is not set")))?;
                config = config.auth_header(token);
            }
            let running = handshake_with_retries(spec, url, config).await?;
            Ok(live(running, stderr.clone(), None))
        }
    }
}

/// First wait between handshake attempts; it doubles up to [`RETRY_MAX`].
const RETRY_FIRST: std::time::Duration = std::time::Duration::from_millis(250);
const RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// The streamable-HTTP handshake, tried again with backoff while the start-up timeout allows: a
/// remote server that is restarting, or behind a proxy still warming up, answers a moment later.
/// The last attempt's error is kept for the message (the start-up timeout would say less).
async fn handshake_with_retries(
    spec: &ServerSpec,
    url: &str,
    config: StreamableHttpClientTransportConfig,
) -> Result<Running, McpError> {
    // A margin under the start-up timeout, so that the error here, with its cause, wins.
    let deadline = std::time::Instant::now() + spec.startup_timeout.mul_f64(0.9);
    let mut delay = RETRY_FIRST;
    let mut attempts = 0;
    loop {
        attempts += 1;
        let transport = StreamableHttpClientTransport::from_config(config.clone());
        let error = match ().serve(transport).await {
            Ok(running) => return Ok(running),
            Err(e) => e.to_string(),
        };
        if std::time::Instant::now() + delay >= deadline {
            return Err(McpError::Start {
                server: spec.name.clone(),
                detail: format!(
                    "the handshake with {url} failed ({attempts} attempt(s)); the last: {error}"
                ),
                stderr: String::new(),
            });
        }
        tracing::debug!(server = %spec.name, "MCP handshake with {url} failed, retrying: {error}");
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(RETRY_MAX);
    }
}

fn live(
    running: Running,
    stderr: StderrTail,
    guard: Option<baton_tools::baton_sandbox::Guard>,
) -> Live {
    let peer = running.peer().clone();
    Live {
        running: Some(running),
        peer: Some(peer),
        stderr,
        restarted: false,
        closed: false,
        guard,
    }
}

/// The server's process: confined by the sandbox when there is one, with the sandbox's
/// allowlisted environment plus the variables the configuration names.
fn stdio_command(
    spec: &ServerSpec,
    command: &str,
    args: &[String],
    env: &[String],
    dir: &Path,
    context: &LaunchContext,
) -> Result<
    (
        tokio::process::Command,
        Option<baton_tools::baton_sandbox::Guard>,
    ),
    String,
> {
    let named: Vec<(String, OsString)> = env
        .iter()
        .filter_map(|name| std::env::var_os(name).map(|v| (name.clone(), v)))
        .collect();
    let Some(sandbox) = &context.sandbox else {
        let mut cmd = tokio::process::Command::new(command);
        cmd.args(args).current_dir(dir).env_clear();
        for (name, value) in std::env::vars_os() {
            if baton_tools::baton_sandbox::is_allowed(&name.to_string_lossy(), &[]) {
                cmd.env(name, value);
            }
        }
        cmd.envs(named);
        return Ok((cmd, None));
    };
    let argv: Vec<OsString> = std::iter::once(OsString::from(command))
        .chain(args.iter().map(OsString::from))
        .collect();
    let prepared = sandbox
        .with_mode_and_network(spec.sandbox, spec.allow_network)
        .prepare(dir, &argv, std::env::vars_os())
        .map_err(|e| format!("the sandbox cannot start it: {e}"))?;
    let mut cmd = tokio::process::Command::from(prepared.command);
    cmd.envs(named);
    Ok((cmd, Some(prepared.guard)))
}
