//! Keyword memory for a run: SQLite FTS5 full-text search, ranked by BM25, over the run's
//! journal (assistant messages, tool calls and results, notes, the goal). It backs the agent's
//! `search_memory` tool — the retrieval half of the "summary + retrieval" memory: compacted
//! history is summarised in the prompt, and anything a summary dropped can be found again here
//! and read back by its handle (`shell#42`).
//!
//! This crate indexes the journal only. The workspace's files have one index, baton-index's
//! [`CodeIndex`](baton_index::CodeIndex); a search of files or of both scopes is answered from
//! it ([`MemoryIndex::search`] takes it), with file hits named by file and line range
//! (`src/lib.rs:41-80`).
//!
//! A [`MemoryIndex`] lives in a private temporary SQLite database (deleted on drop) and is
//! rebuilt cheaply: [`MemoryIndex::index_events`] is incremental, so a caller re-runs it before
//! each search.
//!
//! # Tokenizer
//!
//! `unicode61 remove_diacritics 2 tokenchars '_'` (the code index's too): words are runs of
//! letters and digits plus `_`, case and accents folded. `snake_case_names` are one word
//! (searching `snake_case_names` finds exactly that identifier), `camelCase` is one word, and
//! punctuation separates words, so `foo.bar(x)` is the words `foo bar x`. The parts of compound
//! identifiers (`snake`, `case`, `names`; `camel`, `Case`) are indexed too, in a separate column
//! weighted at half, so a search for a part finds the identifiers made of it, ranked below exact
//! uses. Trigrams would find substrings, but triple the index, miss queries under three
//! characters and rank worse.
//!
//! # Queries
//!
//! Any text is accepted (see [`baton_index::query`] for the exact rules, the same for the
//! journal and the files): whitespace-separated chunks become quoted phrases that must all
//! match (`std::fs::read` matches those three words in a row); when that finds nothing, any
//! single word may match. FTS5 syntax in the text is never interpreted. Text without a single
//! word is [`MemoryError::EmptyQuery`].
//!
//! # Ranking
//!
//! FTS5's `bm25()`, negated: [`Hit::score`] is higher for better hits. A search of both scopes
//! merges the journal's hits and the files' by score; the two come from two tables with their
//! own statistics, so the scores are alike in scale but not exactly comparable.
//!
//! # Known limits
//!
//! - Whole words only, besides identifier parts: `read` does not find `reader`.
//! - The index is a disposable cache: a new process builds it again from the journal.

mod error;
mod events;
mod search;

use std::path::Path;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
use tokio::sync::Mutex;

pub use baton_index::{ELLIPSIS, MATCH_END, MATCH_START, MAX_SNIPPET_CHARS};
pub use error::MemoryError;
pub use search::{Hit, HitSource, MAX_LIMIT, Scope};

use error::db;

/// Handle kind of a run's goal (the `run_started` event), alongside the kinds of
/// [`baton_core::handle`].
pub const GOAL_KIND: &str = "goal";
/// Handle kind of a tool result whose `tool_call_started` event was never indexed.
pub const UNKNOWN_TOOL_KIND: &str = "tool";

/// Connections in the pool: one writer at a time (indexing holds a lock), searches read
/// concurrently from WAL snapshots.
const MAX_CONNECTIONS: u32 = 4;

const SCHEMA: &[&str] = &[
    // `title` holds a tool call's name and arguments; `body` the text; `parts` the sub-words
    // of compound identifiers in both (`baton_index::subwords`).
    "CREATE VIRTUAL TABLE docs USING fts5(title, body, parts, \
     tokenize = \"unicode61 remove_diacritics 2 tokenchars '_'\")",
    // `rank`: BM25 with the sub-words column at half weight.
    "INSERT INTO docs (docs, rank) VALUES ('rank', 'bm25(1.0, 1.0, 0.5)')",
    // Terms buffered in memory before FTS5 writes a segment (default 1 MiB): fewer, larger
    // segments while a long journal is indexed.
    "INSERT INTO docs (docs, rank) VALUES ('hashsize', 16777216)",
    // What each document is; `id` equals the document's rowid in `docs`.
    "CREATE TABLE doc_meta (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL,
        handle TEXT NOT NULL
    )",
    // The highest journal seq indexed per run.
    "CREATE TABLE runs (run_id TEXT PRIMARY KEY, last_seq INTEGER NOT NULL) WITHOUT ROWID",
    // Started tool calls, to name their results.
    "CREATE TABLE tool_calls (
        run_id TEXT NOT NULL,
        call_id TEXT NOT NULL,
        name TEXT NOT NULL,
        arguments TEXT NOT NULL,
        PRIMARY KEY (run_id, call_id)
    ) WITHOUT ROWID",
];

/// A full-text index over run history. Cheap to share by reference; all methods take `&self`.
/// Indexing calls are serialised internally; searches run concurrently.
#[derive(Debug)]
pub struct MemoryIndex {
    pool: SqlitePool,
    /// Held by indexing calls, so that two of them never interleave their read-then-write.
    write_lock: Mutex<()>,
    // Dropped after the pool (fields drop in order), deleting the database files.
    _dir: tempfile::TempDir,
}

impl MemoryIndex {
    /// A new, empty index in a temporary directory of the system's temp dir.
    pub async fn new() -> Result<MemoryIndex, MemoryError> {
        Self::new_in(&std::env::temp_dir()).await
    }

    /// A new, empty index whose database lives in a fresh temporary directory under `parent`.
    pub async fn new_in(parent: &Path) -> Result<MemoryIndex, MemoryError> {
        let dir = tempfile::Builder::new()
            .prefix("baton-memory-")
            .tempdir_in(parent)
            .map_err(|source| MemoryError::Io {
                path: parent.to_owned(),
                source,
            })?;
        // A disposable cache: no durability needed, so no fsync at all.
        let options = SqliteConnectOptions::new()
            .filename(dir.path().join("memory.db"))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(sqlx::sqlite::SqliteSynchronous::Off)
            .busy_timeout(Duration::from_secs(30))
            .pragma("temp_store", "memory")
            .pragma("cache_size", "-16384");
        let pool = SqlitePoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect_with(options)
            .await
            .map_err(db("opening the index database"))?;
        for statement in SCHEMA {
            sqlx::query(*statement)
                .execute(&pool)
                .await
                .map_err(db("creating the index schema"))?;
        }
        Ok(MemoryIndex {
            pool,
            write_lock: Mutex::new(()),
            _dir: dir,
        })
    }

    /// Number of indexed documents (history entries).
    pub async fn document_count(&self) -> Result<u64, MemoryError> {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM doc_meta")
            .fetch_one(&self.pool)
            .await
            .map_err(db("counting documents"))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }
}
