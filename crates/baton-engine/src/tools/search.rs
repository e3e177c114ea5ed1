//! `search_memory`: keyword search (SQLite FTS5, BM25) over the run's history and the
//! workspace files. The index is a per-process cache: built on the first search, brought up
//! to date (new journal events, changed files) before each one, never a source of truth.

use async_trait::async_trait;
use baton_core::memory::SEARCH_MEMORY_TOOL;
use baton_core::{ToolEffect, ToolResult};
use baton_memory::{HitSource, MemoryIndex, Scope};
use baton_tools::{ToolContext, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::Mutex;

use super::run_of;

const DEFAULT_LIMIT: usize = 10;
const MAX_LIMIT: usize = 50;

#[derive(Default)]
pub(crate) struct SearchMemory {
    /// The index and the next journal sequence number it has not seen.
    index: Mutex<Option<(MemoryIndex, u64)>>,
}

/// The arguments the model sends.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchArgs {
    query: String,
    scope: Option<SearchScope>,
    #[schemars(range(min = 1, max = 50))]
    limit: Option<usize>,
}

// Where `search_memory` looks (no doc comment: it would become the schema's description).
#[derive(Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[schemars(inline)]
pub(crate) enum SearchScope {
    All,
    History,
    Files,
}

#[async_trait]
impl TypedTool for SearchMemory {
    type Args = SearchArgs;
    const NAME: &'static str = SEARCH_MEMORY_TOOL;
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;

    fn description(&self) -> String {
        "Keyword search (BM25) over this run's history (tool outputs, your messages, notes) and \
         the workspace's text files. Returns handles for `recall` and file line ranges."
            .into()
    }

    async fn run(&self, ctx: &ToolContext<'_>, args: SearchArgs) -> ToolResult {
        let run = match run_of(ctx, SEARCH_MEMORY_TOOL) {
            Ok(run) => run,
            Err(result) => return result,
        };
        let scope = match args.scope.unwrap_or(SearchScope::All) {
            SearchScope::All => Scope::All,
            SearchScope::History => Scope::History,
            SearchScope::Files => Scope::Files,
        };
        let limit = args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
        let mut guard = self.index.lock().await;
        if guard.is_none() {
            match MemoryIndex::new().await {
                Ok(index) => *guard = Some((index, 0)),
                Err(e) => return ToolResult::error(format!("cannot open the search index: {e}")),
            }
        }
        let Some((index, next_seq)) = guard.as_mut() else {
            return ToolResult::error("the search index is unavailable");
        };
        let run_id = run.state.run_id.as_ref();
        if scope != Scope::Files {
            match run.journal.read(*next_seq, u64::MAX).await {
                Ok(events) => {
                    if let Err(e) = index.index_events(&events).await {
                        return ToolResult::error(format!("cannot index the run's history: {e}"));
                    }
                    if let Some(last) = events.last() {
                        *next_seq = last.seq + 1;
                    }
                }
                Err(e) => return ToolResult::error(format!("cannot read the journal: {e}")),
            }
        }
        let mut notes = String::new();
        if scope != Scope::History {
            match index.index_workspace(ctx.workspace.root()).await {
                Ok(report) if report.file_cap_hit => notes.push_str(
                    "\n(note: the workspace has more files than the index takes; some were not searched)",
                ),
                Ok(_) => {}
                Err(e) => return ToolResult::error(format!("cannot index the workspace: {e}")),
            }
        }
        let hits = match index.search(&args.query, scope, limit).await {
            Ok(hits) => hits,
            Err(e) => return ToolResult::error(format!("search failed: {e}")),
        };
        let hits: Vec<_> = hits
            .into_iter()
            .filter(|hit| match &hit.source {
                HitSource::History { run_id: of, .. } => Some(of) == run_id,
                HitSource::File { .. } => true,
            })
            .collect();
        if hits.is_empty() {
            return ToolResult::success(format!("no matches for \"{}\"{notes}", args.query));
        }
        let mut out = format!(
            "{} matches for \"{}\", best first (history: `recall` the handle; files: read_file the lines):",
            hits.len(),
            args.query
        );
        for (i, hit) in hits.iter().enumerate() {
            out.push_str(&format!("\n{}. {} — {}", i + 1, hit.source, hit.snippet));
        }
        out.push_str(&notes);
        ToolResult::success(out)
    }
}
