//! `finish`: the model's way to say the goal is done.

use crate::{ToolContext, TypedTool};
use async_trait::async_trait;
use baton_core::{FINISH_TOOL, ToolEffect, ToolResult};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
/// The arguments the model sends.
pub struct FinishArgs {
    /// What was done and how it was verified (commands run, tests passing), plus anything left
    /// open. This is the final report of the run.
    summary: String,
}

/// Ends the run. Changes nothing itself: the engine treats its successful result as the finish
/// request, so the effect is read-only.
pub struct Finish;

#[async_trait]
impl TypedTool for Finish {
    type Args = FinishArgs;
    const NAME: &'static str = FINISH_TOOL;
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;

    fn description(&self) -> String {
        "Call this once the goal is fully done and verified, to end the run. Do not call it \
             while work remains or checks fail."
            .into()
    }

    async fn run(&self, _ctx: &ToolContext<'_>, args: FinishArgs) -> ToolResult {
        let summary = args.summary.trim();
        if summary.is_empty() {
            return ToolResult::error(
                "summary is empty; say what was done and how it was verified",
            );
        }
        ToolResult::success(summary)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::Tool;
    use crate::Workspace;
    use baton_core::ToolOutcome;
    use std::time::Duration;

    #[tokio::test]
    async fn finish_returns_summary_or_error() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext {
            workspace: Workspace::new(dir.path()).unwrap(),
            shell_timeout: Duration::from_secs(1),
            secret_env_vars: vec![],
            exec: crate::ExecEnv::unconfined(),
            run: None,
        };
        let r = Finish
            .call(&ctx, r#"{"summary": "Built it; cargo test passes."}"#)
            .await;
        assert_eq!(r, ToolResult::success("Built it; cargo test passes."));
        let r = Finish.call(&ctx, r#"{"summary": "  "}"#).await;
        assert_eq!(r.outcome, ToolOutcome::Error);
        let r = Finish.call(&ctx, "{}").await;
        assert!(
            r.content.contains("missing field `summary`"),
            "{}",
            r.content
        );
        assert_eq!(Finish.spec().name, FINISH_TOOL);
        assert_eq!(Finish.spec().effect, ToolEffect::ReadOnly);
    }
}
