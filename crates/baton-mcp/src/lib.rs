//! MCP for baton: the tools of Model Context Protocol servers — local programs on stdio or
//! remote endpoints on streamable HTTP — as ordinary baton tools (`mcp__SERVER__TOOL`), on the
//! official Rust SDK (`rmcp`, pinned; only `connection.rs`, and `result.rs` for the result
//! types, touch it).
//!
//! A server is configured as `[mcp_servers.NAME]` ([`McpServerConfig`]); [`start_servers`]
//! starts them all at once, each bounded by its start-up timeout, and returns their tools and
//! how each start went — a server that fails is reported and left out, never a reason to stop.
//! Each call has its own timeout; a stdio server found dead is restarted once. Stdio servers run
//! under baton's sandbox when one is given, like commands.

mod config;
mod connection;
mod error;
mod names;
mod result;
mod serve;
mod start;
mod tool;

#[cfg(feature = "test-support")]
pub mod testing;

pub use config::{
    DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, McpServerConfig, ServerSpec, Transport,
    server_specs,
};
pub use connection::{LaunchContext, ListedTool, Server};
pub use error::McpError;
pub use names::tool_name;
pub use result::to_tool_result;
pub use serve::{Hosts, ServedTool, Service, ToolHandler, serve_http, serve_stdio};
pub use start::{McpTools, ServerStatus, start_servers};
pub use tool::{McpTool, effect_of};
