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
    open_workspace_index_at(root, &lasting, &std::env::temp_dir()).await
}

/// [`open_workspace_index`] with the lasting index's path and the temporary one's parent given.
async fn open_workspace_index_at(
    root: &Path,
    lasting: &Path,
    temp: &Path,
) -> Result<CodeIndex, IndexError> {
    // Only an existing index is shared: creating one here would make the state directory
    // without the care (modes, marker) a run's start takes. A worktree's state-directory path
    // is its parent's, whose index is of another tree.
    if !baton_state::is_worktree(root) && lasting.is_file() {
        match CodeIndex::open_at(root, lasting).await {
            Ok(index) => return Ok(index),
            Err(e) => tracing::warn!(
                "search_memory cannot open the workspace's code index ({e}); it searches a \
                 private index of the workspace instead"
            ),
        }
    }
    CodeIndex::open_temporary(root, temp).await
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A workspace at `root` with one file.
    fn setup(root: &Path) {
        std::fs::create_dir_all(root).unwrap();
        std::fs::write(root.join("notes.md"), "the quokka config\n").unwrap();
    }

    async fn chunks_at(root: &Path, db: &Path) -> u64 {
        let index = CodeIndex::open_at(root, db).await.unwrap();
        index.stats(None).await.unwrap().chunks
    }

    #[tokio::test]
    async fn the_workspaces_lasting_index_is_shared_when_baton_made_one() {
        let dir = tempfile::tempdir().unwrap();
        let (root, temp) = (dir.path().join("ws"), dir.path().join("tmp"));
        setup(&root);
        std::fs::create_dir(&temp).unwrap();
        let lasting = dir.path().join("state/index/index.db");
        // As a run's code index leaves it: made, not yet brought up to date.
        drop(CodeIndex::open_at(&root, &lasting).await.unwrap());
        let root = root.canonicalize().unwrap();
        let index = open_workspace_index_at(&root, &lasting, &temp)
            .await
            .unwrap();
        index.update().await.unwrap();
        assert_eq!(index.search_text("quokka", 5).await.unwrap().len(), 1);
        // The update went to the lasting database, and no private index was made.
        assert_eq!(chunks_at(&root, &lasting).await, 1);
        assert_eq!(std::fs::read_dir(&temp).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn without_a_lasting_index_a_private_one_searches_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let (root, temp) = (dir.path().join("ws"), dir.path().join("tmp"));
        setup(&root);
        std::fs::create_dir(&temp).unwrap();
        let lasting = dir.path().join("state/index/index.db");
        let root = root.canonicalize().unwrap();
        let index = open_workspace_index_at(&root, &lasting, &temp)
            .await
            .unwrap();
        index.update().await.unwrap();
        assert_eq!(index.search_text("quokka", 5).await.unwrap().len(), 1);
        assert!(!lasting.exists(), "no state directory is made");
        assert_eq!(std::fs::read_dir(&temp).unwrap().count(), 1);
        drop(index);
        assert_eq!(
            std::fs::read_dir(&temp).unwrap().count(),
            0,
            "the private index goes with the process's tool"
        );
    }

    #[tokio::test]
    async fn a_worktree_never_shares_its_parents_index() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("workspaces/ws-0123");
        let parent = dir.path().join("ws");
        setup(&parent);
        let lasting = state.join("index/index.db");
        drop(CodeIndex::open_at(&parent, &lasting).await.unwrap());
        let worktree = state.join("worktrees/child");
        setup(&worktree);
        let temp = dir.path().join("tmp");
        std::fs::create_dir(&temp).unwrap();
        let worktree = worktree.canonicalize().unwrap();
        let index = open_workspace_index_at(&worktree, &lasting, &temp)
            .await
            .unwrap();
        index.update().await.unwrap();
        assert_eq!(
            chunks_at(&parent, &lasting).await,
            0,
            "the parent's index is untouched"
        );
        assert_eq!(std::fs::read_dir(&temp).unwrap().count(), 1);
    }
}
