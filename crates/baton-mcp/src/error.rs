//! What can go wrong with an MCP server, always naming the server (and the tool), so that a
//! user can tell which one is broken.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("MCP server {server:?} is misconfigured: {detail}")]
    Config { server: String, detail: String },
    #[error("MCP server {server:?} did not start: {detail}{}", stderr_suffix(.stderr))]
    Start {
        server: String,
        detail: String,
        /// The last lines the server wrote to stderr, if any.
        stderr: String,
    },
    #[error(
        "MCP server {server:?} did not answer within {}s (startup_timeout_secs){}",
        .after.as_secs(),
        stderr_suffix(.stderr)
    )]
    StartTimeout {
        server: String,
        after: Duration,
        stderr: String,
    },
    #[error("MCP tool {tool:?} of server {server:?} failed: {detail}")]
    Call {
        server: String,
        tool: String,
        detail: String,
    },
    #[error(
        "MCP tool {tool:?} of server {server:?} did not answer within {}s (tool_timeout_secs)",
        .after.as_secs()
    )]
    CallTimeout {
        server: String,
        tool: String,
        after: Duration,
    },
    #[error("MCP server {server:?} is gone (it exited, and was restarted once already): {detail}")]
    Gone { server: String, detail: String },
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.trim().is_empty() {
        String::new()
    } else {
        format!("; its stderr ended with:\n{}", stderr.trim_end())
    }
}

impl McpError {
    /// Whether trying again later may succeed: a timeout or a failed start may be the
    /// server's passing state; a configuration error or a gone server are not.
    pub fn is_retryable(&self) -> bool {
        match self {
            McpError::Start { .. }
            | McpError::StartTimeout { .. }
            | McpError::CallTimeout { .. } => true,
            McpError::Config { .. } | McpError::Call { .. } | McpError::Gone { .. } => false,
        }
    }

    /// The server the error is about.
    pub fn server(&self) -> &str {
        match self {
            McpError::Config { server, .. }
            | McpError::Start { server, .. }
            | McpError::StartTimeout { server, .. }
            | McpError::Call { server, .. }
            | McpError::CallTimeout { server, .. }
            | McpError::Gone { server, .. } => server,
        }
    }
}
