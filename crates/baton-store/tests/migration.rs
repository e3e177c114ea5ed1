//! A journal written before the store kept one row per commit (schema version 4: one `events`
//! row per event) is migrated when a newer baton opens the store: every event reads back exactly
//! as written, windows of it too, and the run goes on appending. On both backends, from the
//! migration files as version 4 shipped them, and rows as version 4 wrote them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/journal.rs"]
mod journal;

use std::time::Duration;

use baton_core::{EventRecord, RunId};
use baton_store::testing::PgTestSchema;
use baton_store::{Checkpoint, Holder, PostgresOptions, PostgresStore, SqliteStore, Store};
use jiff::fmt::temporal::DateTimePrinter;
use journal::Journal;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{Connection, SqlSafeStr};

/// The migrations up to version 4, as both backends had them.
fn version_4(backend: &str) -> Migrator {
    let files: [(i64, &str, &str); 4] = match backend {
        "sqlite" => [
            (
                1,
                "runs and events",
                include_str!("../migrations/sqlite/0001_runs_and_events.sql"),
            ),
            (
                2,
                "run queue",
                include_str!("../migrations/sqlite/0002_run_queue.sql"),
            ),
            (
                3,
                "lease worker and renewal time",
                include_str!("../migrations/sqlite/0003_lease_worker.sql"),
            ),
            (
                4,
                "state checkpoints",
                include_str!("../migrations/sqlite/0004_state_checkpoints.sql"),
            ),
        ],
        _ => [
            (
                1,
                "runs and events",
                include_str!("../migrations/postgres/0001_runs_and_events.sql"),
            ),
            (
                2,
                "run queue",
                include_str!("../migrations/postgres/0002_run_queue.sql"),
            ),
            (
                3,
                "lease worker and renewal time",
                include_str!("../migrations/postgres/0003_lease_worker.sql"),
            ),
            (
                4,
                "state checkpoints",
                include_str!("../migrations/postgres/0004_state_checkpoints.sql"),
            ),
        ],
    };
    Migrator::with_migrations(
        files
            .into_iter()
            .map(|(version, description, sql)| {
                Migration::new(
                    version,
                    description.into(),
                    MigrationType::Simple,
                    sql.into_sql_str(),
                    false,
                )
            })
            .collect(),
    )
}

/// A journal of a few hundred events: turns with tool outputs, pauses and resumes.
fn old_journal(run_id: &RunId) -> Vec<EventRecord> {
    let mut journal = Journal::new(run_id.clone());
    let mut records = vec![journal.started("migrate me")];
    records.extend(journal.take(299));
    records
}

/// The statements version 4 wrote a run and its events with, and their parameters.
const RUN_ROW: &str = "INSERT INTO runs (id, goal, workspace, status, created_at, updated_at, \
     event_count) VALUES ($1, 'migrate me', '/w', 'running', $2, $2, $3)";
const EVENT_ROW: &str =
    "INSERT INTO events (run_id, seq, kind, at, payload) VALUES ($1, $2, $3, $4, $5)";
const CHECKPOINT_ROW: &str = "INSERT INTO checkpoints (run_id, seq, format, state) \
     VALUES ($1, 100, 'run-state-v1', '{\"an\":\"old checkpoint\"}')";

fn at_text(record: &EventRecord) -> String {
    DateTimePrinter::new()
        .precision(Some(9))
        .timestamp_to_string(&record.at)
}

/// Migrates `$conn` to version 4 and writes a run, its journal and a checkpoint into it as version
/// 4 did; gives the run's id and events. (A macro: the statements are the same on both backends,
/// their connection types are not.)
macro_rules! write_version_4 {
    ($conn:ident, $backend:literal) => {{
        version_4($backend).run(&mut $conn).await.unwrap();
        let run_id = RunId::new();
        let old = old_journal(&run_id);
        sqlx::query(RUN_ROW)
            .bind(run_id.as_str())
            .bind(at_text(&old[0]))
            .bind(old.len() as i64)
            .execute(&mut $conn)
            .await
            .unwrap();
        for record in &old {
            sqlx::query(EVENT_ROW)
                .bind(run_id.as_str())
                .bind(record.seq as i64)
                .bind(record.event.kind())
                .bind(at_text(record))
                .bind(serde_json::to_string(&record.event).unwrap())
                .execute(&mut $conn)
                .await
                .unwrap();
        }
        sqlx::query(CHECKPOINT_ROW)
            .bind(run_id.as_str())
            .execute(&mut $conn)
            .await
            .unwrap();
        (run_id, old)
    }};
}

/// What a migrated store must show: the old events exactly, in windows too, and a run that
/// takes a lease and appends after them.
async fn check_migrated(store: &dyn Store, run_id: &RunId, old: &[EventRecord]) {
    assert_eq!(store.load_events(run_id).await.unwrap(), old);
    assert_eq!(
        store.read_events(run_id, 117, 5).await.unwrap(),
        old[117..122]
    );
    // Checkpoints are a cache: version 4's went, and the run's next ones are stored compressed.
    assert!(store.load_checkpoint(run_id).await.unwrap().is_none());
    let lease = store
        .acquire(run_id, &Holder::this_process())
        .await
        .unwrap();
    let checkpoint = Checkpoint {
        seq: 150,
        format: "run-state-v9".into(),
        state: serde_json::to_string(&old[..150]).unwrap(),
    };
    store.save_checkpoint(&lease, &checkpoint).await.unwrap();
    assert_eq!(
        store.load_checkpoint(run_id).await.unwrap(),
        Some(checkpoint)
    );
    let mut journal = Journal::new(run_id.clone());
    let _ = journal.started("migrate me");
    let later: Vec<EventRecord> = journal
        .take(old.len() + 20)
        .into_iter()
        .skip(old.len() - 1)
        .collect();
    assert_eq!(later[0].seq, old.len() as u64);
    store.append(&lease, &later[..7]).await.unwrap();
    store.append(&lease, &later[7..]).await.unwrap();
    let all = store.load_events(run_id).await.unwrap();
    assert_eq!(all.len(), old.len() + later.len());
    assert_eq!(&all[..old.len()], old);
    assert_eq!(&all[old.len()..], later);
    // A window across the last old event and the first commits.
    let window = store
        .read_events(run_id, old.len() as u64 - 2, 10)
        .await
        .unwrap();
    assert_eq!(window, all[old.len() - 2..old.len() + 8]);
}

#[tokio::test]
async fn a_sqlite_journal_of_version_4_reads_back_exactly_after_the_migration() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap();
    let (run_id, old) = write_version_4!(conn, "sqlite");
    conn.close().await.unwrap();

    let store = SqliteStore::open(&path).await.unwrap();
    check_migrated(&store, &run_id, &old).await;
    store.close().await;
}

/// Writes a version-4 journal into `schema` (which exists, empty) and checks the migrated store.
async fn postgres_migration(base: String, schema: String) {
    let mut conn = sqlx::PgConnection::connect(&base).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("SET search_path TO {schema}")))
        .execute(&mut conn)
        .await
        .unwrap();
    let (run_id, old) = write_version_4!(conn, "postgres");
    conn.close().await.unwrap();
    let options = PostgresOptions {
        lease_ttl: Duration::from_secs(60),
        schema: Some(schema),
        ..PostgresOptions::default()
    };
    let store = PostgresStore::connect_with(&base, options).await.unwrap();
    check_migrated(&store, &run_id, &old).await;
    store.close().await;
}

#[tokio::test]
async fn a_postgres_journal_of_version_4_reads_back_exactly_after_the_migration() {
    let schema = PgTestSchema::create_empty().await;
    postgres_migration(schema.base_url().to_owned(), schema.schema().to_owned()).await;
}
