//! What only the SQLite backend has: the workspace file layout and SQLite's own write lock.
//! The store contract itself (journals, leases, fencing, concurrency) is tested against both
//! backends in `conformance.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/journal.rs"]
mod journal;

use std::path::{Path, PathBuf};
use std::time::Duration;

use baton_core::RunId;
use baton_store::{Holder, NewRun, SqliteOptions, SqliteStore, Store, StoreLocation, open_store};
use journal::Journal;

fn new_run(goal: &str) -> NewRun {
    NewRun {
        id: RunId::new(),
        goal: goal.into(),
        workspace: "/home/dev/project".into(),
    }
}

fn db_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("baton.db")
}

#[tokio::test]
async fn a_workspace_keeps_its_store_under_dot_baton() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::for_workspace(dir.path()).await.unwrap();
    let path = SqliteStore::workspace_db_path(dir.path());
    assert_eq!(store.path(), path);
    assert!(path.is_file());
    let run = new_run("first");
    let lease = store
        .create_run(&run, &Holder::this_process())
        .await
        .unwrap();
    store
        .append(&lease, &[Journal::new(run.id.clone()).started("first")])
        .await
        .unwrap();
    store.close().await;

    // Choosing no store means this very file.
    let location = StoreLocation::choose(None, dir.path()).unwrap();
    assert_eq!(location, StoreLocation::Sqlite(path.clone()));
    let store = open_store(&location).await.unwrap();
    assert_eq!(store.load_events(&run.id).await.unwrap().len(), 1);
    assert!(Path::new(&path).is_file());
}

/// Another connection holding SQLite's write lock makes an append wait, then fail retryably.
#[tokio::test]
async fn a_busy_database_is_a_retryable_error() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(&dir);
    let quick = SqliteOptions {
        busy_timeout: Duration::from_millis(100),
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open_with(&path, quick).await.unwrap();
    let run = new_run("goal");
    let lease = store
        .create_run(&run, &Holder::this_process())
        .await
        .unwrap();

    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(&path);
    let mut other = sqlx::SqliteConnection::connect_with(&options)
        .await
        .unwrap();
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut other)
        .await
        .unwrap();
    let err = store
        .append(&lease, &[Journal::new(run.id.clone()).started("g")])
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
    sqlx::raw_sql("ROLLBACK").execute(&mut other).await.unwrap();
    store
        .append(&lease, &[Journal::new(run.id.clone()).started("g")])
        .await
        .unwrap();
}
