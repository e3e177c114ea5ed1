//! Opening a SQLite store: checking an existing file without touching it, connecting with the
//! durability settings, and migrating the schema.

use std::path::Path;
use std::time::Duration;

use sqlx::migrate::MigrateError;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::{Connection, Row};

use crate::StoreError;
use crate::error::sqlite_primary_code;
use crate::shared::migrator;

/// The schema versions this build knows, oldest first. Each file in `migrations/` is listed here
/// (a test checks that none is missing); they are compiled in so that no file is read at run time.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "runs and events",
        include_str!("../../migrations/sqlite/0001_runs_and_events.sql"),
    ),
    (
        2,
        "run queue",
        include_str!("../../migrations/sqlite/0002_run_queue.sql"),
    ),
    (
        3,
        "lease worker and renewal time",
        include_str!("../../migrations/sqlite/0003_lease_worker.sql"),
    ),
    (
        4,
        "state checkpoints",
        include_str!("../../migrations/sqlite/0004_state_checkpoints.sql"),
    ),
    (
        5,
        "journal commits",
        include_str!("../../migrations/sqlite/0005_journal_commits.sql"),
    ),
];

/// sqlx's bookkeeping table; its presence marks a database as one of ours.
const MIGRATIONS_TABLE: &str = "_sqlx_migrations";

const SQLITE_CORRUPT: i64 = 11;
const SQLITE_NOTADB: i64 = 26;

/// The first 16 bytes of every SQLite 3 database file.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";
/// A database file is at least its 100-byte header.
const SQLITE_HEADER_LEN: u64 = 100;

/// At most this many connections per store: SQLite has one writer at a time, so more only add
/// open file handles; a few let reads proceed while an append waits for its fsync.
const MAX_CONNECTIONS: u32 = 4;

pub(crate) fn latest_version() -> i64 {
    MIGRATIONS.iter().map(|(v, _, _)| *v).max().unwrap_or(0)
}

/// Checks that an existing, non-empty file is a sound baton database that this build can
/// use, without writing anything to it: the check runs on a read-only connection, so a
/// damaged or foreign file is left byte-for-byte as it was for the user to move aside.
pub(crate) async fn check_existing(path: &Path) -> Result<(), StoreError> {
    let len = match std::fs::metadata(path) {
        Ok(meta) => meta.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(StoreError::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    // SQLite itself treats an empty file as a new database.
    if len == 0 {
        return Ok(());
    }
    check_header(path, len)?;

    let options = SqliteConnectOptions::new().filename(path).read_only(true);
    let mut conn = SqliteConnection::connect_with(&options)
        .await
        .map_err(|e| classify(path, "opening read-only to check it", e))?;
    let verdict = check_contents(&mut conn, path).await;
    // Closing cleanly matters little for a read-only connection; a failure here must not hide
    // the verdict.
    let _ = conn.close().await;
    verdict
}

fn check_header(path: &Path, len: u64) -> Result<(), StoreError> {
    use std::io::Read;
    let corrupt = |detail: String| StoreError::Corrupt {
        path: path.to_owned(),
        detail,
    };
    if len < SQLITE_HEADER_LEN {
        return Err(corrupt(format!(
            "the file has only {len} bytes, less than a SQLite header"
        )));
    }
    let mut magic = [0u8; 16];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .map_err(|source| StoreError::Io {
            path: path.to_owned(),
            source,
        })?;
    if &magic != SQLITE_MAGIC {
        return Err(corrupt(
            "the file does not start with the SQLite header".into(),
        ));
    }
    Ok(())
}

async fn check_contents(conn: &mut SqliteConnection, path: &Path) -> Result<(), StoreError> {
    let corrupt = |detail: String| StoreError::Corrupt {
        path: path.to_owned(),
        detail,
    };

    let problems: Vec<String> = sqlx::query_scalar("PRAGMA quick_check")
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| classify(path, "checking its integrity", e))?;
    if problems.iter().any(|p| p != "ok") {
        let shown: Vec<&str> = problems.iter().take(3).map(String::as_str).collect();
        return Err(corrupt(format!(
            "integrity check failed: {}",
            shown.join("; ")
        )));
    }

    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
         ORDER BY name",
    )
    .fetch_all(&mut *conn)
    .await
    .map_err(|e| classify(path, "reading its schema", e))?;
    if tables.is_empty() {
        return Ok(());
    }
    if !tables.iter().any(|t| t == MIGRATIONS_TABLE) {
        return Err(corrupt(format!(
            "it is a SQLite database of another program (tables: {})",
            tables.join(", ")
        )));
    }

    let found: Option<i64> = sqlx::query("SELECT MAX(version) AS v FROM _sqlx_migrations")
        .fetch_one(&mut *conn)
        .await
        .and_then(|row| row.try_get("v"))
        .map_err(|e| classify(path, "reading its schema version", e))?;
    let supported = latest_version();
    match found {
        Some(found) if found > supported => Err(StoreError::NewerSchema {
            store: path.display().to_string(),
            found,
            supported,
        }),
        _ => Ok(()),
    }
}

/// Opens the pool used for all work. See [`super::SqliteStore`] for why these settings.
pub(crate) async fn connect(path: &Path, busy_timeout: Duration) -> Result<SqlitePool, StoreError> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .foreign_keys(true)
        .busy_timeout(busy_timeout);
    SqlitePoolOptions::new()
        .max_connections(MAX_CONNECTIONS)
        // A connection to a local file cannot go stale the way a network one can; pinging it
        // before each use was one more hand-off to its thread for every append.
        .test_before_acquire(false)
        .connect_with(options)
        .await
        .map_err(|e| classify(path, "opening the store", e))
}

/// Brings the schema up to date. Runs inside one `BEGIN IMMEDIATE` transaction so that two
/// processes opening a fresh store at once do not both try to create the tables: the second
/// waits (busy timeout) and then finds the migrations applied.
pub(crate) async fn migrate(pool: &SqlitePool, path: &Path) -> Result<(), StoreError> {
    let migrator = migrator(MIGRATIONS);
    let mut tx = pool
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(|e| classify(path, "starting the schema migration", e))?;
    // `run_direct`, not `run`: `run` (generic over `Acquire`) makes the opening future `Send`
    // only for some lifetimes, so a store could not be opened inside `tokio::spawn`.
    migrator
        .run_direct(None, &mut *tx, false)
        .await
        .map_err(|e| match e {
            MigrateError::Execute(source) | MigrateError::ExecuteMigration(source, _) => {
                classify(path, "migrating the schema", source)
            }
            other => StoreError::Database {
                context: format!("migrating the schema of {}", path.display()),
                source: sqlx::Error::Migrate(Box::new(other)),
            },
        })?;
    tx.commit()
        .await
        .map_err(|e| classify(path, "committing the schema migration", e))
}

/// Turns a sqlx error into a store error, recognising SQLite's "this is not a (sound)
/// database" codes so that the user is told which file is damaged instead of seeing a raw code.
pub(crate) fn classify(path: &Path, context: &str, error: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &error
        && sqlite_primary_code(db.as_ref())
            .is_some_and(|c| c == SQLITE_CORRUPT || c == SQLITE_NOTADB)
    {
        return StoreError::Corrupt {
            path: path.to_owned(),
            detail: db.message().to_owned(),
        };
    }
    StoreError::Database {
        context: format!("{context} ({})", path.display()),
        source: error,
    }
}

/// [`classify`] for an error of the append connection (rusqlite).
pub(crate) fn classify_sqlite(path: &Path, context: &str, error: rusqlite::Error) -> StoreError {
    if let Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) =
        error.sqlite_error_code()
    {
        return StoreError::Corrupt {
            path: path.to_owned(),
            detail: error.to_string(),
        };
    }
    StoreError::Sqlite {
        context: format!("{context} ({})", path.display()),
        source: error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The durability guarantee rests on these settings being in force on every connection.
    #[tokio::test]
    async fn connections_use_wal_with_full_sync() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        let pool = connect(&path, Duration::from_secs(5)).await.unwrap();
        migrate(&pool, &path).await.unwrap();
        let mut conns = Vec::new();
        for _ in 0..MAX_CONNECTIONS {
            let mut conn = pool.acquire().await.unwrap();
            let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            let sync: i64 = sqlx::query_scalar("PRAGMA synchronous")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            let fk: i64 = sqlx::query_scalar("PRAGMA foreign_keys")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            assert_eq!((mode.as_str(), sync, fk), ("wal", 2, 1));
            conns.push(conn); // held, so that each round gets another connection
        }
        // Migrating again (a second open) finds nothing to do.
        drop(conns);
        migrate(&pool, &path).await.unwrap();
    }

    #[test]
    fn every_migration_file_is_compiled_in() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("migrations")
            .join("sqlite");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sql"))
            .collect();
        files.sort();
        assert_eq!(files.len(), MIGRATIONS.len(), "migrations/ has {files:?}");
        for (file, (version, _, sql)) in files.iter().zip(MIGRATIONS) {
            let number: i64 = file.split('_').next().unwrap().parse().unwrap();
            assert_eq!(number, *version, "{file}");
            assert_eq!(
                std::fs::read_to_string(dir.join(file)).unwrap(),
                *sql,
                "{file}"
            );
        }
    }
}
