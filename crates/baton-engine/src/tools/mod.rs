//! The tools the engine serves from the run itself — the memory tools (`update_plan`,
//! `remember`, `recall`, `search_memory`) and the planner's `submit_plan` — as ordinary
//! [`Tool`]s in the run's one registry, after the standard and a program's own tools. They read
//! the run through [`baton_tools::RunAccess`] and journal what they change through its outbox.

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

/// The spec of a run tool, as the context layer defines it for the model.
fn spec_named(name: &str) -> baton_core::ToolSpec {
    baton_context::memory_tool_specs()
        .into_iter()
        .chain(std::iter::once(baton_context::submit_plan_spec()))
        .find(|spec| spec.name == name)
        .unwrap_or_else(|| unreachable!("the context layer defines every run tool: {name}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
        let mut hand_written = baton_context::memory_tool_specs();
        hand_written.push(baton_context::submit_plan_spec());
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
