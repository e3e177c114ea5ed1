//! `search_memory`: keyword search (SQLite FTS5, BM25) over the run's history and the
//! workspace files. History comes from baton-memory's index of the journal, a per-process
//! cache built on the first search; files from the one workspace index, baton-index's code
//! index. Both are brought up to date (new journal events, changed files) before each search
//! and neither is a source of truth.
//!
//! Which workspace index: the workspace's own, the one baton keeps in its state directory
//! (`index/index.db`) — the run's code index, opened when the run was built, so the same
//! database serves `search_code` and this tool. Where there is none (the code index could not
//! be opened, or a program that brings its own tools never built one) or it belongs to another
//! tree (a parallel task's worktree shares its parent's state directory), a private index in a
//! temporary directory, for this process only: workspace search is never lost, it only costs
//! the first search a full read of the workspace, as before there was one index.

use std::collections::HashMap;
use std::path::Path;

use async_trait::async_trait;
use baton_core::memory::SEARCH_MEMORY_TOOL;
use baton_core::{RunId, ToolEffect, ToolResult};
use baton_index::{CodeIndex, IndexError};
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
    indexes: Mutex<Indexes>,
}

/// What the tool keeps between searches; each part opened on the first search that needs it.
#[derive(Default)]
struct Indexes {
    history: Option<MemoryIndex>,
    /// Per run, the next journal sequence number the history index has not seen.
    next_seq: HashMap<RunId, u64>,
    /// The index of the workspace of the last files search (its root says which).
    workspace: Option<CodeIndex>,
}

/// The index of the workspace at `root` (canonical, as `Workspace` keeps it): its lasting one
/// if baton has made it, else a private temporary one (see the module's doc).
async fn open_workspace_index(root: &Path) -> Result<CodeIndex, IndexError> {
    let lasting = baton_state::StateDir::for_workspace(root).code_index();
    if !baton_state::is_worktree(root) && lasting.is_file() {
        match CodeIndex::open_at(root, &lasting).await {
            Ok(index) => return Ok(index),
            Err(e) => tracing::warn!(
                "search_memory cannot open the workspace's code index ({e}); it searches a \
                 private index of the workspace instead"
            ),
        }
    }
    CodeIndex::open_temporary(root, &std::env::temp_dir()).await
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
        let mut guard = self.indexes.lock().await;
        let indexes = &mut *guard;
        if indexes.history.is_none() {
            match MemoryIndex::new().await {
                Ok(index) => indexes.history = Some(index),
                Err(e) => return ToolResult::error(format!("cannot open the search index: {e}")),
            }
        }
        let Some(history) = indexes.history.as_ref() else {
            return ToolResult::error("the search index is unavailable");
        };
        let run_id = run.state.run_id.as_ref();
        if scope != Scope::Files {
            let next_seq = run_id.and_then(|id| indexes.next_seq.get(id)).copied();
            match run.journal.read(next_seq.unwrap_or(0), u64::MAX).await {
                Ok(events) => {
                    if let Err(e) = history.index_events(&events).await {
                        return ToolResult::error(format!("cannot index the run's history: {e}"));
                    }
                    if let (Some(id), Some(last)) = (run_id, events.last()) {
                        indexes.next_seq.insert(id.clone(), last.seq + 1);
                    }
                }
                Err(e) => return ToolResult::error(format!("cannot read the journal: {e}")),
            }
        }
        let mut notes = String::new();
        let root = ctx.workspace.root();
        if scope != Scope::History {
            if indexes.workspace.as_ref().is_none_or(|w| w.root() != root) {
                match open_workspace_index(root).await {
                    Ok(index) => indexes.workspace = Some(index),
                    Err(e) => {
                        return ToolResult::error(format!("cannot open the workspace index: {e}"));
                    }
                }
            }
            let Some(workspace) = indexes.workspace.as_ref() else {
                return ToolResult::error("the workspace index is unavailable");
            };
            match workspace.update().await {
                Ok(report) if report.file_cap_hit => notes.push_str(
                    "\n(note: the workspace has more files than the index takes; some were not searched)",
                ),
                Ok(_) => {}
                Err(e) => return ToolResult::error(format!("cannot index the workspace: {e}")),
            }
        }
        let workspace = indexes
            .workspace
            .as_ref()
            .filter(|_| scope != Scope::History);
        let hits = match history.search(&args.query, scope, limit, workspace).await {
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
