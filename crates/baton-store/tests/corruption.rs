//! Damaged, foreign and too-new database files: refused with an error naming the file, and
//! left byte-for-byte as they were.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/journal.rs"]
mod journal;

use std::path::{Path, PathBuf};

use baton_core::RunId;
use baton_store::{Holder, NewRun, SqliteStore, Store, StoreError};
use journal::Journal;
use sqlx::Connection;

/// Opens `path`, expecting refusal; checks the file is unchanged and returns the error.
async fn refused(path: &Path) -> StoreError {
    let before = std::fs::read(path).unwrap();
    let err = SqliteStore::open(path)
        .await
        .expect_err("a broken store must not open");
    assert_eq!(
        std::fs::read(path).unwrap(),
        before,
        "the file was modified"
    );
    assert!(!err.is_retryable(), "{err:?}");
    err
}

fn assert_corrupt_naming(err: &StoreError, path: &Path) {
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("nothing was changed"), "{message}");
    assert!(message.contains("Move it aside"), "{message}");
}

/// A store at `dir/baton.db` with one run of `events` events appended in commits of
/// `per_commit`, closed (so its WAL is checkpointed into the main file).
async fn written_store(
    dir: &tempfile::TempDir,
    events: usize,
    per_commit: usize,
) -> (PathBuf, RunId) {
    let path = dir.path().join("baton.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let run = NewRun {
        id: RunId::new(),
        goal: "goal".into(),
        workspace: "/w".into(),
    };
    let lease = store
        .create_run(&run, &Holder::this_process())
        .await
        .unwrap();
    let mut journal = Journal::new(run.id.clone());
    let mut records = vec![journal.started("goal")];
    records.extend(journal.take(events - 1));
    for commit in records.chunks(per_commit) {
        store.append(&lease, commit).await.unwrap();
    }
    store.close().await;
    (path, run.id)
}

fn pseudo_random_bytes(len: usize) -> Vec<u8> {
    // xorshift64 seeded from the clock: different garbage on every run.
    let mut x = jiff::Timestamp::now().as_nanosecond() as u64 | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[tokio::test]
async fn random_bytes_are_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    std::fs::write(&path, pseudo_random_bytes(64 * 1024)).unwrap();
    let err = refused(&path).await;
    assert_corrupt_naming(&err, &path);
}

#[tokio::test]
async fn a_sqlite_header_followed_by_garbage_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = written_store(&dir, 10, 10).await;
    let mut bytes = std::fs::read(&path).unwrap();
    let garbage = pseudo_random_bytes(bytes.len() - 100);
    bytes[100..].copy_from_slice(&garbage);
    std::fs::write(&path, &bytes).unwrap();
    let err = refused(&path).await;
    assert_corrupt_naming(&err, &path);
}

#[tokio::test]
async fn a_truncated_store_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = written_store(&dir, 1_000, 2).await;
    let wal = dir.path().join("baton.db-wal");
    assert!(
        !wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0,
        "data left in the WAL"
    );
    let bytes = std::fs::read(&path).unwrap();
    assert!(
        bytes.len() > 100 * 1024,
        "the store is too small to test truncation"
    );
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = refused(&path).await;
    assert_corrupt_naming(&err, &path);
}

#[tokio::test]
async fn another_programs_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    let options = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap();
    sqlx::raw_sql("CREATE TABLE contacts (name TEXT); INSERT INTO contacts VALUES ('ada');")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    let err = refused(&path).await;
    assert_corrupt_naming(&err, &path);
    assert!(err.to_string().contains("contacts"), "{err}");
}

#[tokio::test]
async fn a_store_from_a_newer_baton_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = written_store(&dir, 3, 3).await;
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(&path);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap();
    sqlx::raw_sql(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (999, 'from the future', 1, x'00', 0)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    let err = refused(&path).await;
    match &err {
        StoreError::NewerSchema {
            store,
            found: 999,
            supported,
        } => {
            assert_eq!(store, &path.display().to_string());
            assert!(*supported < 999);
        }
        other => panic!("expected NewerSchema, got {other:?}"),
    }
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[tokio::test]
async fn an_unreadable_event_names_the_file_and_the_event() {
    let dir = tempfile::tempdir().unwrap();
    let (path, run_id) = written_store(&dir, 5, 5).await;
    // The run's one commit rewritten as JSON text (encoding 0), its third event one this baton
    // does not know.
    let store = SqliteStore::open(&path).await.unwrap();
    let events = store.load_events(&run_id).await.unwrap();
    store.close().await;
    let body: Vec<String> = events
        .iter()
        .map(|r| {
            let event = match r.seq {
                2 => r#"{"type":"from_the_future"}"#.to_owned(),
                _ => serde_json::to_string(&r.event).unwrap(),
            };
            format!(r#"{{"at":"{}","event":{event}}}"#, r.at)
        })
        .collect();
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(&path);
    let mut conn = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap();
    let updated = sqlx::query("UPDATE journal SET encoding = 0, body = ? WHERE first_seq = 0")
        .bind(format!("[{}]", body.join(",")).into_bytes())
        .execute(&mut conn)
        .await
        .unwrap();
    assert_eq!(updated.rows_affected(), 1);
    conn.close().await.unwrap();

    let store = SqliteStore::open(&path).await.unwrap();
    let err = store.load_events(&run_id).await.unwrap_err();
    assert_corrupt_naming(&err, &path);
    assert!(err.to_string().contains("event #2"), "{err}");
    // Events before the damage are still readable, though the same commit holds them.
    assert_eq!(store.read_events(&run_id, 0, 2).await.unwrap(), events[..2]);
}

#[tokio::test]
async fn an_empty_file_is_a_fresh_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    std::fs::write(&path, b"").unwrap();
    let store = SqliteStore::open(&path).await.unwrap();
    assert!(store.list_runs().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_missing_directory_is_reported_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-such-dir").join("baton.db");
    let err = SqliteStore::open(&path).await.unwrap_err();
    assert!(matches!(err, StoreError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("no-such-dir"), "{err}");
    assert!(!dir.path().join("no-such-dir").exists());
}
