//! The hand-written specs of the tools the engine serves from the run whose arguments are
//! parsed by baton-core's validators — the same the reducer applies them with (`update_plan`,
//! `remember`) — or deliberately stricter than their parser (`submit_plan`'s schema asks for
//! every field; the plan parser accepts gaps so that it can name the missing one). `recall` and
//! `search_memory` derive theirs from their argument structs (`baton-engine/src/tools`).

use baton_core::memory::{MAX_FACTS, REMEMBER_TOOL, UPDATE_PLAN_TOOL};
use baton_core::{ToolEffect, ToolSpec};
use serde_json::json;

/// `update_plan` and `remember`, in the order they are offered.
pub fn memory_tool_specs() -> Vec<ToolSpec> {
    vec![
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
        },
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
        },
    ]
}

/// The planner's tool, offered only to runs that plan (`--plan-only`, `--plan auto`).
pub fn submit_plan_spec() -> ToolSpec {
    ToolSpec {
        name: baton_core::SUBMIT_PLAN_TOOL.into(),
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
