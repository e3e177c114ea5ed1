//! The tools the engine serves from the run itself — the memory tools (`update_plan`,
//! `remember`, `recall`, `search_memory`) and the planner's `submit_plan` — as ordinary
//! [`Tool`]s in the run's one registry, after the standard and a program's own tools. They read
//! the run through [`baton_tools::RunAccess`] and journal what they change through its outbox.
//! Each carries its own spec (its schema beside the code that executes it).

mod plan;
mod recall;
mod search;

use std::sync::Arc;

use async_trait::async_trait;
use baton_core::{EventRecord, RunId};
use baton_store::Store;
use baton_tools::{JournalReader, Tool, ToolContext, ToolRegistry};

pub(crate) use plan::{Remember, SubmitPlan, UpdatePlan};
pub(crate) use recall::Recall;
pub(crate) use search::SearchMemory;

/// `tools` followed by the run's own tools, in the order they are offered (stable prompts).
pub(crate) fn with_run_tools(tools: &ToolRegistry) -> ToolRegistry {
    let run_tools: [Arc<dyn Tool>; 5] = [
        Arc::new(UpdatePlan),
        Arc::new(Remember),
        Arc::new(Recall),
        Arc::new(SearchMemory::default()),
        Arc::new(SubmitPlan),
    ];
    run_tools
        .into_iter()
        .fold(tools.clone(), ToolRegistry::with)
}

/// One run's events in the store, as the tools read them.
pub(crate) struct RunJournal<'a> {
    pub(crate) store: &'a dyn Store,
    pub(crate) run_id: &'a RunId,
}

#[async_trait]
impl JournalReader for RunJournal<'_> {
    async fn read(&self, from: u64, limit: u64) -> Result<Vec<EventRecord>, String> {
        self.store
            .read_events(self.run_id, from, limit)
            .await
            .map_err(|e| e.to_string())
    }
}

/// The run a call belongs to, or the error result a run tool gives outside one.
fn run_of<'a>(
    ctx: &ToolContext<'a>,
    tool: &str,
) -> Result<baton_tools::RunAccess<'a>, baton_core::ToolResult> {
    ctx.run
        .ok_or_else(|| baton_core::ToolResult::error(format!("`{tool}` works only inside a run")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use baton_core::memory::{MAX_FACTS, REMEMBER_TOOL, UPDATE_PLAN_TOOL};
    use baton_core::{ToolEffect, ToolSpec};
    use serde_json::json;

    // The specs as baton-context wrote them by hand before they moved beside their tools,
    // kept verbatim: the prompt prefix of every run must not change by a byte.
    /// `update_plan` and `remember`, in the order they are offered.
    fn memory_tool_specs() -> Vec<ToolSpec> {
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
    fn submit_plan_spec() -> ToolSpec {
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

    #[test]
    fn the_run_tools_follow_the_parts_tools_with_the_context_layers_specs() {
        let registry = with_run_tools(&ToolRegistry::standard());
        assert_eq!(
            registry.names(),
            [
                "read_file",
                "write_file",
                "edit_file",
                "list_dir",
                "grep",
                "shell",
                "finish",
                "update_plan",
                "remember",
                "recall",
                "search_memory",
                "submit_plan"
            ]
        );
        // The specs the model was offered when they were hand-written, byte for byte: the
        // prompt prefix of every run is unchanged.
        let specs = registry.specs();
        let mut hand_written = memory_tool_specs();
        hand_written.push(submit_plan_spec());
        assert_eq!(specs[7..9], hand_written[..2]);
        assert_eq!(specs[11], hand_written[2]);
        let recall = serde_json::json!({
            "type": "object",
            "properties": {
                "handle": {"type": "string"},
                "offset": {"type": "integer", "minimum": 0, "description": "first line (0-based)"},
                "limit": {"type": "integer", "minimum": 1, "description": "lines per page (default 400)"}
            },
            "required": ["handle"],
            "additionalProperties": false
        });
        let search = serde_json::json!({
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "scope": {"type": "string", "enum": ["all", "history", "files"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50}
            },
            "required": ["query"],
            "additionalProperties": false
        });
        for (spec, schema) in [(&specs[9], recall), (&specs[10], search)] {
            assert_eq!(
                serde_json::to_string(&spec.parameters).unwrap(),
                serde_json::to_string(&schema).unwrap(),
                "{}",
                spec.name
            );
        }
        assert_eq!(
            specs[9].description,
            "Fetch earlier content exactly by its handle, e.g. `shell#42` from a placeholder like \
             `[shell#42 output elided: ...]`. Long content comes in pages of lines; pass `offset` \
             to continue."
        );
        assert_eq!(
            specs[10].description,
            "Keyword search (BM25) over this run's history (tool outputs, your messages, notes) \
             and the workspace's text files. Returns handles for `recall` and file line ranges."
        );
        for name in [
            "update_plan",
            "remember",
            "recall",
            "search_memory",
            "submit_plan",
        ] {
            assert_eq!(
                registry.effect_of(name),
                Some(baton_core::ToolEffect::ReadOnly),
                "{name}"
            );
        }
    }

    #[tokio::test]
    async fn a_run_tool_outside_a_run_is_an_error_result_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext {
            workspace: baton_tools::Workspace::new(dir.path()).unwrap(),
            shell_timeout: std::time::Duration::from_secs(1),
            secret_env_vars: vec![],
            exec: baton_tools::ExecEnv::unconfined(),
            run: None,
        };
        let result = Recall.call(&ctx, r#"{"handle": "shell#1"}"#).await;
        assert_eq!(result.outcome, baton_core::ToolOutcome::Error);
        assert!(
            result.content.contains("only inside a run"),
            "{}",
            result.content
        );
    }
}
