//! An MCP server's tool as a baton tool: `mcp__SERVER__TOOL`, its effect from the server's
//! annotations (`readOnlyHint: true` → read-only, re-run after a crash; otherwise mutating →
//! reported interrupted) unless the configuration says otherwise.

use std::sync::Arc;

use async_trait::async_trait;
use baton_core::{ToolEffect, ToolResult, ToolSpec};
use baton_tools::{Tool, ToolContext};

use crate::config::ServerSpec;
use crate::connection::{ListedTool, Server};
use crate::names::tool_name;
use crate::result::to_tool_result;

pub struct McpTool {
    server: Arc<Server>,
    /// The tool's name on its server.
    remote: String,
    spec: ToolSpec,
}

impl McpTool {
    pub fn new(server: Arc<Server>, listed: &ListedTool) -> McpTool {
        let effect = effect_of(server.spec(), listed);
        let spec = ToolSpec {
            name: tool_name(&server.spec().name, &listed.name),
            description: listed.description.clone(),
            parameters: listed.input_schema.clone(),
            effect,
        };
        McpTool {
            server,
            remote: listed.name.clone(),
            spec,
        }
    }

    /// The server this tool belongs to.
    pub fn server(&self) -> &Arc<Server> {
        &self.server
    }
}

/// Configuration first — the tool named in `mutating_tools` or `read_only_tools`, then the
/// server's `effect` — then the server's annotation; without either a tool may change anything,
/// so it is mutating.
pub fn effect_of(spec: &ServerSpec, listed: &ListedTool) -> ToolEffect {
    if spec.mutating_tools.contains(&listed.name) {
        ToolEffect::Mutating
    } else if spec.read_only_tools.contains(&listed.name) {
        ToolEffect::ReadOnly
    } else if let Some(effect) = spec.effect {
        effect
    } else if listed.read_only_hint == Some(true) {
        ToolEffect::ReadOnly
    } else {
        ToolEffect::Mutating
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    async fn call(&self, _ctx: &ToolContext<'_>, arguments: &str) -> ToolResult {
        let arguments = match serde_json::from_str::<serde_json::Value>(arguments) {
            Ok(serde_json::Value::Object(map)) => map,
            Ok(_) => return ToolResult::error("the arguments must be a JSON object"),
            Err(e) => return ToolResult::error(format!("the arguments are not JSON: {e}")),
        };
        match self.server.call(&self.remote, arguments).await {
            Ok(result) => to_tool_result(&result),
            Err(e) => ToolResult::error(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::McpServerConfig;

    fn listed(name: &str, hint: Option<bool>) -> ListedTool {
        ListedTool {
            name: name.into(),
            description: String::new(),
            input_schema: serde_json::json!({"type": "object"}),
            read_only_hint: hint,
        }
    }

    #[test]
    fn effects_follow_config_then_annotations() {
        let spec = ServerSpec::new(
            "s",
            &McpServerConfig {
                command: Some("x".into()),
                read_only_tools: vec!["search".into()],
                mutating_tools: vec!["peek".into()],
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            effect_of(&spec, &listed("get", Some(true))),
            ToolEffect::ReadOnly
        );
        assert_eq!(
            effect_of(&spec, &listed("set", Some(false))),
            ToolEffect::Mutating
        );
        assert_eq!(
            effect_of(&spec, &listed("unknown", None)),
            ToolEffect::Mutating
        );
        assert_eq!(
            effect_of(&spec, &listed("search", None)),
            ToolEffect::ReadOnly
        );
        assert_eq!(
            effect_of(&spec, &listed("peek", Some(true))),
            ToolEffect::Mutating
        );
    }
}
