//! `update_plan` and `remember` (validated here by the same parsers the reducer applies them
//! with, from the journaled call), and the planner's `submit_plan` (its accepted plan is
//! journaled as `plan_set` before the call's result).
//!
//! Their schemas are written by hand beside each tool, not derived from an argument struct as
//! `recall`'s and `search_memory`'s are: the arguments of `update_plan` and `remember` are
//! parsed by baton-core's validators (the same the reducer applies them with), and
//! `submit_plan`'s schema is deliberately stricter than its parser (it asks for every field;
//! the plan parser accepts gaps so that it can name the missing one). Their JSON is part of
//! every run's stable prompt prefix: a change of a byte changes every prompt.

use async_trait::async_trait;
use baton_core::memory::{
    MAX_FACTS, PlanStatus, REMEMBER_TOOL, UPDATE_PLAN_TOOL, parse_plan_update, parse_remember,
};
use baton_core::task::PlanFile;
use baton_core::task::PlanSource;
use baton_core::{Event, SUBMIT_PLAN_TOOL, ToolEffect, ToolResult, ToolSpec};
use baton_tools::{Tool, ToolContext};
use serde_json::json;

use super::run_of;

pub(crate) struct UpdatePlan;

#[async_trait]
impl Tool for UpdatePlan {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: UPDATE_PLAN_TOOL.into(),
            description: "Replace your plan: the whole todo list with each step's status. The \
                          plan is shown at the end of every request and survives compaction."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "items": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "step": {"type": "string"},
                                "status": {"type": "string", "enum": ["pending", "in_progress", "done"]}
                            },
                            "required": ["step", "status"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["items"],
                "additionalProperties": false
            }),
            effect: ToolEffect::ReadOnly,
        }
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
        ToolSpec {
            name: REMEMBER_TOOL.into(),
            description: format!(
                "Record a durable fact: a decision and its reason, a finding, a constraint or a \
                 user preference. Facts are never summarised away (at most {MAX_FACTS}; use \
                 `replaces` with a fact's number to correct or merge one)."
            ),
            parameters: json!({
                "type": "object",
                "properties": {
                    "fact": {"type": "string"},
                    "replaces": {"type": "integer", "minimum": 1}
                },
                "required": ["fact"],
                "additionalProperties": false
            }),
            effect: ToolEffect::ReadOnly,
        }
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
/// not set it twice. Invalid plans go back to the model with the problem named. Offered only to
/// runs that plan (`--plan-only`, `--plan auto`).
pub(crate) struct SubmitPlan;

#[async_trait]
impl Tool for SubmitPlan {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: SUBMIT_PLAN_TOOL.into(),
            description: "Submit the plan: the goal split into small tasks, each with a shell \
                          command that checks it (exit code 0 = done). Tasks run in dependency \
                          order, each in a fresh context; an invalid plan is returned with the \
                          problem named."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "tasks": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "id": {"type": "string", "description": "short unique id: letters, digits, - _ ."},
                                "title": {"type": "string"},
                                "instructions": {"type": "string", "description": "what to do, for an engineer who has not seen the other tasks"},
                                "deps": {"type": "array", "items": {"type": "string"}, "description": "ids of tasks that must be done first"},
                                "check": {"type": "string", "description": "shell command run in the workspace; exit 0 means the task is done"},
                                "risky": {"type": "boolean"}
                            },
                            "required": ["id", "title", "instructions", "deps", "check"],
                            "additionalProperties": false
                        }
                    },
                    "check": {"type": "string", "description": "optional: a command that checks the whole goal at the end (e.g. the test suite)"}
                },
                "required": ["tasks"],
                "additionalProperties": false
            }),
            effect: ToolEffect::ReadOnly,
        }
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
