//! `search_memory`: keyword search (SQLite FTS5, BM25) over the run's history and the
//! workspace files. The index is a per-process cache: built on the first search, brought up
//! to date (new journal events, changed files) before each one, never a source of truth.

use async_trait::async_trait;
use baton_core::memory::SEARCH_MEMORY_TOOL;
use baton_core::{ToolResult, ToolSpec};
use baton_memory::{HitSource, MemoryIndex, Scope};
use baton_tools::{Tool, ToolContext};
use serde::Deserialize;
use tokio::sync::Mutex;

use super::{run_of, spec_named};

const DEFAULT_LIMIT: usize = 10;
const MAX_LIMIT: usize = 50;

#[derive(Default)]
pub(crate) struct SearchMemory {
    /// The index and the next journal sequence number it has not seen.
    index: Mutex<Option<(MemoryIndex, u64)>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    limit: Option<usize>,
}

#[async_trait]
impl Tool for SearchMemory {
    fn spec(&self) -> ToolSpec {
        spec_named(SEARCH_MEMORY_TOOL)
    }

    async fn call(&self, ctx: &ToolContext<'_>, arguments: &str) -> ToolResult {
        let run = match run_of(ctx, SEARCH_MEMORY_TOOL) {
            Ok(run) => run,
            Err(result) => return result,
        };
        let args: SearchArgs = match serde_json::from_str(arguments) {
            Ok(args) => args,
            Err(e) => {
                return ToolResult::error(format!(
                    "invalid arguments: {e}; expected {{\"query\": \"words\", \"scope\": \"all|history|files\", \"limit\": 10}}"
                ));
            }
        };
        let scope = match args.scope.as_deref().unwrap_or("all") {
            "all" => Scope::All,
            "history" => Scope::History,
            "files" => Scope::Files,
            other => {
                return ToolResult::error(format!(
                    "unknown scope `{other}`: use all, history or files"
                ));
            }
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
