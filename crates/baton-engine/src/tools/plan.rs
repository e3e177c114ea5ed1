//! `update_plan` and `remember` (validated here by the same parsers the reducer applies them
//! with, from the journaled call), and the planner's `submit_plan` (its accepted plan is
//! journaled as `plan_set` before the call's result).

use async_trait::async_trait;
use baton_core::memory::{
    PlanStatus, REMEMBER_TOOL, UPDATE_PLAN_TOOL, parse_plan_update, parse_remember,
};
use baton_core::task::PlanFile;
use baton_core::task::PlanSource;
use baton_core::{Event, SUBMIT_PLAN_TOOL, ToolResult, ToolSpec};
use baton_tools::{Tool, ToolContext};

use super::{run_of, spec_named};

pub(crate) struct UpdatePlan;

#[async_trait]
impl Tool for UpdatePlan {
    fn spec(&self) -> ToolSpec {
        spec_named(UPDATE_PLAN_TOOL)
    }

    async fn call(&self, _ctx: &ToolContext<'_>, arguments: &str) -> ToolResult {
        match parse_plan_update(arguments) {
            Ok(plan) => {
                let count = |status| plan.iter().filter(|i| i.status == status).count();
                ToolResult::success(format!(
                    "Plan updated: {} steps ({} done, {} in progress, {} pending).",
                    plan.len(),
                    count(PlanStatus::Done),
                    count(PlanStatus::InProgress),
                    count(PlanStatus::Pending)
                ))
            }
            Err(e) => ToolResult::error(e),
        }
    }
}

pub(crate) struct Remember;

#[async_trait]
impl Tool for Remember {
    fn spec(&self) -> ToolSpec {
        spec_named(REMEMBER_TOOL)
    }

    async fn call(&self, ctx: &ToolContext<'_>, arguments: &str) -> ToolResult {
        let run = match run_of(ctx, REMEMBER_TOOL) {
            Ok(run) => run,
            Err(result) => return result,
        };
        let facts = &run.state.facts;
        match parse_remember(arguments, facts) {
            Ok(update) => ToolResult::success(match update.replaces {
                Some(i) => format!("Fact {} replaced.", i + 1),
                None => format!("Recorded as fact {}.", facts.len() + 1),
            }),
            Err(e) => ToolResult::error(e),
        }
    }
}

/// Validates the plan and journals it while the call is in flight (through the outbox, before
/// the result), so a crash before the result is recorded finds the plan already set and does
/// not set it twice. Invalid plans go back to the model with the problem named.
pub(crate) struct SubmitPlan;

#[async_trait]
impl Tool for SubmitPlan {
    fn spec(&self) -> ToolSpec {
        spec_named(SUBMIT_PLAN_TOOL)
    }

    async fn call(&self, ctx: &ToolContext<'_>, arguments: &str) -> ToolResult {
        let run = match run_of(ctx, SUBMIT_PLAN_TOOL) {
            Ok(run) => run,
            Err(result) => return result,
        };
        if let Some(board) = &run.state.board {
            return ToolResult::success(format!(
                "The plan is set ({} tasks); work on the tasks starts now.",
                board.tasks.len()
            ));
        }
        let plan = match PlanFile::from_json(arguments).and_then(PlanFile::validate) {
            Ok(plan) => plan,
            Err(e) => {
                return ToolResult::error(format!(
                    "the plan was not accepted: {e}. Fix it and call submit_plan again."
                ));
            }
        };
        let count = plan.tasks.len();
        run.outbox.record(Event::PlanSet {
            source: PlanSource::Planner,
            tasks: plan.tasks,
            final_check: plan.final_check,
        });
        ToolResult::success(format!(
            "Plan accepted: {count} tasks. Each task is now worked on in a fresh context."
        ))
    }
}
