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

pub use args::{parse_args, run_blocking, schema_of, spec_for};
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
pub use shell::{is_secret_var, without_secrets};

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
    /// What a command the policy marks `ask` does: refused, or refused and the run paused.
    pub ask: baton_sandbox::policy::AskBehaviour,
    /// Set by a tool that wants the run paused for a person once its result is journaled.
    pub pause_request: Arc<std::sync::Mutex<Option<String>>>,
}

impl ExecEnv {
    /// No isolation: for tests of tools that are not about the sandbox (see
    /// [`baton_sandbox::Sandbox::unconfined`]).
    pub fn unconfined() -> ExecEnv {
        let sandbox = baton_sandbox::Sandbox::unconfined(baton_sandbox::SandboxConfig::default());
        ExecEnv::new(sandbox, baton_sandbox::policy::Policy::builtin())
    }

    pub fn new(sandbox: baton_sandbox::Sandbox, policy: baton_sandbox::policy::Policy) -> ExecEnv {
        ExecEnv {
            sandbox: Arc::new(sandbox),
            policy: Arc::new(policy),
            ask: baton_sandbox::policy::AskBehaviour::Refuse,
            pause_request: Arc::default(),
        }
    }

    /// The same environment with the sandbox in `read-only` mode (policy, `ask` behaviour and
    /// pause slot shared).
    pub fn read_only(&self) -> ExecEnv {
        ExecEnv {
            sandbox: Arc::new(self.sandbox.read_only()),
            policy: self.policy.clone(),
            ask: self.ask,
            pause_request: self.pause_request.clone(),
        }
    }

    /// The pending pause request, if a tool made one (taking it clears it).
    pub fn take_pause_request(&self) -> Option<String> {
        self.pause_request
            .lock()
            .map(|mut slot| slot.take())
            .unwrap_or_else(|poisoned| poisoned.into_inner().take())
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
