//! The [`CodeIndex`] itself: the one handle on a workspace's index database, opened here and
//! asked here what it holds.
//!
//! Its fields are the crate's: bringing it up to date (`update.rs`), embedding and vector search
//! (`vectors.rs`), code search (`search.rs`) and text search (`text.rs`) each add their methods
//! in their own module, so this one stays the struct, opening and counting.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use sqlx::SqlitePool;
use tokio::sync::Mutex;

use crate::db::{self, Opened};
use crate::error::{IndexError, db};
use crate::input_layout::vector_key;
use crate::lang::DefKind;
use crate::map::{self, MapDef, MapFile, MapRequest};
use crate::matrix::Matrix;
use crate::walk::WorkspaceLimits;

/// A workspace's code index. Methods take `&self`; updates are serialised inside one process
/// (and across processes by SQLite's locking), searches run concurrently.
pub struct CodeIndex {
    pub(crate) pool: SqlitePool,
    pub(crate) root: PathBuf,
    pub(crate) limits: WorkspaceLimits,
    opened: Opened,
    pub(crate) write_lock: Mutex<()>,
    pub(crate) embed_lock: Mutex<()>,
    pub(crate) matrix: Mutex<Option<Matrix>>,
    /// (generation, model, count) of the last [`CodeIndex::missing_count`]: counting is a scan
    /// of every chunk (~130 ms on 20,000), and a search asks each time.
    pub(crate) missing: Mutex<Option<(i64, String, usize)>>,
    /// The private directory of an index opened by [`CodeIndex::open_temporary`]. Dropped
    /// after the pool (fields drop in order), deleting the database files.
    _scratch: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for CodeIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeIndex")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// Counts of what the index holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct IndexStats {
    pub files: u64,
    pub chunks: u64,
    /// Files per language (`other` for files without a grammar), by name.
    pub languages: BTreeMap<String, u64>,
    pub definitions: u64,
    /// Distinct chunk texts, and how many of them have a vector of the given model.
    pub distinct_chunks: u64,
    pub embedded: u64,
}

impl IndexStats {
    /// The share of distinct chunks with a vector, 0 to 1 (1 for an empty index).
    pub fn embedded_share(&self) -> f64 {
        if self.distinct_chunks == 0 {
            1.0
        } else {
            self.embedded as f64 / self.distinct_chunks as f64
        }
    }
}

impl CodeIndex {
    /// Opens the index of the workspace at `root`, stored at `db_path` (baton keeps it in the
    /// workspace's state directory), creating it (or rebuilding it, if it is unreadable or from
    /// another version) as needed. It is brought up to date by [`CodeIndex::update`], not here.
    pub async fn open_at(root: &Path, db_path: &Path) -> Result<CodeIndex, IndexError> {
        let root = std::fs::canonicalize(root).map_err(|source| IndexError::Io {
            path: root.to_owned(),
            source,
        })?;
        let (pool, opened) = db::open(db_path).await?;
        Ok(CodeIndex {
            pool,
            root,
            limits: WorkspaceLimits::default(),
            opened,
            write_lock: Mutex::new(()),
            embed_lock: Mutex::new(()),
            matrix: Mutex::new(None),
            missing: Mutex::new(None),
            _scratch: None,
        })
    }

    /// An empty index of the workspace at `root` in a fresh private directory under `parent`
    /// (mode 0700), deleted when the index is dropped: for a process that must search the
    /// workspace and has no lasting index of it to use (`search_memory` in a run without one).
    pub async fn open_temporary(root: &Path, parent: &Path) -> Result<CodeIndex, IndexError> {
        let scratch = tempfile::Builder::new()
            .prefix("baton-index-")
            .tempdir_in(parent)
            .map_err(|source| IndexError::Io {
                path: parent.to_owned(),
                source,
            })?;
        let mut index = CodeIndex::open_at(root, &scratch.path().join("index.db")).await?;
        index._scratch = Some(scratch);
        Ok(index)
    }

    /// The index with other bounds on the files it takes (the default suits a repository).
    pub fn with_limits(mut self, limits: WorkspaceLimits) -> CodeIndex {
        self.limits = limits;
        self
    }

    /// What opening found (an existing index, a new one, one rebuilt and why).
    pub fn opened(&self) -> &Opened {
        &self.opened
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// What the index holds; `embedded` counts vectors of `model` (an embedder's model id), if
    /// given.
    pub async fn stats(&self, model: Option<&str>) -> Result<IndexStats, IndexError> {
        let count = |sql: &'static str| {
            let pool = self.pool.clone();
            async move {
                let n: i64 = sqlx::query_scalar(sql)
                    .fetch_one(&pool)
                    .await
                    .map_err(db("counting the index"))?;
                Ok::<u64, IndexError>(u64::try_from(n).unwrap_or(0))
            }
        };
        let languages: Vec<(Option<String>, i64)> = sqlx::query_as(
            "SELECT lang, count(*) FROM files WHERE lang IS NULL OR lang != 'binary' GROUP BY lang",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db("counting languages"))?;
        let embedded = match model {
            Some(model) => {
                let n: i64 = sqlx::query_scalar(
                    "SELECT count(DISTINCT c.hash) FROM chunks c \
                     JOIN vectors v ON v.model = ? AND v.hash = c.hash",
                )
                .bind(vector_key(model))
                .fetch_one(&self.pool)
                .await
                .map_err(db("counting vectors"))?;
                u64::try_from(n).unwrap_or(0)
            }
            None => 0,
        };
        Ok(IndexStats {
            files: count("SELECT count(*) FROM files WHERE lang IS NULL OR lang != 'binary'")
                .await?,
            chunks: count("SELECT count(*) FROM chunks").await?,
            languages: languages
                .into_iter()
                .map(|(l, n)| {
                    (
                        l.unwrap_or_else(|| "other".into()),
                        u64::try_from(n).unwrap_or(0),
                    )
                })
                .collect(),
            definitions: count("SELECT count(*) FROM defs").await?,
            distinct_chunks: count("SELECT count(DISTINCT hash) FROM chunks").await?,
            embedded,
        })
    }

    /// The chunks of one file as (symbol, first line, last line), in order.
    pub async fn chunks_in(
        &self,
        path: &str,
    ) -> Result<Vec<(Option<String>, u32, u32)>, IndexError> {
        sqlx::query_as(
            "SELECT symbol, start_line, end_line FROM chunks WHERE path = ? ORDER BY start_line",
        )
        .bind(path)
        .fetch_all(&self.pool)
        .await
        .map_err(db("reading a file's chunks"))
    }

    /// The repo map of the index as it is (see [`map`]).
    pub async fn map(
        &self,
        request: &MapRequest<'_>,
        count_tokens: &(dyn Fn(&str) -> usize + Sync),
    ) -> Result<String, IndexError> {
        let files = self.map_files().await?;
        Ok(map::render(&files, request, count_tokens))
    }

    async fn map_files(&self) -> Result<BTreeMap<String, MapFile>, IndexError> {
        let defs: Vec<(String, String, String, u32, u32, String)> = sqlx::query_as(
            "SELECT path, name, kind, line, depth, signature FROM defs ORDER BY path, idx",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db("reading definitions"))?;
        let refs: Vec<(String, String, u32)> =
            sqlx::query_as("SELECT path, name, count FROM refs ORDER BY path, name")
                .fetch_all(&self.pool)
                .await
                .map_err(db("reading references"))?;
        let mut files: BTreeMap<String, MapFile> = BTreeMap::new();
        for (path, name, kind, line, depth, signature) in defs {
            files.entry(path).or_default().defs.push(MapDef {
                name,
                kind: DefKind::parse(&kind).unwrap_or(DefKind::Function),
                line,
                signature,
                depth,
            });
        }
        for (path, name, count) in refs {
            files.entry(path).or_default().refs.insert(name, count);
        }
        Ok(files)
    }
}
