//! The configured MCP servers (`[mcp_servers.NAME]`, `--mcp`, `--mcp-config`) as tools of the
//! run: started all at once before the run begins, each bounded by its start-up timeout, their
//! tools after the built-in ones. A server that fails to start is reported by the caller and
//! left out; the run goes on without its tools.

use std::path::Path;
use std::sync::Arc;

use baton_mcp::{LaunchContext, McpTools, Transport, server_specs};
use baton_tools::{ExecEnv, ToolRegistry};

use crate::config::ConfigLayer;
use crate::error::Error;

pub use baton_mcp::{McpError, McpServerConfig, ServerStatus};

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

/// How the MCP tools a resumed run journaled at its start differ from those its servers offer
/// now: the run keeps offering what it journaled (its prompt stays byte-stable), so a change is
/// reported, never silently applied. One line per difference, in name order.
pub fn tool_changes(
    journaled: &[baton_core::ToolSpec],
    offered: &[baton_core::ToolSpec],
) -> Vec<String> {
    let is_mcp = |t: &&baton_core::ToolSpec| t.name.starts_with("mcp__");
    let then: std::collections::BTreeMap<&str, &baton_core::ToolSpec> = journaled
        .iter()
        .filter(is_mcp)
        .map(|t| (t.name.as_str(), t))
        .collect();
    let now: std::collections::BTreeMap<&str, &baton_core::ToolSpec> = offered
        .iter()
        .filter(is_mcp)
        .map(|t| (t.name.as_str(), t))
        .collect();
    let mut lines = Vec::new();
    for (name, spec) in &then {
        match now.get(name) {
            None => lines.push(format!(
                "mcp tool {name} is not offered by its server now: the run still lists it, and \
                 calls to it return an error"
            )),
            Some(current) if current != spec => lines.push(format!(
                "mcp tool {name} changed since the run started (description, schema or \
                 effect): the run keeps offering it as journaled"
            )),
            Some(_) => {}
        }
    }
    for name in now.keys().filter(|n| !then.contains_key(*n)) {
        lines.push(format!(
            "mcp tool {name} is new since the run started: not offered to this run (a new run \
             gets it)"
        ));
    }
    lines
}

/// The servers that did not start, with why: what the engine journals
/// (`Engine::with_mcp_failures`).
pub fn failures(mcp: &McpTools) -> Vec<(String, String)> {
    mcp.servers
        .iter()
        .filter_map(|(name, status)| match status {
            ServerStatus::Failed(e) => Some((name.clone(), e.to_string())),
            ServerStatus::Ready { .. } => None,
        })
        .collect()
}

/// The servers that started — name, version, the tools offered as the run names them: what the
/// engine journals (`Engine::with_mcp_started`).
pub fn started(mcp: &McpTools) -> Vec<(String, String, Vec<String>)> {
    mcp.servers
        .iter()
        .filter_map(|(name, status)| match status {
            ServerStatus::Ready { server, tools } => {
                Some((name.clone(), server.version().to_owned(), tools.clone()))
            }
            ServerStatus::Failed(_) => None,
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

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::{ToolEffect, ToolSpec};

    fn spec(name: &str, description: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters: serde_json::json!({"type": "object"}),
            effect: ToolEffect::ReadOnly,
        }
    }

    #[test]
    fn vanished_changed_and_new_tools_are_each_reported() {
        let journaled = [
            spec("read_file", "built in"),
            spec("mcp__a__same", "x"),
            spec("mcp__a__gone", "x"),
            spec("mcp__a__changed", "old"),
        ];
        let offered = [
            spec("read_file", "built in, other text"),
            spec("mcp__a__same", "x"),
            spec("mcp__a__changed", "new"),
            spec("mcp__b__new", "x"),
        ];
        let lines = tool_changes(&journaled, &offered);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].contains("mcp__a__changed") && lines[0].contains("changed"));
        assert!(lines[1].contains("mcp__a__gone") && lines[1].contains("not offered"));
        assert!(lines[2].contains("mcp__b__new") && lines[2].contains("new"));
        assert!(tool_changes(&journaled, &journaled).is_empty());
    }
}
