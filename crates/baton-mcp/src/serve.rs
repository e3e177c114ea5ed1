//! baton as an MCP server (`baton mcp-server`): a fixed set of tools, each answered by the
//! program's [`ToolHandler`], served on stdio with rmcp. The handler's text reaches the client
//! as the tool's result; an `Err` becomes an `isError` result the client's model can read.

use std::sync::Arc;

use async_trait::async_trait;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};

use crate::McpError;

/// A tool the server offers.
#[derive(Clone, Debug)]
pub struct ServedTool {
    pub name: String,
    pub description: String,
    /// A JSON-schema object for the arguments.
    pub input_schema: serde_json::Map<String, serde_json::Value>,
    pub read_only: bool,
}

/// Answers the served tools' calls.
#[async_trait]
pub trait ToolHandler: Send + Sync + 'static {
    /// `Ok(text)`: the result; `Err(text)`: a tool error the client reads.
    async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<String, String>;
}

#[derive(Clone)]
struct Served {
    name: String,
    version: String,
    tools: Arc<Vec<ServedTool>>,
    handler: Arc<dyn ToolHandler>,
}

impl ServerHandler for Served {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(self.name.clone(), self.version.clone()))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .tools
            .iter()
            .map(|t| {
                let mut tool = Tool::new(
                    t.name.clone(),
                    t.description.clone(),
                    Arc::new(t.input_schema.clone()),
                );
                let mut annotations = ToolAnnotations::new();
                annotations.read_only_hint = Some(t.read_only);
                tool.annotations = Some(annotations);
                tool
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self.tools.iter().any(|t| t.name == request.name) {
            return Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                ContentBlock::text(format!("no tool named {:?}", request.name)),
            ])));
        }
        let arguments = request.arguments.unwrap_or_default();
        let result = match self.handler.call(&request.name, arguments).await {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(text) => CallToolResult::error(vec![ContentBlock::text(text)]),
        };
        Ok(CallToolResponse::Complete(result))
    }
}

/// Serves `tools` on this process's stdin and stdout until the client disconnects.
pub async fn serve_stdio(
    name: &str,
    version: &str,
    tools: Vec<ServedTool>,
    handler: Arc<dyn ToolHandler>,
) -> Result<(), McpError> {
    let served = Served {
        name: name.to_owned(),
        version: version.to_owned(),
        tools: Arc::new(tools),
        handler,
    };
    let failed = |detail: String| McpError::Start {
        server: name.to_owned(),
        detail,
        stderr: String::new(),
    };
    let running = served
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| failed(format!("the client's handshake failed: {e}")))?;
    running
        .waiting()
        .await
        .map_err(|e| failed(format!("the session ended abnormally: {e}")))?;
    Ok(())
}
