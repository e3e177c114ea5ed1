//! What only the Postgres backend has: connection errors that name the server (never its
//! password), schema versions on a shared server, the server's error classes, and a schema
//! chosen by the URL alone (as `baton --store URL` uses it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/journal.rs"]
mod journal;

use baton_core::RunId;
use baton_store::testing::{PgTestSchema, test_postgres_url};
use baton_store::{
    Holder, NewRun, PostgresOptions, PostgresStore, Store, StoreError, StoreLocation, open_store,
};
use journal::Journal;
use sqlx::Connection;

/// The test server's URL with its user and host, but another password, database or port.
fn variant(user_pass: &str, host_port: &str, db: &str) -> String {
    format!("postgres://{user_pass}@{host_port}/{db}")
}

fn host_port() -> String {
    let url = test_postgres_url();
    let after_at = url.rsplit_once('@').map_or(url.as_str(), |(_, h)| h);
    let host_port = after_at.split(['/', '?']).next().unwrap();
    host_port.to_owned()
}

#[tokio::test]
async fn nothing_listening_is_unreachable_retryable_and_the_password_is_redacted() {
    let url = variant("baton:hunter2", "127.0.0.1:1", "test");
    let err = PostgresStore::connect(&url).await.unwrap_err();
    assert!(matches!(err, StoreError::Unreachable { .. }), "{err:?}");
    assert!(err.is_retryable());
    let message = err.to_string();
    assert!(
        message.contains("postgres://baton:***@127.0.0.1:1/test"),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");
    assert!(!format!("{err:?}").contains("hunter2"));
}

#[tokio::test]
async fn an_unknown_user_or_database_is_refused_permanently() {
    for url in [
        variant("no_such_baton_role:pw", &host_port(), "test"),
        variant("postgres:pw", &host_port(), "no_such_baton_database"),
    ] {
        let err = PostgresStore::connect(&url).await.unwrap_err();
        assert!(matches!(err, StoreError::Refused { .. }), "{url}: {err:?}");
        assert!(!err.is_retryable());
        let message = err.to_string();
        assert!(message.contains(":***@"), "{message}");
        assert!(message.contains("does not exist"), "{message}");
    }
}

#[tokio::test]
async fn a_schema_migrated_by_a_newer_baton_is_refused_and_left_alone() {
    let schema = PgTestSchema::create().await;
    let mut conn = sqlx::PgConnection::connect(&schema.url()).await.unwrap();
    sqlx::raw_sql(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (999, 'from the future', true, '\\x00', 0)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let err = PostgresStore::connect_with(
        &test_postgres_url(),
        schema.options(std::time::Duration::from_secs(60)),
    )
    .await
    .unwrap_err();
    match &err {
        StoreError::NewerSchema {
            found: 999,
            supported,
            ..
        } => assert!(*supported < 999),
        other => panic!("expected NewerSchema, got {other:?}"),
    }
    assert!(!err.is_retryable());
    let versions: Vec<i64> = sqlx::query_scalar("SELECT version FROM _sqlx_migrations ORDER BY 1")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    assert_eq!(versions, [1, 2, 3, 4, 5, 999]);
}

/// `--store postgres://…?options[search_path]=S` keeps baton's tables in schema S: a store
/// opened by URL alone sees exactly the runs of one opened with the schema option.
#[tokio::test]
async fn the_url_can_choose_the_schema() {
    let schema = PgTestSchema::create().await;
    let by_option = schema.store().await;
    let run = NewRun {
        id: RunId::new(),
        goal: "goal".into(),
        workspace: "/w".into(),
    };
    let lease = by_option
        .create_run(&run, &Holder::this_process())
        .await
        .unwrap();
    by_option
        .append(&lease, &[Journal::new(run.id.clone()).started("goal")])
        .await
        .unwrap();

    let location = StoreLocation::choose(Some(&schema.url()), std::path::Path::new("/w")).unwrap();
    assert!(location.is_shared());
    let by_url = open_store(&location).await.unwrap();
    let runs = by_url.list_runs().await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].id, run.id);
    assert_eq!(runs[0].event_count, 1);
}

#[tokio::test]
async fn an_unusable_schema_name_is_refused_before_connecting() {
    let options = PostgresOptions {
        schema: Some("runs; DROP TABLE runs".into()),
        ..PostgresOptions::default()
    };
    let err = PostgresStore::connect_with(&test_postgres_url(), options)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Refused { .. }), "{err:?}");
}

/// A real deadlock between two transactions: the server aborts one with SQLSTATE 40P01, which
/// the store classifies as retryable (running the transaction again can succeed), unlike, say,
/// a unique violation.
#[tokio::test]
async fn deadlocks_are_retryable_and_constraint_violations_are_not() {
    let schema = PgTestSchema::create().await;
    let url = schema.url();
    let mut setup = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::raw_sql(
        "CREATE TABLE pair (id INT PRIMARY KEY, v INT); INSERT INTO pair VALUES (1, 0), (2, 0)",
    )
    .execute(&mut setup)
    .await
    .unwrap();
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(2));
    let task = |first: i32, second: i32| {
        let (url, barrier) = (url.clone(), barrier.clone());
        tokio::spawn(async move {
            let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
            let mut tx = conn.begin().await.unwrap();
            sqlx::query("UPDATE pair SET v = v + 1 WHERE id = $1")
                .bind(first)
                .execute(&mut *tx)
                .await
                .unwrap();
            barrier.wait().await;
            let result = sqlx::query("UPDATE pair SET v = v + 1 WHERE id = $1")
                .bind(second)
                .execute(&mut *tx)
                .await;
            match result {
                Ok(_) => tx.commit().await.map(|_| ()),
                Err(e) => Err(e),
            }
        })
    };
    let (a, b) = (task(1, 2), task(2, 1));
    let results = [a.await.unwrap(), b.await.unwrap()];
    let errors: Vec<sqlx::Error> = results.into_iter().filter_map(Result::err).collect();
    assert_eq!(
        errors.len(),
        1,
        "exactly one side is chosen as the deadlock victim"
    );
    let err = StoreError::Database {
        context: "test".into(),
        source: errors.into_iter().next().unwrap(),
    };
    assert!(err.is_retryable(), "{err:?}");

    let duplicate = sqlx::query("INSERT INTO pair VALUES (1, 0)")
        .execute(&mut setup)
        .await
        .unwrap_err();
    let err = StoreError::Database {
        context: "test".into(),
        source: duplicate,
    };
    assert!(!err.is_retryable(), "{err:?}");
}
