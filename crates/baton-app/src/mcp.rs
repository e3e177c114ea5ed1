//! `baton mcp` and the `--mcp` / `--mcp-config` flags: the servers a flag or a file names,
//! each started server as `baton mcp list` shows it, one tool called outside any run for
//! `baton mcp call`, and how a resumed run's journaled MCP tools differ from those offered now.
//! Starting the configured servers for a run is the library's (`baton::mcp`).

use std::collections::BTreeMap;
use std::path::Path;

use baton::config::ConfigLayer;
use baton::mcp::{McpServerConfig, McpTools, ServerStatus, check};
use baton::{Error, tools::ExecEnv};

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

/// The servers `--mcp-config FILE` names: a TOML file of `[mcp_servers.NAME]` tables only.
pub fn servers_file(path: &Path) -> Result<BTreeMap<String, McpServerConfig>, Error> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct McpFile {
        #[serde(default)]
        mcp_servers: BTreeMap<String, McpServerConfig>,
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::usage(format!("cannot read --mcp-config {}: {e}", path.display())))?;
    let file: McpFile = toml::from_str(&text).map_err(|e| {
        Error::usage(format!(
            "--mcp-config {} is not usable: {e}",
            path.display()
        ))
    })?;
    Ok(file.mcp_servers)
}

/// `--mcp NAME=COMMAND [ARGS…]` → the server's name and its stdio configuration, the command
/// line split as a shell would, checked as a config file's table is.
pub fn server_flag(given: &str) -> Result<(String, McpServerConfig), Error> {
    let (name, command_line) = given
        .split_once('=')
        .ok_or_else(|| Error::usage(format!("--mcp {given:?}: write NAME=COMMAND [ARGS…]")))?;
    let words = shlex::split(command_line).ok_or_else(|| {
        Error::usage(format!("--mcp {given:?}: unbalanced quotes in the command"))
    })?;
    let (command, args) = words
        .split_first()
        .ok_or_else(|| Error::usage(format!("--mcp {given:?}: the command is empty")))?;
    let config = McpServerConfig {
        command: Some(command.clone()),
        args: args.to_vec(),
        ..McpServerConfig::default()
    };
    let layer = ConfigLayer {
        mcp_servers: Some(BTreeMap::from([(name.to_owned(), config.clone())])),
        ..ConfigLayer::default()
    };
    check(&layer).map_err(|e| Error::usage(format!("--mcp {given:?}: {e}")))?;
    Ok((name.to_owned(), config))
}

/// One started server as `baton mcp list` shows it.
#[derive(Debug, serde::Serialize)]
pub struct ServerListing {
    /// Its name (`[mcp_servers.NAME]`).
    pub name: String,
    /// `ready` or `failed`.
    pub status: &'static str,
    /// The version it reported, when ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why it did not start, when failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Its tools as the run names them (none when failed).
    pub tools: Vec<ListedTool>,
}

/// A tool of a [`ServerListing`].
#[derive(Debug, serde::Serialize)]
pub struct ListedTool {
    /// The name the run gives it (`mcp__SERVER__TOOL`).
    pub name: String,
    /// Whether it only reads.
    pub effect: baton_core::ToolEffect,
    /// Its description, as the server gave it.
    pub description: String,
}

/// Every server of `mcp`, in name order, with its tools.
pub fn listing(mcp: &McpTools) -> Vec<ServerListing> {
    mcp.servers
        .iter()
        .map(|(name, status)| match status {
            ServerStatus::Ready { server, tools } => ServerListing {
                name: name.clone(),
                status: "ready",
                version: Some(server.version().to_owned()),
                error: None,
                tools: mcp
                    .tools
                    .iter()
                    .map(|t| t.spec())
                    .filter(|spec| tools.contains(&spec.name))
                    .map(|spec| ListedTool {
                        name: spec.name,
                        effect: spec.effect,
                        description: spec.description,
                    })
                    .collect(),
            },
            ServerStatus::Failed(e) => ServerListing {
                name: name.clone(),
                status: "failed",
                version: None,
                error: Some(e.to_string()),
                tools: vec![],
            },
        })
        .collect()
}

impl std::fmt::Display for ServerListing {
    /// A line for the server, then one per tool with its effect.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.error {
            None => writeln!(
                f,
                "{}  ready  {}",
                self.name,
                self.version.as_deref().unwrap_or_default()
            )?,
            Some(error) => writeln!(f, "{}  failed: {error}", self.name)?,
        }
        for tool in &self.tools {
            let effect = match tool.effect {
                baton_core::ToolEffect::ReadOnly => "read_only",
                baton_core::ToolEffect::Mutating => "mutating",
            };
            writeln!(f, "  {:<48} {effect}", tool.name)?;
        }
        Ok(())
    }
}

/// Calls `tool` of `server` once, outside any run, for debugging: the result the model would
/// read, with `exec` (the sandbox the servers were started in) as the call's. A server that is
/// not configured or did not start, or a tool it does not offer, is an [`Error::Usage`].
pub async fn call_tool(
    workspace: &Path,
    mcp: &McpTools,
    exec: ExecEnv,
    server: &str,
    tool: &str,
    arguments: &str,
) -> Result<baton_core::ToolResult, Error> {
    let status = mcp
        .servers
        .iter()
        .find(|(name, _)| name == server)
        .map(|(_, status)| status)
        .ok_or_else(|| Error::usage(format!("no MCP server named {server:?} is configured")))?;
    if let ServerStatus::Failed(e) = status {
        return Err(Error::usage(e));
    }
    let name = baton_mcp::tool_name(server, tool);
    let found = mcp
        .tools
        .iter()
        .find(|t| t.spec().name == name)
        .ok_or_else(|| {
            Error::usage(format!(
                "server {server:?} offers no tool {tool:?} (see `baton mcp list`)"
            ))
        })?;
    let context = baton_tools::ToolContext {
        workspace: baton_tools::Workspace::new(workspace).map_err(Error::usage)?,
        shell_timeout: std::time::Duration::from_secs(60),
        secret_env_vars: vec![],
        exec,
        run: None,
    };
    Ok(found.call(&context, arguments).await)
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
