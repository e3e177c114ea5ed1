//! State checkpoints (issue 20: a resume starts from the latest one) and the appends around
//! them, on both backends: one checkpoint is kept per run, written only while the lease is held;
//! and an append its caller stops waiting for at any moment lands
//! whole or not at all, leaving the store usable.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/backends.rs"]
mod backends;
#[path = "support/journal.rs"]
mod journal;

use std::time::Duration;

use backends::Place;
use baton_core::{RunId, replay};
use baton_store::{Checkpoint, Holder, NewRun, StoreError};
use journal::Journal;

on_both_backends!(
    a_checkpoint_is_kept_per_run_while_the_lease_is_held,
    appends_abandoned_at_any_moment_land_whole_or_not_at_all,
);

fn new_run() -> NewRun {
    NewRun {
        id: RunId::new(),
        goal: "checkpoints".into(),
        workspace: "/home/dev/project".into(),
    }
}

fn checkpoint(seq: u64, format: &str) -> Checkpoint {
    Checkpoint {
        seq,
        format: format.into(),
        state: format!("{{\"next_seq\":{seq},\"note\":\"ünïcode ✓\"}}"),
    }
}

async fn a_checkpoint_is_kept_per_run_while_the_lease_is_held(place: Place) {
    let store = place.store().await;
    let run = new_run();
    let other = new_run();
    let lease = store
        .create_run(&run, &Holder::this_process())
        .await
        .unwrap();
    let other_lease = store
        .create_run(&other, &Holder::this_process())
        .await
        .unwrap();
    assert_eq!(store.load_checkpoint(&run.id).await.unwrap(), None);

    store
        .save_checkpoint(&lease, &checkpoint(10, "f1"))
        .await
        .unwrap();
    assert_eq!(
        store.load_checkpoint(&run.id).await.unwrap(),
        Some(checkpoint(10, "f1"))
    );
    // The latest replaces it (the lease holder's state is the latest there is).
    store
        .save_checkpoint(&lease, &checkpoint(20, "f1"))
        .await
        .unwrap();
    assert_eq!(
        store.load_checkpoint(&run.id).await.unwrap(),
        Some(checkpoint(20, "f1"))
    );
    store
        .save_checkpoint(&lease, &checkpoint(20, "f2"))
        .await
        .unwrap();
    assert_eq!(
        store
            .load_checkpoint(&run.id)
            .await
            .unwrap()
            .unwrap()
            .format,
        "f2"
    );
    // Runs do not share checkpoints.
    assert_eq!(store.load_checkpoint(&other.id).await.unwrap(), None);
    store
        .save_checkpoint(&other_lease, &checkpoint(3, "f1"))
        .await
        .unwrap();
    assert_eq!(
        store.load_checkpoint(&run.id).await.unwrap().unwrap().seq,
        20
    );

    // A holder that lost the lease writes nothing.
    store.release(&lease).await.unwrap();
    let new_lease = store
        .acquire(&run.id, &Holder::this_process())
        .await
        .unwrap();
    assert_ne!(new_lease.token, lease.token);
    store
        .save_checkpoint(&lease, &checkpoint(99, "f2"))
        .await
        .unwrap();
    assert_eq!(
        store.load_checkpoint(&run.id).await.unwrap().unwrap().seq,
        20
    );
    store
        .save_checkpoint(&new_lease, &checkpoint(30, "f2"))
        .await
        .unwrap();
    assert_eq!(
        store.load_checkpoint(&run.id).await.unwrap().unwrap().seq,
        30
    );

    // It survives reopening.
    drop(store);
    let store = place.store().await;
    assert_eq!(
        store.load_checkpoint(&run.id).await.unwrap(),
        Some(checkpoint(30, "f2"))
    );
    assert_eq!(store.load_checkpoint(&RunId::new()).await.unwrap(), None);
}

/// The engine's journal may be dropped while an append is in flight (a run stopped, a task
/// aborted). Each of these appends is abandoned after a different delay — before it starts,
/// inside its transaction, after its commit — and then the same batch is appended again: it
/// lands exactly once (the retry goes through, or is refused because the abandoned one had
/// landed), the journal stays gap-free and replays, and nothing waits on a transaction the
/// abandoned append left open.
///
/// On SQLite an append on a free database runs to its end on the caller's thread, before it
/// could be abandoned; so another connection holds the write lock for a moment each round, and
/// the append goes to the store's append thread, where it waits and can be left.
async fn appends_abandoned_at_any_moment_land_whole_or_not_at_all(place: Place) {
    let store = place.store().await;
    let run = new_run();
    let lease = store
        .create_run(&run, &Holder::this_process())
        .await
        .unwrap();
    let mut journal = Journal::new(run.id.clone());
    store
        .append(&lease, &[journal.started("checkpoints")])
        .await
        .unwrap();
    let mut abandoned = 0;
    let mut landed_anyway = 0;
    for round in 0..60u64 {
        let mut batch = Vec::new();
        for _ in 0..4 {
            batch.extend(journal.turn(2_000));
        }
        let end = batch.last().unwrap().seq + 1;
        let delay = Duration::from_micros(round * 97 % 3_000);
        let locker = place
            .sqlite_path()
            .map(|path| hold_write_lock(path, Duration::from_micros(round * 53 % 2_000)));
        if tokio::time::timeout(delay, store.append(&lease, &batch))
            .await
            .is_err()
        {
            abandoned += 1;
            let again = tokio::time::timeout(Duration::from_secs(30), store.append(&lease, &batch))
                .await
                .expect("the retry waits on nothing the abandoned append left behind");
            match again {
                Ok(()) => {}
                Err(StoreError::SequenceConflict { expected, .. }) if expected == end => {
                    landed_anyway += 1;
                }
                Err(e) => panic!("round {round}: {e}"),
            }
        }
        if let Some(locker) = locker {
            locker.join().unwrap();
        }
        let events = store.load_events(&run.id).await.unwrap();
        assert_eq!(events.len() as u64, end, "round {round}");
    }
    assert!(
        abandoned > 0,
        "no append was abandoned: the delays are too long"
    );
    let events = store.load_events(&run.id).await.unwrap();
    replay(&events).unwrap();
    eprintln!("{abandoned} of 60 appends abandoned, {landed_anyway} of them landed anyway");
}

/// Holds the SQLite database's write lock from a connection of its own for `hold`, on a thread;
/// returns once the lock is held.
fn hold_write_lock(path: std::path::PathBuf, hold: Duration) -> std::thread::JoinHandle<()> {
    let (locked_tx, locked) = std::sync::mpsc::channel();
    let locker = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.busy_timeout(Duration::from_secs(30)).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        locked_tx.send(()).unwrap();
        std::thread::sleep(hold);
        conn.execute_batch("COMMIT").unwrap();
    });
    locked.recv().unwrap();
    locker
}
