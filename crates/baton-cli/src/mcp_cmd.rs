//! MCP on the command line: `--mcp NAME=COMMAND…`, `--mcp-config FILE` and `--no-mcp` (a
//! configuration layer over the files), and `baton mcp list` / `baton mcp call`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use baton::config::ConfigLayer;
use clap::{Args, Subcommand};

use crate::{CliError, ModelFlags, exit};

type CliResult = Result<u8, CliError>;

#[derive(Args, Clone, Default)]
pub struct McpFlags {
    /// An MCP server on stdio for this run: NAME=COMMAND [ARGS…], the command line split as a
    /// shell would (repeatable; over [mcp_servers.NAME] of the config files).
    #[arg(long = "mcp", value_name = "NAME=COMMAND")]
    mcp: Vec<String>,
    /// MCP servers from this TOML file's [mcp_servers.NAME] tables (over the config files).
    #[arg(long, value_name = "FILE")]
    mcp_config: Option<PathBuf>,
    /// Run without any MCP server (config: mcp = false).
    #[arg(long, conflicts_with_all = ["mcp", "mcp_config"])]
    no_mcp: bool,
}

impl McpFlags {
    /// The flags as a configuration layer (`--mcp-config` read here, so that a supervisor
    /// passes its children the servers themselves, not a path they may see differently).
    pub fn layer(&self) -> Result<ConfigLayer, CliError> {
        if self.no_mcp {
            return Ok(ConfigLayer {
                mcp: Some(false),
                ..ConfigLayer::default()
            });
        }
        let mut servers = BTreeMap::new();
        if let Some(path) = &self.mcp_config {
            servers.extend(baton_app::mcp::servers_file(path)?);
        }
        for given in &self.mcp {
            let (name, config) = baton_app::mcp::server_flag(given)?;
            servers.insert(name, config);
        }
        Ok(ConfigLayer {
            mcp_servers: (!servers.is_empty()).then_some(servers),
            ..ConfigLayer::default()
        })
    }
}

#[derive(Subcommand)]
pub enum McpCommand {
    /// The configured MCP servers: each started, with its status and its tools (name, effect).
    List {
        #[command(flatten)]
        model: ModelFlags,
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Call one tool of one configured server, for debugging: prints the result the model
    /// would read. Exit 0 on success, 1 when the tool reports an error.
    Call {
        #[command(flatten)]
        model: ModelFlags,
        /// The server's name ([mcp_servers.NAME]).
        server: String,
        /// The tool's name on its server.
        tool: String,
        /// The arguments, a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
    },
}

pub async fn mcp(workspace: &Path, command: McpCommand) -> CliResult {
    let workspace = baton::settings::workspace_dir(workspace)?;
    match command {
        McpCommand::List { model, json } => list(&workspace, &model, json).await,
        McpCommand::Call {
            model,
            server,
            tool,
            arguments,
        } => call(&workspace, &model, &server, &tool, &arguments).await,
    }
}

/// The servers of the configuration (files, environment and flags), started, and the sandbox
/// they run in (a tool called outside a run gets the same).
async fn started(
    workspace: &Path,
    model: &ModelFlags,
) -> Result<Option<(std::sync::Arc<baton_mcp::McpTools>, baton_tools::ExecEnv)>, CliError> {
    // No model is needed to talk to MCP servers: only the layers, not the run's settings.
    let layer = baton::settings::file_and_env_layers(workspace)?
        .overlay(crate::commands::flags_layer_checked(model)?);
    if !baton::mcp::configured(&layer) {
        return Ok(None);
    }
    // What a server is given must not come back out in what is printed (its stderr, say).
    crate::logging::redact_also(&baton::mcp::secret_values(&layer));
    let exec = crate::sandbox_cmd::exec_env(workspace, &layer, &Default::default())?;
    let mcp = baton::mcp::start(workspace, &layer, &exec).await?;
    Ok(mcp.map(|mcp| (mcp, exec)))
}

async fn list(workspace: &Path, model: &ModelFlags, json: bool) -> CliResult {
    let Some((mcp, _)) = started(workspace, model).await? else {
        if json {
            println!("[]");
        } else {
            println!("no MCP servers configured ([mcp_servers.NAME] in a config file, or --mcp)");
        }
        return Ok(exit::FINISHED);
    };
    let mut listed = baton_app::mcp::listing(&mcp);
    for server in &mut listed {
        server.error = server.error.as_deref().map(crate::logging::redacted);
    }
    if json {
        println!("{}", serde_json::to_value(&listed)?);
    } else {
        listed.iter().for_each(|server| print!("{server}"));
    }
    mcp.shutdown().await;
    let failed = mcp.failures().count();
    Ok(if failed > 0 {
        exit::FAILED
    } else {
        exit::FINISHED
    })
}

async fn call(
    workspace: &Path,
    model: &ModelFlags,
    server: &str,
    tool: &str,
    arguments: &str,
) -> CliResult {
    let Some((mcp, exec)) = started(workspace, model).await? else {
        return Err(CliError::usage(anyhow!(
            "no MCP servers configured ([mcp_servers.NAME] in a config file, or --mcp)"
        )));
    };
    // Every server is shut down, whatever the outcome: a process exits before a dropped
    // session's own cleanup would run.
    let outcome = call_one(workspace, &mcp, exec, server, tool, arguments).await;
    mcp.shutdown().await;
    outcome
}

async fn call_one(
    workspace: &Path,
    mcp: &baton_mcp::McpTools,
    exec: baton_tools::ExecEnv,
    server: &str,
    tool: &str,
    arguments: &str,
) -> CliResult {
    let result = baton_app::mcp::call_tool(workspace, mcp, exec, server, tool, arguments)
        .await
        .map_err(|e| CliError::usage(anyhow!("{}", crate::logging::redacted(&e.to_string()))))?;
    println!("{}", crate::logging::redacted(&result.content));
    Ok(match result.outcome {
        baton_core::ToolOutcome::Success => exit::FINISHED,
        _ => exit::FAILED,
    })
}

impl ModelFlags {
    /// Only the MCP keys of the flags' layer (also as a supervisor passed them): what `resume`
    /// takes from its flags besides the settings overrides.
    pub fn mcp_layer(&self) -> Result<ConfigLayer, CliError> {
        let all = crate::commands::flags_layer_checked(self)?;
        Ok(ConfigLayer {
            mcp: all.mcp,
            mcp_servers: all.mcp_servers,
            ..ConfigLayer::default()
        })
    }
}
