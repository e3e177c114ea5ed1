//! The worker queue (`Store::claim` / `Store::set_queued`): on PostgreSQL, concurrent claimers
//! never get the same run (`FOR UPDATE SKIP LOCKED`), only queued unfinished runs with a free or
//! expired lease are handed out, and a claimer whose lease was taken over is fenced off. SQLite
//! has no queue and says so.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/journal.rs"]
mod journal;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use baton_core::RunId;
use baton_store::testing::PgTestSchema;
use baton_store::{Holder, NewRun, SqliteStore, Store, StoreError};
use journal::Journal;

/// Creates `n` runs the way `baton submit` leaves them: started, lease released, queued.
async fn queued_runs(store: &dyn Store, n: usize) -> Vec<RunId> {
    let mut ids = Vec::new();
    for i in 0..n {
        let id = RunId::new();
        let lease = store
            .create_run(
                &NewRun {
                    id: id.clone(),
                    goal: format!("goal {i}"),
                    workspace: "/src".into(),
                },
                &Holder::this_process(),
            )
            .await
            .unwrap();
        let mut journal = Journal::new(id.clone());
        store.append(&lease, &[journal.started("g")]).await.unwrap();
        store.release(&lease).await.unwrap();
        store.set_queued(&id, true).await.unwrap();
        ids.push(id);
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claimers_never_get_the_same_run() {
    let schema = PgTestSchema::create().await;
    let setup = schema.store().await;
    let ids = queued_runs(&setup, 30).await;
    // One run that is not queued and one that finished: never claimed.
    let lease = setup
        .create_run(
            &NewRun {
                id: RunId::new(),
                goal: "not queued".into(),
                workspace: "/src".into(),
            },
            &Holder::this_process(),
        )
        .await
        .unwrap();
    setup.release(&lease).await.unwrap();

    // Eight claimers, each with its own pool as separate worker processes would have.
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store: Arc<dyn Store> = Arc::new(schema.store().await);
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            while let Some(lease) = store.claim(&Holder::this_process()).await.unwrap() {
                got.push(lease.run_id.clone());
            }
            got
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    let distinct: HashSet<_> = all.iter().cloned().collect();
    assert_eq!(
        all.len(),
        ids.len(),
        "every queued run claimed exactly once"
    );
    assert_eq!(distinct, ids.iter().cloned().collect::<HashSet<_>>());
    // All are held now: nothing more to claim.
    assert!(
        setup
            .claim(&Holder::this_process())
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn an_expired_claim_is_claimed_again_and_the_old_holder_is_fenced() {
    let schema = PgTestSchema::create().await;
    let store = schema
        .store_with(schema.options(Duration::from_millis(700)))
        .await;
    let ids = queued_runs(&store, 1).await;
    let first = store.claim(&Holder::this_process()).await.unwrap().unwrap();
    assert_eq!(first.run_id, ids[0]);
    assert!(
        store
            .claim(&Holder::this_process())
            .await
            .unwrap()
            .is_none()
    );
    tokio::time::sleep(Duration::from_millis(900)).await;
    let second = store.claim(&Holder::this_process()).await.unwrap().unwrap();
    assert_eq!(second.run_id, ids[0]);
    assert_ne!(second.token, first.token);

    let mut journal = Journal::new(ids[0].clone());
    journal.started("g");
    let stale = store
        .append(&first, &[journal.resumed()])
        .await
        .unwrap_err();
    assert!(matches!(stale, StoreError::LeaseLost { .. }), "{stale:?}");

    // A dequeued run is not handed out even with its lease free.
    store.release(&second).await.unwrap();
    store.set_queued(&ids[0], false).await.unwrap();
    assert!(
        store
            .claim(&Holder::this_process())
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn sqlite_has_no_worker_queue_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baton.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let err = store.claim(&Holder::this_process()).await.unwrap_err();
    assert!(matches!(err, StoreError::NeedsPostgres { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("PostgreSQL"), "{text}");
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(!err.is_retryable());
}
