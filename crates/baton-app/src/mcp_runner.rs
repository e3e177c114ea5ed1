//! baton's durable runner for other agents (Claude Code, Codex, Cursor) over MCP: each tool is a
//! baton executable run once — `run --detach`, `status --json`, `logs --json`, `diff`, `stop`,
//! `resume --detach` — so a run started this way is supervised, outlives the client, and is the
//! same run the CLI and the dashboard show. `baton mcp-server` serves [`service`] on stdio or HTTP.
//!
//! A run started here runs as the serving user, with their API key. So a caller never chooses
//! where requests go (`start_run` takes no provider or base URL: the serving user's config and
//! environment decide), and over HTTP ([`Callers::TokenHolders`]) every tool acts only in a
//! workspace the serving user trusted with `baton trust`, its `.baton/` files unchanged since —
//! not in one another user prepared.
//!
//! ```
//! use baton_app::mcp_runner::Callers;
//! let names: Vec<String> = baton_app::mcp_runner::tools().into_iter().map(|t| t.name).collect();
//! assert_eq!(names[0], "start_run");
//! let service = baton_app::mcp_runner::service("/usr/local/bin/baton".into(), None, Callers::Parent);
//! assert_eq!(service.tools.len(), names.len());
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use baton_mcp::{ServedTool, ToolHandler};
use serde_json::{Map, Value, json};

/// How long one tool's baton command may take (`stop` waits for the run to pause).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(300);
/// Events `run_events` returns at most, by default.
const DEFAULT_EVENTS: u64 = 200;

fn schema(properties: Value, required: &[&str]) -> Map<String, Value> {
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), properties);
    schema.insert("required".into(), json!(required));
    schema
}

fn run_ref() -> Value {
    json!({
        "workspace": {"type": "string", "description": "The run's workspace directory (absolute)."},
        "run_id": {"type": "string", "description": "The run's id (or a unique prefix)."},
    })
}

fn with(mut base: Value, extra: Value) -> Value {
    if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
        base.extend(extra.clone());
    }
    base
}

/// The tools, with their argument schemas.
pub fn tools() -> Vec<ServedTool> {
    let tool = |name: &str, description: &str, schema, read_only| ServedTool {
        name: name.into(),
        description: description.into(),
        input_schema: schema,
        read_only,
    };
    vec![
        tool(
            "start_run",
            "Start a durable, supervised baton run on a goal in a workspace; returns its run id at \
             once. The run works in the background (for hours if need be), survives crashes and \
             restarts, and is followed with run_status and run_events.",
            schema(
                json!({
                    "goal": {"type": "string", "description": "What the agent should achieve."},
                    "workspace": {"type": "string", "description": "The directory to work in (absolute)."},
                    "plan": {"type": "string", "description": "A plan file to work through (path)."},
                    "model": {"type": "string", "description": "The model name (the provider and its URL are the serving user's)."},
                    "max_turns": {"type": "integer", "minimum": 1, "description": "Turns before the run pauses."},
                }),
                &["goal", "workspace"],
            ),
            false,
        ),
        tool(
            "run_status",
            "A run's state as JSON: status (running, paused, finished, failed), turns, tokens, \
             cost, pause reason, tasks.",
            schema(run_ref(), &["workspace", "run_id"]),
            true,
        ),
        tool(
            "run_events",
            "A run's journaled events as a JSON array, from sequence number `since` on.",
            schema(
                with(
                    run_ref(),
                    json!({
                        "since": {"type": "integer", "minimum": 0, "description": "First sequence number (default 0)."},
                        "limit": {"type": "integer", "minimum": 1, "description": "Most events returned (default 200)."},
                    }),
                ),
                &["workspace", "run_id"],
            ),
            true,
        ),
        tool(
            "run_diff",
            "What the run changed in its workspace, as a unified diff from its first snapshot.",
            schema(run_ref(), &["workspace", "run_id"]),
            true,
        ),
        tool(
            "stop_run",
            "Pause a running run cleanly and wait until it has paused.",
            schema(run_ref(), &["workspace", "run_id"]),
            false,
        ),
        tool(
            "resume_run",
            "Continue a paused or interrupted run in the background.",
            schema(
                with(
                    run_ref(),
                    json!({"max_turns": {"type": "integer", "minimum": 1, "description": "A new turn limit."}}),
                ),
                &["workspace", "run_id"],
            ),
            false,
        ),
    ]
}

/// Who can call the tools, which decides the workspaces they act in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Callers {
    /// The parent process, on stdio: the user's own agent. Any workspace it names.
    Parent,
    /// Whoever holds an HTTP server's token: only workspaces the serving user trusted
    /// (`baton trust`, files unchanged since), named by absolute path.
    TokenHolders,
}

/// Serves [`tools`] by running a baton executable once per call.
pub struct BinaryRunner {
    exe: PathBuf,
    store: Option<String>,
    callers: Callers,
}

/// Settings that would choose where the run's requests, and the serving user's API key, go.
const REFUSED_SETTINGS: [&str; 2] = ["base_url", "provider"];

fn text(args: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("`{key}` must be a string, not {other}")),
    }
}

fn required(args: &Map<String, Value>, key: &str) -> Result<String, String> {
    text(args, key)?
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| format!("`{key}` is required"))
}

fn number(args: &Map<String, Value>, key: &str) -> Result<Option<u64>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("`{key}` must be a whole number, not {v}")),
    }
}

impl BinaryRunner {
    /// Runs `exe` (a `baton` binary) for each call; `store` is passed to it as `BATON_STORE`.
    pub fn new(exe: PathBuf, store: Option<String>, callers: Callers) -> BinaryRunner {
        BinaryRunner {
            exe,
            store,
            callers,
        }
    }

    /// The call's `workspace`: for [`Callers::TokenHolders`], an absolute path, resolved (the
    /// command gets the real directory, not a link that could be re-pointed after the check),
    /// that the serving user trusted.
    fn workspace(&self, args: &Map<String, Value>) -> Result<String, String> {
        let given = required(args, "workspace")?;
        if self.callers == Callers::Parent {
            return Ok(given);
        }
        let path = Path::new(&given);
        if !path.is_absolute() {
            return Err(format!(
                "`workspace` must be an absolute path, not {given:?}"
            ));
        }
        let real = path
            .canonicalize()
            .map_err(|e| format!("workspace {given}: {e}"))?;
        if !real.is_dir() {
            return Err(format!("workspace {given} is not a directory"));
        }
        if !baton::trust::is_trusted(&real).map_err(|e| e.to_string())? {
            return Err(format!(
                "workspace {given} is not trusted by the user serving this MCP server: over \
                 HTTP, baton works only in a workspace that user trusted. They can review its \
                 .baton/ files and run `baton --workspace {} trust` (again after any change to \
                 them)",
                real.display()
            ));
        }
        Ok(real.display().to_string())
    }

    /// The call's plan file: for [`Callers::TokenHolders`], inside the (trusted) workspace.
    fn plan(&self, args: &Map<String, Value>, workspace: &str) -> Result<Option<String>, String> {
        let Some(plan) = text(args, "plan")? else {
            return Ok(None);
        };
        if self.callers == Callers::Parent {
            return Ok(Some(plan));
        }
        let real = Path::new(workspace)
            .join(&plan)
            .canonicalize()
            .map_err(|e| format!("plan {plan}: {e}"))?;
        if !real.starts_with(workspace) {
            return Err(format!(
                "plan {plan} is outside the workspace {workspace}: over HTTP a plan file must be \
                 inside the workspace"
            ));
        }
        Ok(Some(real.display().to_string()))
    }

    /// `baton --workspace W [--store S] ARGS…`: its stdout, or its stderr as the error.
    async fn baton(&self, workspace: &str, args: &[String]) -> Result<String, String> {
        let mut command = tokio::process::Command::new(&self.exe);
        command.arg("--workspace").arg(workspace);
        if let Some(store) = &self.store {
            // By environment, as the supervisor passes it: keeps a password out of `ps`.
            command.env("BATON_STORE", store);
        }
        command
            .args(args)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let out = tokio::time::timeout(COMMAND_TIMEOUT, command.output())
            .await
            .map_err(|_| {
                format!(
                    "baton {} took over {} s",
                    args.join(" "),
                    COMMAND_TIMEOUT.as_secs()
                )
            })?
            .map_err(|e| format!("cannot run baton: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        match out.status.code() {
            Some(0) => Ok(stdout),
            code => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                Err(format!(
                    "baton {} exited with {}: {}{}",
                    args.first().map_or("", String::as_str),
                    code.map_or("a signal".into(), |c| c.to_string()),
                    stderr.trim(),
                    if stdout.trim().is_empty() {
                        String::new()
                    } else {
                        format!("\n{}", stdout.trim())
                    }
                ))
            }
        }
    }

    async fn start_run(&self, args: &Map<String, Value>) -> Result<String, String> {
        let goal = required(args, "goal")?;
        if let Some(key) = REFUSED_SETTINGS
            .iter()
            .find(|k| args.get(**k).is_some_and(|v| !v.is_null()))
        {
            return Err(format!(
                "start_run takes no `{key}`: the run uses the provider and base URL of the user \
                 serving baton (their config file ~/.config/baton/config.toml, or its \
                 environment), so that no caller can send their API key elsewhere"
            ));
        }
        let workspace = self.workspace(args)?;
        let run_id = baton_core::RunId::new();
        let mut command: Vec<String> = vec!["run".into(), "--detach".into()];
        command.extend(["--run-id".into(), run_id.as_str().to_owned()]);
        if let Some(plan) = self.plan(args, &workspace)? {
            command.extend(["--plan".into(), plan]);
        }
        if let Some(model) = text(args, "model")? {
            command.extend(["--model".into(), model]);
        }
        if let Some(turns) = number(args, "max_turns")? {
            command.extend(["--max-turns".into(), turns.to_string()]);
        }
        command.extend(["--".into(), goal]);
        self.baton(&workspace, &command).await?;
        Ok(json!({"run_id": run_id.as_str(), "workspace": workspace}).to_string())
    }

    async fn run_events(&self, args: &Map<String, Value>) -> Result<String, String> {
        let (workspace, run) = (self.workspace(args)?, required(args, "run_id")?);
        let since = number(args, "since")?.unwrap_or(0);
        let limit = number(args, "limit")?.unwrap_or(DEFAULT_EVENTS);
        let lines = self
            .baton(&workspace, &["logs".into(), run, "--json".into()])
            .await?;
        let events: Vec<Value> = lines
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["seq"].as_u64().is_some_and(|s| s >= since))
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .collect();
        Ok(Value::Array(events).to_string())
    }
}

#[async_trait::async_trait]
impl ToolHandler for BinaryRunner {
    async fn call(&self, tool: &str, args: Map<String, Value>) -> Result<String, String> {
        let run_ref = || -> Result<(String, String), String> {
            Ok((self.workspace(&args)?, required(&args, "run_id")?))
        };
        match tool {
            "start_run" => self.start_run(&args).await,
            "run_events" => self.run_events(&args).await,
            "run_status" => {
                let (ws, run) = run_ref()?;
                self.baton(&ws, &["status".into(), run, "--json".into()])
                    .await
            }
            "run_diff" => {
                let (ws, run) = run_ref()?;
                self.baton(&ws, &["diff".into(), run]).await
            }
            "stop_run" => {
                let (ws, run) = run_ref()?;
                self.baton(&ws, &["stop".into(), run]).await
            }
            "resume_run" => {
                let (ws, run) = run_ref()?;
                let mut command = vec!["resume".into(), run, "--detach".into()];
                if let Some(turns) = number(&args, "max_turns")? {
                    command.extend(["--max-turns".into(), turns.to_string()]);
                }
                self.baton(&ws, &command).await
            }
            other => Err(format!("no tool named {other:?}")),
        }
    }
}

/// The MCP service: [`tools`], each answered by running `exe` (see [`BinaryRunner::new`]).
pub fn service(exe: PathBuf, store: Option<String>, callers: Callers) -> baton_mcp::Service {
    baton_mcp::Service {
        name: "baton".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        tools: tools(),
        handler: Arc::new(BinaryRunner::new(exe, store, callers)),
    }
}
