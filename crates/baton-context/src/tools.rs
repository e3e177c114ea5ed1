//! Definitions of the memory tools the engine serves from the run itself (not from the
//! workspace): they are part of the context layer's contract with the model.

use baton_core::memory::{
    MAX_FACTS, RECALL_TOOL, REMEMBER_TOOL, SEARCH_MEMORY_TOOL, UPDATE_PLAN_TOOL,
};
use baton_core::{ToolEffect, ToolSpec};
use serde_json::json;

/// The memory tools, in the fixed order they are offered.
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
        ToolSpec {
            name: RECALL_TOOL.into(),
            description: "Fetch earlier content exactly by its handle, e.g. `shell#42` from a \
                          placeholder like `[shell#42 output elided: ...]`. Long content comes \
                          in pages of lines; pass `offset` to continue."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "handle": {"type": "string"},
                    "offset": {"type": "integer", "minimum": 0, "description": "first line (0-based)"},
                    "limit": {"type": "integer", "minimum": 1, "description": "lines per page (default 400)"}
                },
                "required": ["handle"],
                "additionalProperties": false
            }),
            effect: ToolEffect::ReadOnly,
        },
        ToolSpec {
            name: SEARCH_MEMORY_TOOL.into(),
            description: "Keyword search (BM25) over this run's history (tool outputs, your \
                          messages, notes) and the workspace's text files. Returns handles for \
                          `recall` and file line ranges."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "scope": {"type": "string", "enum": ["all", "history", "files"]},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50}
                },
                "required": ["query"],
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
