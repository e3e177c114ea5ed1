//! The code index in a run: the `search_code` and `repo_map` tools, the repo map in briefs,
//! and the index kept up to date in the background.
//!
//! The index (`index/index.db` in the workspace's state directory, beside the journal and out
//! of reach of the agent's commands) is opened when the engine is built. A background task
//! brings it up to date — files first, then the vectors of new chunks — at start and after
//! every mutating tool call, never inside a turn: a search uses the index as it is (stale
//! files are re-read first, which costs a directory walk), and chunks not embedded yet are
//! found by their keywords. The run's end waits (up to 10 s) for the refresh its last change
//! asked for, then holds embedding and waits for the request in flight, so that what the
//! refresh spends on embeddings is journaled with the run ([`SideUsage::settle`]).

mod tools;

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use baton_context::tokens::Encoding;
use baton_core::{Event, EventRecord, RunObserver, RunState, ToolEffect};
use baton_embed::{EmbedCall, UsageSink};
use baton_engine::{RepoMapSource, SideUsage};
use baton_index::{CodeIndex, DEFAULT_MAP_TOKENS, MapRequest, VectorCache};
use baton_tools::{Tool, ToolRegistry};
use tokio::sync::{Notify, watch};

use crate::Error;
use crate::config::ConfigLayer;
use crate::embeddings::{self, Embeddings};

/// The model-facing name of the code search tool.
pub const SEARCH_CODE_TOOL: &str = "search_code";
/// The model-facing name of the repo map tool.
pub const REPO_MAP_TOOL: &str = "repo_map";
/// Most tokens a `repo_map` call may ask for.
const MAX_MAP_TOKENS: usize = 8_000;
/// How long a run's end waits for the embedding request in flight once the refresh is held
/// (see [`SideUsage::settle`]): longer than a request's own timeout and its retries normally
/// take, so only a server that hangs is given up on.
const IN_FLIGHT_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// The workspace's code index with its embedder, as a run uses it.
pub struct CodeIntel {
    index: CodeIndex,
    embeddings: Option<Embeddings>,
    cache: Option<Arc<dyn VectorCache>>,
    /// Tokens of the map in briefs; 0: none.
    brief_tokens: usize,
    refresh: Notify,
    /// Refreshes asked for so far (the start and each poke) …
    requested: AtomicU64,
    /// … and the number of the latest one the background task has finished.
    completed: watch::Sender<u64>,
    /// Embedding calls not journaled yet (see [`SideUsage`]).
    pending: Arc<PendingUsage>,
}

/// Embedding calls as the metered embedder reports them, until the engine takes them.
#[derive(Default)]
struct PendingUsage(Mutex<Vec<EmbedCall>>);

impl UsageSink for PendingUsage {
    fn record(&self, call: &EmbedCall) {
        if let Ok(mut calls) = self.0.lock() {
            calls.push(call.clone());
        }
    }
}

/// One `embeddings_used` event per model for the calls since the last turn. A process killed
/// before the next turn loses those (never journals them twice): the vectors they made are
/// stored, so they are not paid for again either.
#[async_trait]
impl SideUsage for CodeIntel {
    /// Waits until the refresh asked for by the run's last change is done: its embeddings are
    /// then journaled with the run rather than spent after it ended. A refresh that outlasts
    /// `within` is held: no new embedding request starts (the chunks left are embedded at the
    /// next change or run; search finds them by keyword meanwhile), and the request in flight
    /// is waited for, so that everything spent is journaled. After a person's stop (`within`
    /// zero) nothing is waited for.
    async fn settle(&self, within: std::time::Duration) {
        let asked = self.requested.load(Ordering::SeqCst);
        let mut done = self.completed.subscribe();
        if tokio::time::timeout(within, done.wait_for(|n| *n >= asked))
            .await
            .is_ok()
        {
            return;
        }
        let Some(embeddings) = &self.embeddings else {
            return;
        };
        embeddings.metered.hold();
        if within.is_zero() {
            return;
        }
        if tokio::time::timeout(IN_FLIGHT_WAIT, done.wait_for(|n| *n >= asked))
            .await
            .is_err()
        {
            tracing::warn!(
                "the code index's embedding request outlasted {IN_FLIGHT_WAIT:?} after the run \
                 ended; what it costs is not journaled"
            );
        }
    }

    fn take(&self) -> Vec<Event> {
        let calls = match self.pending.0.lock() {
            Ok(mut calls) => std::mem::take(&mut *calls),
            Err(_) => return Vec::new(),
        };
        let mut by_model: std::collections::BTreeMap<String, (u32, u64, u64, Option<f64>)> =
            Default::default();
        for call in calls {
            let entry = by_model.entry(call.model_id).or_default();
            entry.0 += 1;
            entry.1 += call.inputs;
            entry.2 += call.input_tokens;
            if let Some(cost) = call.cost_usd {
                entry.3 = Some(entry.3.unwrap_or(0.0) + cost);
            }
        }
        by_model
            .into_iter()
            .map(
                |(model, (calls, inputs, input_tokens, cost_usd))| Event::EmbeddingsUsed {
                    model,
                    calls,
                    inputs,
                    input_tokens,
                    cost_usd,
                },
            )
            .collect()
    }
}

impl std::fmt::Debug for CodeIntel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeIntel")
            .field("root", &self.index.root())
            .field("embeddings", &self.embeddings)
            .finish_non_exhaustive()
    }
}

/// The tools of a run: the standard ones, then `search_code` and `repo_map` (with a code
/// index), then the MCP servers' — a fixed order, so prompts stay stable.
pub fn run_tools(code: Option<&Arc<CodeIntel>>, mcp: Option<&baton_mcp::McpTools>) -> ToolRegistry {
    let base = ToolRegistry::standard();
    let base = match code {
        Some(code) => code.registry(base),
        None => base,
    };
    crate::mcp::registry(base, mcp)
}

/// `extensions` with the code index's repo maps in briefs and its embedding usage journaled
/// (settled at the run's end), when there is a code index.
pub fn with_code(
    extensions: baton_engine::Extensions,
    code: Option<&Arc<CodeIntel>>,
) -> baton_engine::Extensions {
    match code {
        Some(code) => baton_engine::Extensions {
            repo_map: Some(code.clone()),
            side_usage: Some(code.clone()),
            ..extensions
        },
        None => extensions,
    }
}

/// `observer` and the code index's refresher, as one observer.
pub fn observing(
    observer: Arc<dyn RunObserver>,
    code: Option<&Arc<CodeIntel>>,
) -> Arc<dyn RunObserver> {
    match code {
        Some(code) => Arc::new(baton_core::Fanout(vec![observer, code.observer()])),
        None => observer,
    }
}

/// Counts tokens as OpenAI's o200k tokenizer does: close enough for a budget of any model.
pub fn count_tokens(text: &str) -> usize {
    Encoding::O200k.count(text) as usize
}

impl CodeIntel {
    /// Opens the index of `workspace` with the embedder `layer` configures. `store_url` is the
    /// PostgreSQL store, if any (the default shared vector cache). Loads a local model (about a
    /// second), so call it once per process.
    pub async fn open(
        workspace: &Path,
        layer: &ConfigLayer,
        store_url: Option<&str>,
    ) -> Result<Arc<CodeIntel>, Error> {
        let path = baton_state::StateDir::for_workspace(workspace).code_index();
        let index = CodeIndex::open_at(workspace, &path)
            .await
            .map_err(|e| Error::failed(format!("the code index: {e}")))?;
        let config = layer.embeddings.clone();
        let store_url = store_url.map(str::to_owned);
        let embeddings = tokio::task::spawn_blocking(move || {
            embeddings::resolve(config.as_ref(), store_url.as_deref(), &|k| {
                std::env::var(k).ok()
            })
        })
        .await
        .map_err(|e| Error::failed(format!("loading the embedder: {e}")))??;
        let cache = match embeddings.as_ref().and_then(|e| e.cache.clone()) {
            Some(target) => Some(target.connect().await?),
            None => None,
        };
        let brief_tokens = layer
            .repo_map
            .as_ref()
            .and_then(|m| m.tokens)
            .map_or(DEFAULT_MAP_TOKENS, |t| t as usize);
        let pending = Arc::new(PendingUsage::default());
        if let Some(e) = &embeddings {
            e.metered.set_sink(pending.clone());
        }
        Ok(Arc::new(CodeIntel {
            index,
            embeddings,
            cache,
            brief_tokens,
            refresh: Notify::new(),
            requested: AtomicU64::new(0),
            completed: watch::Sender::new(0),
            pending,
        }))
    }

    /// The index for a command that is not a run (`baton index`, `search`, `map`): the
    /// workspace's configuration, and the store's URL when it is PostgreSQL (the shared
    /// embedding cache may live there).
    pub async fn for_command(
        workspace: &Path,
        store: Option<&str>,
    ) -> Result<Arc<CodeIntel>, Error> {
        let layer = crate::settings::file_and_env_layers(workspace)?;
        let postgres =
            store.filter(|url| url.starts_with("postgres://") || url.starts_with("postgresql://"));
        CodeIntel::open(workspace, &layer, postgres).await
    }

    /// Brings the index up to date now — files, then the vectors of chunks without one —
    /// calling `progress(done, total)` while it embeds.
    pub async fn bring_up_to_date(
        &self,
        progress: baton_index::Progress<'_>,
    ) -> Result<(baton_index::UpdateReport, baton_index::EmbedReport), Error> {
        let index = self.index();
        let update = index
            .update()
            .await
            .map_err(|e| Error::failed(format!("indexing {}: {e}", index.root().display())))?;
        let mut embed = baton_index::EmbedReport::default();
        if let Some(embeddings) = self.embeddings() {
            embed = index
                .embed_missing(&embeddings.metered, self.cache(), progress)
                .await
                .map_err(|e| {
                    Error::failed(format!("embedding with {}: {e}", embeddings.description))
                })?;
        }
        Ok((update, embed))
    }

    /// Opens the index for a run and starts its background refresher. A misconfigured
    /// embedder is an error (the user asked for it); an index that cannot be opened (a
    /// read-only workspace) is logged and the run goes on without the code tools.
    pub async fn for_run(
        workspace: &Path,
        layer: &ConfigLayer,
        store_url: Option<&str>,
    ) -> Result<Option<Arc<CodeIntel>>, Error> {
        match CodeIntel::open(workspace, layer, store_url).await {
            Ok(intel) => {
                intel.spawn_refresher();
                Ok(Some(intel))
            }
            Err(e) if e.is_usage() => Err(e),
            Err(e) => {
                tracing::warn!("the run goes on without code search: {e}");
                Ok(None)
            }
        }
    }

    /// The index itself.
    pub fn index(&self) -> &CodeIndex {
        &self.index
    }

    /// The embedder, if one is configured.
    pub fn embeddings(&self) -> Option<&Embeddings> {
        self.embeddings.as_ref()
    }

    /// The shared vector cache, if one is configured.
    pub fn cache(&self) -> Option<&dyn VectorCache> {
        self.cache.as_deref()
    }

    /// `base` with `search_code` and `repo_map` after its own tools.
    pub fn registry(self: &Arc<Self>, base: ToolRegistry) -> ToolRegistry {
        let search: Arc<dyn Tool> = Arc::new(tools::SearchCode(self.clone()));
        let map: Arc<dyn Tool> = Arc::new(tools::RepoMapTool(self.clone()));
        base.with(search).with(map)
    }

    /// Brings files and vectors up to date now; errors are logged (the index is a cache).
    pub async fn refresh_now(&self) {
        if let Err(e) = self.index.update().await {
            tracing::warn!("code index update failed: {e}");
            return;
        }
        if let Some(embeddings) = &self.embeddings {
            match self
                .index
                .embed_missing(&embeddings.metered, self.cache.as_deref(), &|_, _| {})
                .await
            {
                Ok(_) => {}
                Err(baton_index::IndexError::Embed(baton_embed::EmbedError::Held)) => {
                    tracing::debug!("embedding held at the run's end; the rest waits");
                }
                Err(e) => tracing::warn!("embedding the code index failed: {e}"),
            }
        }
    }

    /// Starts the background task that refreshes the index now and after each
    /// [`CodeIntel::poke`]. It ends with the runtime.
    pub fn spawn_refresher(self: &Arc<Self>) {
        // The first refresh is a request too: a run that ends at once waits for it (bounded).
        self.requested.fetch_add(1, Ordering::SeqCst);
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                // What this refresh covers: every request up to now (a poke during it is
                // another request, served by the next round).
                let serving = this.requested.load(Ordering::SeqCst);
                this.refresh_now().await;
                this.completed.send_replace(serving);
                this.refresh.notified().await;
            }
        });
    }

    /// Asks the background task for a refresh (several pokes during one refresh make one more).
    /// Ends a hold the end of an earlier run put on embedding.
    pub fn poke(&self) {
        if let Some(embeddings) = &self.embeddings {
            embeddings.metered.go_on();
        }
        self.requested.fetch_add(1, Ordering::SeqCst);
        self.refresh.notify_one();
    }

    /// An observer that pokes the refresher after every mutating tool call.
    pub fn observer(self: &Arc<Self>) -> Arc<dyn RunObserver> {
        Arc::new(RefreshOnChange {
            intel: self.clone(),
            mutating: Mutex::new(HashSet::new()),
        })
    }

    async fn map(&self, focus: &str, prefix: Option<&str>, tokens: usize) -> Result<String, Error> {
        self.index
            .update()
            .await
            .map_err(|e| Error::failed(format!("the code index: {e}")))?;
        self.index
            .map(
                &MapRequest {
                    focus,
                    path_prefix: prefix,
                    max_tokens: tokens,
                },
                &count_tokens,
            )
            .await
            .map_err(|e| Error::failed(format!("the repo map: {e}")))
    }
}

#[async_trait]
impl RepoMapSource for CodeIntel {
    async fn render(&self, focus: &str) -> Option<String> {
        if self.brief_tokens == 0 {
            return None;
        }
        match self.map(focus, None, self.brief_tokens).await {
            Ok(map) if !map.is_empty() => Some(map),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!("no repo map for the brief: {e}");
                None
            }
        }
    }
}

/// Pokes the refresher when a mutating call finishes (its started event says which are).
struct RefreshOnChange {
    intel: Arc<CodeIntel>,
    mutating: Mutex<HashSet<String>>,
}

impl RunObserver for RefreshOnChange {
    fn on_event(&self, record: &EventRecord, _state: &RunState) {
        let Ok(mut open) = self.mutating.lock() else {
            return;
        };
        match &record.event {
            Event::ToolCallStarted {
                call_id,
                effect: ToolEffect::Mutating,
                ..
            } => {
                open.insert(call_id.clone());
            }
            Event::ToolCallFinished { call_id, .. } if open.remove(call_id) => self.intel.poke(),
            _ => {}
        }
    }
}

/// Deletes the workspace's code index (`baton index --rebuild`); the next open builds it anew.
pub fn delete_index(workspace: &Path) -> Result<(), Error> {
    let db = baton_state::StateDir::for_workspace(workspace).code_index();
    let Some(dir) = db.parent() else {
        return Ok(());
    };
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::failed(format!(
            "cannot delete {}: {e}",
            dir.display()
        ))),
    }
}
