//! baton as an MCP server (`baton mcp-server`): a fixed set of tools, each answered by the
//! program's [`ToolHandler`], served with rmcp on stdio or on streamable HTTP (behind a bearer
//! token when one is given). The handler's text reaches the client as the tool's result; an
//! `Err` becomes an `isError` result the client's model can read.

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

/// What a server offers: its name and version (the handshake's `serverInfo`), its tools, and
/// who answers them.
pub struct Service {
    pub name: String,
    pub version: String,
    pub tools: Vec<ServedTool>,
    pub handler: Arc<dyn ToolHandler>,
}

/// Which `Host` headers an HTTP server accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hosts {
    /// Loopback names only: rmcp's guard against DNS rebinding, for a server on 127.0.0.1.
    LoopbackOnly,
    /// These only: `name` on any port, `name:port` on that port (a server that knows its
    /// names and port).
    Only(Vec<String>),
    /// Any: a server bound beyond loopback, which has a token instead.
    Any,
}

#[derive(Clone)]
struct Served {
    name: String,
    version: String,
    tools: Arc<Vec<ServedTool>>,
    handler: Arc<dyn ToolHandler>,
}

impl From<Service> for Served {
    fn from(service: Service) -> Served {
        Served {
            name: service.name,
            version: service.version,
            tools: Arc::new(service.tools),
            handler: service.handler,
        }
    }
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

/// Serves `service` on this process's stdin and stdout until the client disconnects.
pub async fn serve_stdio(service: Service) -> Result<(), McpError> {
    let name = service.name.clone();
    let failed = |detail: String| McpError::Start {
        server: name.clone(),
        detail,
        stderr: String::new(),
    };
    let running = Served::from(service)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| failed(format!("the client's handshake failed: {e}")))?;
    running
        .waiting()
        .await
        .map_err(|e| failed(format!("the session ended abnormally: {e}")))?;
    Ok(())
}

/// Serves `service` on streamable HTTP at `/mcp` of `listener` until `shutdown` completes. With
/// `token`, every request must carry `Authorization: Bearer TOKEN` (else 401).
pub async fn serve_http(
    service: Service,
    listener: tokio::net::TcpListener,
    token: Option<String>,
    hosts: Hosts,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), McpError> {
    use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::tower::StreamableHttpService;

    let name = service.name.clone();
    let served = Served::from(service);
    let mut config = StreamableHttpServerConfig::default();
    match hosts {
        Hosts::LoopbackOnly => {}
        Hosts::Only(names) => config = config.with_allowed_hosts(names),
        Hosts::Any => config = config.disable_allowed_hosts(),
    }
    let service = StreamableHttpService::new(
        move || Ok(served.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let token = Arc::new(token);
    let router =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(move |request, next| {
                let token = token.clone();
                bearer_only(token, request, next)
            }));
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|e| McpError::Start {
            server: name,
            detail: format!("serving HTTP failed: {e}"),
            stderr: String::new(),
        })
}

/// Refuses a request without the bearer token (when there is one), before rmcp sees it.
async fn bearer_only(
    token: Arc<Option<String>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if let Some(token) = token.as_ref() {
        let given = request
            .headers()
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, value)| value.trim());
        if !given.is_some_and(|given| same_secret(given, token)) {
            return (
                axum::http::StatusCode::UNAUTHORIZED,
                "a bearer token is required: Authorization: Bearer TOKEN",
            )
                .into_response();
        }
    }
    next.run(request).await
}

/// Compares in time that depends on the lengths only, not on where the first difference is.
fn same_secret(given: &str, expected: &str) -> bool {
    given.len() == expected.len()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::same_secret;

    #[test]
    fn tokens_compare_whole() {
        assert!(same_secret("tok-1", "tok-1"));
        assert!(!same_secret("tok-2", "tok-1"));
        assert!(!same_secret("tok-1x", "tok-1"));
        assert!(!same_secret("", "tok-1"));
    }
}
