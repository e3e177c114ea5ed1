//! baton's code index: what the agent knows about the workspace's code before it reads it.
//!
//! - [`parse`] and [`chunk`]: tree-sitter (Rust, Python, JavaScript, TypeScript/TSX, Go, Java,
//!   C, C++) gives each file's definitions, the identifiers it uses, and syntax-aware chunks
//!   (functions, methods, classes, impl blocks; line windows elsewhere).
//! - [`map`]: the repo map — files ranked by PageRank over "uses a name defined there", their
//!   best definitions rendered to a token budget. Deterministic, for the cached prompt prefix.
//! - [`CodeIndex`]: all of it in one SQLite file (baton keeps it in the workspace's state
//!   directory, `index/index.db`), kept up to date
//!   incrementally, with FTS5 over the chunks and their vectors, and
//!   [`CodeIndex::search`]: BM25, exact cosine, or both fused by relative score.
//! - [`CodeIndex::search_text`]: the keyword search of the workspace's text that
//!   `search_memory` gives the model (FTS5 phrases, then any word; marked snippets) — the one
//!   index of workspace files, shared by code search and memory search.
//! - [`cache`]: a vector cache shared through PostgreSQL, keyed by model and chunk hash.
//! - [`walk`], [`subwords`], [`query`]: how every index of baton walks the workspace, splits
//!   compound identifiers and turns a model's text into a safe FTS5 query (baton-memory's
//!   journal index uses the last two).
//!
//! The index is a cache of the workspace: it can always be deleted and rebuilt, and a kill at
//! any point leaves it consistent (each file's rows change in one transaction; vectors are
//! keyed by content, so a vector is never attached to the wrong text).

pub mod cache;
pub mod chunk;
mod db;
mod error;
mod index;
mod input_layout;
pub mod lang;
pub mod map;
mod matrix;
pub mod parse;
pub mod query;
pub mod search;
pub mod subwords;
mod text;
mod update;
mod vectors;
pub mod walk;

pub use cache::{PostgresVectorCache, VectorCache};
pub use db::Opened;
pub use error::IndexError;
pub use index::{CodeIndex, IndexStats};
pub use map::{DEFAULT_MAP_TOKENS, MapRequest};
pub use search::{CodeHit, MAX_K, SearchMode, SearchRequest, SearchResults};
pub use text::{ELLIPSIS, MATCH_END, MATCH_START, MAX_SNIPPET_CHARS, TextHit, tidy_snippet};
pub use update::UpdateReport;
pub use vectors::{EmbedReport, Progress};
pub use walk::WorkspaceLimits;

/// Why there is no embedder, for the one line that says so.
pub const NO_EMBEDDER: &str = "no embedder configured ([embeddings] in .baton/config.toml, or \
                               BATON_EMBED_MODEL_DIR): code search is keyword-only";
