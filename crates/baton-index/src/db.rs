//! The index database: one SQLite file in WAL mode (`index/index.db` in the workspace's state
//! directory).
//!
//! Vectors are plain BLOBs (little-endian f32) searched exactly, not sqlite-vec: sqlite-vec is
//! a loadable C extension that sqlx's bundled SQLite would need registered through `unsafe`
//! FFI, and exact search over 10,000 384-dimension vectors is a few milliseconds — an
//! approximate index pays off only far beyond the size of a repository. Exact search is also
//! deterministic, which an approximate index is not.
//!
//! The database is a cache of the workspace: anything wrong with it (another schema version, a
//! file that is not a database) is answered by building it again.

use std::path::Path;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use crate::error::{IndexError, db};

/// Bumped whenever the schema or what is stored in it (chunking, hashing) changes.
pub(crate) const SCHEMA_VERSION: &str = "1";

const SCHEMA: &[&str] = &[
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
    // Each indexed file as it was read; `lang` is NULL for files without a grammar and
    // 'binary' for binary files (remembered so they are not read again).
    "CREATE TABLE files (
        path TEXT PRIMARY KEY,
        size INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL,
        hash TEXT NOT NULL,
        lang TEXT,
        parse_errors INTEGER NOT NULL
    ) WITHOUT ROWID",
    // `hash` identifies what is embedded (symbol and text), the key of `vectors`.
    "CREATE TABLE chunks (
        id INTEGER PRIMARY KEY,
        path TEXT NOT NULL,
        start_line INTEGER NOT NULL,
        end_line INTEGER NOT NULL,
        symbol TEXT,
        hash TEXT NOT NULL,
        text TEXT NOT NULL
    )",
    "CREATE INDEX chunks_path ON chunks(path)",
    "CREATE INDEX chunks_hash ON chunks(hash)",
    // rowid = chunks.id. `parts`: sub-words of compound identifiers (`subwords.rs`).
    "CREATE VIRTUAL TABLE chunks_fts USING fts5(path, symbol, body, parts, \
     tokenize = \"unicode61 remove_diacritics 2 tokenchars '_'\")",
    // A match in a definition's name weighs most, then the path; sub-words half.
    "INSERT INTO chunks_fts (chunks_fts, rank) VALUES ('rank', 'bm25(2.0, 4.0, 1.0, 0.5)')",
    "CREATE TABLE defs (
        path TEXT NOT NULL,
        idx INTEGER NOT NULL,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        line INTEGER NOT NULL,
        depth INTEGER NOT NULL,
        signature TEXT NOT NULL,
        PRIMARY KEY (path, idx)
    ) WITHOUT ROWID",
    "CREATE TABLE refs (
        path TEXT NOT NULL,
        name TEXT NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (path, name)
    ) WITHOUT ROWID",
    "CREATE TABLE vectors (
        model TEXT NOT NULL,
        hash TEXT NOT NULL,
        vec BLOB NOT NULL,
        PRIMARY KEY (model, hash)
    ) WITHOUT ROWID",
];

/// What opening found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Opened {
    /// An index of this version, as it was left.
    Existing,
    /// No index yet.
    Created,
    /// Rebuilt from scratch, and why.
    Rebuilt(String),
}

async fn connect(path: &Path) -> Result<SqlitePool, sqlx::Error> {
    // WAL with synchronous=NORMAL survives a killed process (only a power cut can lose the last
    // transactions, and the index is a cache).
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(30))
        .pragma("cache_size", "-32768");
    SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await
}

/// Opens (or creates, or rebuilds) the index database at `path`.
pub(crate) async fn open(path: &Path) -> Result<(SqlitePool, Opened), IndexError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| IndexError::Io {
            path: dir.to_owned(),
            source,
        })?;
    }
    let problem = match connect(path).await {
        Ok(pool) => match version(&pool).await {
            Ok(Some(v)) if v == SCHEMA_VERSION => return Ok((pool, Opened::Existing)),
            Ok(None) if is_empty(&pool).await => {
                create(&pool).await?;
                return Ok((pool, Opened::Created));
            }
            Ok(Some(v)) => {
                pool.close().await;
                format!("it was built by another version (schema {v}, this is {SCHEMA_VERSION})")
            }
            Ok(None) => {
                pool.close().await;
                "it holds no schema version".to_owned()
            }
            Err(e) => {
                pool.close().await;
                format!("it could not be read ({e})")
            }
        },
        Err(e) => format!("it could not be opened ({e})"),
    };
    for suffix in ["", "-wal", "-shm"] {
        let file = format!("{}{suffix}", path.display());
        match std::fs::remove_file(&file) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(IndexError::Io {
                    path: file.into(),
                    source,
                });
            }
        }
    }
    let pool = connect(path).await.map_err(db("creating the index"))?;
    create(&pool).await?;
    Ok((pool, Opened::Rebuilt(problem)))
}

async fn version(pool: &SqlitePool) -> Result<Option<String>, sqlx::Error> {
    let has_meta: Option<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'meta'")
            .fetch_optional(pool)
            .await?;
    if has_meta.is_none() {
        return Ok(None);
    }
    sqlx::query_scalar("SELECT value FROM meta WHERE key = 'schema'")
        .fetch_optional(pool)
        .await
}

async fn is_empty(pool: &SqlitePool) -> bool {
    let tables: Result<i64, _> = sqlx::query_scalar("SELECT count(*) FROM sqlite_master")
        .fetch_one(pool)
        .await;
    matches!(tables, Ok(0))
}

async fn create(pool: &SqlitePool) -> Result<(), IndexError> {
    let mut tx = pool
        .begin()
        .await
        .map_err(db("creating the index schema"))?;
    for statement in SCHEMA {
        sqlx::query(*statement)
            .execute(&mut *tx)
            .await
            .map_err(db("creating the index schema"))?;
    }
    sqlx::query("INSERT INTO meta (key, value) VALUES ('schema', ?), ('generation', '0')")
        .bind(SCHEMA_VERSION)
        .execute(&mut *tx)
        .await
        .map_err(db("creating the index schema"))?;
    tx.commit().await.map_err(db("creating the index schema"))
}

/// Vectors are stored as little-endian f32s.
pub(crate) fn encode_vector(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn decode_vector(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}
