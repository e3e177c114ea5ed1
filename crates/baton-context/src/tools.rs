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
