//! The configured MCP servers (`[mcp_servers.NAME]`, `--mcp`, `--mcp-config`) as tools of the
//! run: started all at once before the run begins, each bounded by its start-up timeout, their
//! tools after the built-in ones. A server that fails to start is reported by the caller and
//! left out; the run goes on without its tools.

use std::path::Path;
use std::sync::Arc;

use baton_engine::{McpOutcome, McpStart};
use baton_mcp::{LaunchContext, Transport, server_specs};
use baton_tools::{ExecEnv, ToolRegistry};

use crate::config::ConfigLayer;
use crate::error::Error;

pub use baton_mcp::{McpError, McpServerConfig, McpTools, ServerStatus};

/// Whether `layer` turns MCP on (`mcp = false`, `--no-mcp`: off) and names any server.
pub fn configured(layer: &ConfigLayer) -> bool {
    layer.mcp != Some(false) && layer.mcp_servers.as_ref().is_some_and(|s| !s.is_empty())
}

/// Checks every configured server's table (exactly one of `command` and `url`, usable values),
/// naming the server; nothing is started.
pub fn check(layer: &ConfigLayer) -> Result<(), Error> {
    let servers = layer.mcp_servers.clone().unwrap_or_default();
    server_specs(&servers).map(|_| ()).map_err(Error::usage)
}

/// Starts the servers `layer` configures; `None` when there are none (or MCP is off). A server
/// configured wrongly is an [`Error::Usage`] naming it; one that does not start is in the
/// result's [`McpTools::servers`] as failed.
pub async fn start(
    workspace: &Path,
    layer: &ConfigLayer,
    exec: &ExecEnv,
) -> Result<Option<Arc<McpTools>>, Error> {
    if !configured(layer) {
        return Ok(None);
    }
    let servers = layer.mcp_servers.clone().unwrap_or_default();
    let specs = server_specs(&servers).map_err(Error::usage)?;
    let context = LaunchContext {
        workspace: workspace.to_owned(),
        sandbox: Some(exec.sandbox.clone()),
    };
    Ok(Some(Arc::new(
        baton_mcp::start_servers(specs, context).await,
    )))
}

/// `base` with the started servers' tools after its own.
pub fn registry(base: ToolRegistry, mcp: Option<&McpTools>) -> ToolRegistry {
    let Some(mcp) = mcp else {
        return base;
    };
    mcp.tools.iter().cloned().fold(base, ToolRegistry::with)
}

/// Values a server is given that must never be journaled or logged: the variables its `env`
/// passes through and its bearer token (most have names that mark them secret anyway).
pub fn secret_values(layer: &ConfigLayer) -> Vec<String> {
    let Some(servers) = &layer.mcp_servers else {
        return vec![];
    };
    let names = servers.values().flat_map(|config| {
        let mut names = config.env.clone();
        names.extend(config.bearer_token_env.clone());
        names
    });
    names
        .filter_map(|name| std::env::var(name).ok())
        .filter(|value| !value.is_empty())
        .collect()
}

/// How each server started — its version and the tools offered as the run names them, or why
/// it failed: what the engine journals at each start and resume
/// (`baton_engine::Extensions::mcp_servers`).
pub fn starts(mcp: &McpTools) -> Vec<McpStart> {
    mcp.servers
        .iter()
        .map(|(name, status)| McpStart {
            server: name.clone(),
            outcome: match status {
                ServerStatus::Ready { server, tools } => McpOutcome::Started {
                    version: server.version().to_owned(),
                    tools: tools.clone(),
                },
                ServerStatus::Failed(e) => McpOutcome::Failed {
                    error: e.to_string(),
                },
            },
        })
        .collect()
}

/// One line per server for progress output: ready with its tools, or why it failed.
pub fn describe(mcp: &McpTools) -> Vec<String> {
    describe_each(mcp)
        .into_iter()
        .map(|(_, line)| line)
        .collect()
}

/// [`describe`]'s lines, each with whether its server started.
pub fn describe_each(mcp: &McpTools) -> Vec<(bool, String)> {
    mcp.servers
        .iter()
        .map(|(name, status)| match status {
            ServerStatus::Ready { server, tools } => {
                let how = match &server.spec().transport {
                    Transport::Stdio { .. } => "stdio",
                    Transport::StreamableHttp { .. } => "http",
                };
                let version = if server.version().is_empty() {
                    String::new()
                } else {
                    format!(", {}", server.version())
                };
                let line = format!(
                    "mcp server {name} ({how}{version}): {} tool(s)",
                    tools.len()
                );
                (true, line)
            }
            ServerStatus::Failed(e) => (
                false,
                format!("mcp server {name} failed, its tools are left out: {e}"),
            ),
        })
        .collect()
}
