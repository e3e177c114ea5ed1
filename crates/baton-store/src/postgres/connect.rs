//! Connecting to a Postgres store: one direct connection first (so that a server that is down
//! or refuses us is reported at once, by name, instead of after a pool's acquire timeout), the
//! schema check and migrations on it, then the pool used for all work.

use std::time::Duration;

use sqlx::Connection;
use sqlx::migrate::MigrateError;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};

use crate::StoreError;
use crate::shared::migrator;

/// Settings of a [`crate::PostgresStore`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostgresOptions {
    /// How long a lease lasts without renewal; see [`crate::SqliteOptions::lease_ttl`]. Across
    /// machines this is the only way a dead holder's run is freed, so it bounds how long a run
    /// of a crashed worker waits.
    pub lease_ttl: Duration,
    /// Keep baton's tables in this schema (created if missing) instead of the first schema of
    /// the connection's `search_path`: several baton installations can share one database, and
    /// tests get one schema each. Plain lower-case identifiers only.
    pub schema: Option<String>,
    pub max_connections: u32,
    /// How long an operation waits for a pooled connection (all busy, or the server away)
    /// before failing with a retryable error.
    pub acquire_timeout: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            lease_ttl: Duration::from_secs(60),
            schema: None,
            max_connections: 8,
            acquire_timeout: Duration::from_secs(10),
        }
    }
}

/// The schema versions this build knows, oldest first. Each file in `migrations/postgres/` is
/// listed here (a test checks that none is missing); compiled in, like SQLite's, so that no
/// file is read at run time and no proc-macro is needed to embed them.
pub(crate) const MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "runs and events",
        include_str!("../../migrations/postgres/0001_runs_and_events.sql"),
    ),
    (
        2,
        "run queue",
        include_str!("../../migrations/postgres/0002_run_queue.sql"),
    ),
    (
        3,
        "lease worker and renewal time",
        include_str!("../../migrations/postgres/0003_lease_worker.sql"),
    ),
    (
        4,
        "state checkpoints",
        include_str!("../../migrations/postgres/0004_state_checkpoints.sql"),
    ),
    (
        5,
        "journal commits",
        include_str!("../../migrations/postgres/0005_journal_commits.sql"),
    ),
];

/// SQLSTATEs of a server that answered but will not let us in as configured: wrong password or
/// auth method, unknown database, no permission, a role that may not log in.
const REFUSED_STATES: &[&str] = &["28000", "28P01", "3D000", "42501", "3F000"];

pub(crate) fn latest_version() -> i64 {
    MIGRATIONS.iter().map(|(v, _, _)| *v).max().unwrap_or(0)
}

/// A schema name we are willing to splice into `CREATE SCHEMA` / `search_path`: plain
/// lower-case identifiers only, so that no quoting question arises.
fn valid_schema_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Parses the URL and applies the options. `url` is the redacted URL, for messages.
pub(crate) fn connect_options(
    raw_url: &str,
    url: &str,
    options: &PostgresOptions,
) -> Result<PgConnectOptions, StoreError> {
    let mut connect: PgConnectOptions = raw_url.parse().map_err(|source| StoreError::Database {
        context: format!("reading the store URL {url}"),
        source,
    })?;
    connect = connect.application_name("baton");
    if let Some(schema) = &options.schema {
        if !valid_schema_name(schema) {
            return Err(StoreError::Refused {
                url: url.to_owned(),
                detail: format!(
                    "the schema name {schema:?} is not a plain lower-case identifier \
                     ([a-z_][a-z0-9_]*)"
                ),
            });
        }
        connect = connect.options([("search_path", schema.as_str())]);
    }
    Ok(connect)
}

/// Opens the first connection, creates the schema if one was asked for, checks the version and
/// migrates; then returns the (lazily connecting) pool.
pub(crate) async fn open(
    connect: PgConnectOptions,
    url: &str,
    options: &PostgresOptions,
) -> Result<PgPool, StoreError> {
    let mut conn = PgConnection::connect_with(&connect)
        .await
        .map_err(|e| classify(url, "connecting", e))?;
    let prepared = prepare(&mut conn, url, options).await;
    // The verdict matters more than a clean goodbye on this one connection.
    let _ = conn.close().await;
    prepared?;
    Ok(PgPoolOptions::new()
        .max_connections(options.max_connections.max(1))
        .acquire_timeout(options.acquire_timeout)
        .connect_lazy_with(connect))
}

async fn prepare(
    conn: &mut PgConnection,
    url: &str,
    options: &PostgresOptions,
) -> Result<(), StoreError> {
    if let Some(schema) = &options.schema {
        let create = format!("CREATE SCHEMA IF NOT EXISTS {schema}");
        match sqlx::raw_sql(sqlx::AssertSqlSafe(create))
            .execute(&mut *conn)
            .await
        {
            Ok(_) => {}
            // Two processes creating the same schema at once: the loser finds it there.
            Err(sqlx::Error::Database(db))
                if matches!(db.code().as_deref(), Some("23505" | "42P06")) => {}
            Err(e) => return Err(classify(url, "creating the schema", e)),
        }
    }
    let current: Option<String> = sqlx::query_scalar("SELECT current_schema()")
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| classify(url, "reading the current schema", e))?;
    if current.is_none() {
        return Err(StoreError::Refused {
            url: url.to_owned(),
            detail: "no schema of the search_path exists, so there is nowhere to create baton's \
                     tables; create the schema or fix search_path"
                .into(),
        });
    }
    check_version(conn, url).await?;
    migrate(conn, url).await
}

/// Refuses a schema migrated by a newer baton before the migrator could complain about
/// "missing" migrations in its own words.
async fn check_version(conn: &mut PgConnection, url: &str) -> Result<(), StoreError> {
    let has_table: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| classify(url, "reading the schema version", e))?;
    if !has_table {
        return Ok(());
    }
    let found: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM _sqlx_migrations")
        .fetch_one(&mut *conn)
        .await
        .map_err(|e| classify(url, "reading the schema version", e))?;
    let supported = latest_version();
    match found {
        Some(found) if found > supported => Err(StoreError::NewerSchema {
            store: url.to_owned(),
            found,
            supported,
        }),
        _ => Ok(()),
    }
}

/// Brings the schema up to date. sqlx's Postgres migrator holds an advisory lock while it
/// works, so processes starting at once migrate one after the other.
async fn migrate(conn: &mut PgConnection, url: &str) -> Result<(), StoreError> {
    let migrator = migrator(MIGRATIONS);
    // `run_direct`, not `run`: `run` (generic over `Acquire`) makes the opening future `Send`
    // only for some lifetimes, so a store could not be opened inside `tokio::spawn`.
    migrator
        .run_direct(None, conn, false)
        .await
        .map_err(|e| match e {
            MigrateError::Execute(source) | MigrateError::ExecuteMigration(source, _) => {
                classify(url, "migrating the schema", source)
            }
            other => StoreError::Database {
                context: format!("migrating the schema of {url}"),
                source: sqlx::Error::Migrate(Box::new(other)),
            },
        })
}

/// Turns a sqlx error into a store error: a dropped or refused connection is
/// [`StoreError::Unreachable`] (retryable), a server that will not let us in is
/// [`StoreError::Refused`]; the rest keep sqlx's error (classified by
/// [`StoreError::is_retryable`]) with what we were doing and the redacted URL.
pub(crate) fn classify(url: &str, context: &str, error: sqlx::Error) -> StoreError {
    match error {
        sqlx::Error::Io(_) => StoreError::Unreachable {
            url: url.to_owned(),
            source: error,
        },
        sqlx::Error::Database(db)
            if db
                .code()
                .is_some_and(|code| REFUSED_STATES.contains(&code.as_ref())) =>
        {
            StoreError::Refused {
                url: url.to_owned(),
                detail: db.message().to_owned(),
            }
        }
        error => StoreError::Database {
            context: format!("{context} ({url})"),
            source: error,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn every_migration_file_is_compiled_in() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("migrations")
            .join("postgres");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".sql"))
            .collect();
        files.sort();
        assert_eq!(files.len(), MIGRATIONS.len(), "{dir:?} has {files:?}");
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

    #[test]
    fn only_plain_schema_names_are_accepted() {
        for good in ["baton", "baton_test_0a1b", "_x"] {
            assert!(valid_schema_name(good), "{good}");
        }
        for bad in ["", "Baton", "a-b", "a;drop", "1abc", "a b", &"x".repeat(64)] {
            assert!(!valid_schema_name(bad), "{bad}");
        }
    }
}
