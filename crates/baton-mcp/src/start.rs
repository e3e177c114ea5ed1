//! Starting every configured server at once, each bounded by its own start-up timeout: one
//! slow or broken server costs at most its timeout and its tools, never the run.

use std::sync::Arc;

use baton_tools::Tool;

use crate::McpError;
use crate::config::ServerSpec;
use crate::connection::{LaunchContext, Server};
use crate::tool::McpTool;

/// How one server's start went.
pub enum ServerStatus {
    Ready {
        server: Arc<Server>,
        /// Its offered tools' names in the run (`mcp__SERVER__TOOL`).
        tools: Vec<String>,
    },
    Failed(McpError),
}

/// The started servers' tools, in a deterministic order (server name, then the server's own
/// order), and how each server's start went, in name order.
pub struct McpTools {
    pub tools: Vec<Arc<dyn Tool>>,
    pub servers: Vec<(String, ServerStatus)>,
}

impl McpTools {
    /// The servers that failed, with why.
    pub fn failures(&self) -> impl Iterator<Item = &McpError> {
        self.servers.iter().filter_map(|(_, s)| match s {
            ServerStatus::Failed(e) => Some(e),
            ServerStatus::Ready { .. } => None,
        })
    }

    /// Ends every server's session.
    pub async fn shutdown(&self) {
        for (_, status) in &self.servers {
            if let ServerStatus::Ready { server, .. } = status {
                server.shutdown().await;
            }
        }
    }
}

/// Starts `specs` concurrently.
pub async fn start_servers(specs: Vec<ServerSpec>, context: LaunchContext) -> McpTools {
    let mut tasks = tokio::task::JoinSet::new();
    for (i, spec) in specs.into_iter().enumerate() {
        let context = context.clone();
        let name = spec.name.clone();
        tasks.spawn(async move { (i, name, Server::start(spec, context).await) });
    }
    let mut started = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(one) => started.push(one),
            // A start that panicked is a bug in the SDK or here; the other servers go on.
            Err(e) => tracing::error!("an MCP server's start panicked: {e}"),
        }
    }
    started.sort_by_key(|(i, _, _)| *i);
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    let mut servers = Vec::new();
    let mut taken = std::collections::HashSet::new();
    for (_, name, outcome) in started {
        match outcome {
            Ok((server, listed)) => {
                // Two tools can end up with one name (server `a__b`'s `c`, server `a`'s
                // `b__c`; characters made `_`): the first keeps it, the other is left out, so
                // that no tool silently answers for another.
                let offered: Vec<McpTool> = listed
                    .iter()
                    .filter(|t| server.spec().offers(&t.name))
                    .map(|t| McpTool::new(server.clone(), t))
                    .filter(|t| {
                        let fresh = taken.insert(t.spec().name);
                        if !fresh {
                            tracing::warn!(
                                "MCP tool {} of server {name} is left out: its name is taken",
                                t.spec().name
                            );
                        }
                        fresh
                    })
                    .collect();
                let names = offered.iter().map(|t| t.spec().name).collect();
                tools.extend(offered.into_iter().map(|t| Arc::new(t) as Arc<dyn Tool>));
                servers.push((
                    name,
                    ServerStatus::Ready {
                        server,
                        tools: names,
                    },
                ));
            }
            Err(e) => servers.push((name, ServerStatus::Failed(e))),
        }
    }
    McpTools { tools, servers }
}
