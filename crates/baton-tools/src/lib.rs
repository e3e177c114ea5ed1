//! Agent tools of baton: workspace-confined file tools, listing, grep, shell and `finish`.
//!
//! Every failure — bad arguments, a path outside the workspace, a command that fails — is a
//! [`ToolResult`] the model sees, never an error that stops the run.

mod args;
mod finish;
mod fs_tools;
mod grep_tool;
mod list;
mod output;
mod path;
mod read_file;
mod registry;
mod shell;

pub use baton_sandbox;
pub use finish::Finish;
pub use fs_tools::{EditFile, WriteFile};
pub use grep_tool::Grep;
pub use list::ListDir;
pub use output::CappedBuffer;
pub use path::{Access, PathError, STATE_DIR, Workspace};
pub use read_file::ReadFile;
pub use registry::ToolRegistry;
pub use shell::Shell;
pub use shell::is_secret_var;

use async_trait::async_trait;
use baton_core::{ToolResult, ToolSpec};
use std::sync::Arc;
use std::time::Duration;

/// How commands run: the sandbox every one of them goes through, and the execution policy
/// that decides whether it may run at all.
#[derive(Clone, Debug)]
pub struct ExecEnv {
    pub sandbox: Arc<baton_sandbox::Sandbox>,
    pub policy: Arc<baton_sandbox::policy::Policy>,
}

impl ExecEnv {
    /// No isolation: for tests of tools that are not about the sandbox (see
    /// [`baton_sandbox::Sandbox::unconfined`]).
    pub fn unconfined() -> ExecEnv {
        let sandbox = baton_sandbox::Sandbox::unconfined(baton_sandbox::SandboxConfig::default());
        ExecEnv {
            sandbox: Arc::new(sandbox),
            policy: Arc::new(baton_sandbox::policy::Policy::builtin()),
        }
    }
}

/// What a tool call may use besides its arguments.
#[derive(Clone, Debug)]
pub struct ToolContext {
    pub workspace: Workspace,
    /// Default wall-clock limit of a shell command.
    pub shell_timeout: Duration,
    /// Environment variables never passed to commands (API keys and the like).
    pub secret_env_vars: Vec<String>,
    pub exec: ExecEnv,
}

#[async_trait]
pub trait Tool: Send + Sync {
    fn spec(&self) -> ToolSpec;

    /// Runs the call. `arguments` is the model's raw argument text; parsing it is the tool's
    /// job, and a parse failure is an error result.
    async fn call(&self, ctx: &ToolContext, arguments: &str) -> ToolResult;
}

/// Helpers shared by the tools' unit tests.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod test_support {
    use super::*;

    /// A context over a fresh temporary workspace (keep the directory alive while using it).
    pub(crate) fn ctx() -> (tempfile::TempDir, ToolContext) {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext {
            workspace: Workspace::new(dir.path()).unwrap(),
            shell_timeout: Duration::from_secs(10),
            secret_env_vars: vec![],
            exec: ExecEnv::unconfined(),
        };
        (dir, ctx)
    }

    pub(crate) async fn call(
        tool: &dyn Tool,
        ctx: &ToolContext,
        args: serde_json::Value,
    ) -> ToolResult {
        tool.call(ctx, &args.to_string()).await
    }
}
