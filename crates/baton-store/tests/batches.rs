//! Batches, the unit of the engine's group commit (issue 20), on both backends: a batch is fenced
//! once — the lease token and its first sequence number are checked for the whole batch, and a
//! refused batch leaves nothing behind — and it is atomic when its writer is SIGKILLed in the
//! middle of writing it: after every kill the journal holds whole batches only, gap-free, and
//! replays.
//!
//! A test without libtest's harness (`harness = false`) because the kill test spawns its own
//! binary as the writer: with `BATON_STORE_TEST_BATCH_WRITER` set (to the store's path or URL),
//! `main` plays the writer instead.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/journal.rs"]
mod journal;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::{EventRecord, RunId, replay};
use baton_store::testing::PgTestSchema;
use baton_store::{Holder, NewRun, Store, StoreError, StoreLocation, open_store};
use journal::Journal;

const WRITER_ENV: &str = "BATON_STORE_TEST_BATCH_WRITER";
const RUN_ENV: &str = "BATON_STORE_TEST_BATCH_RUN";
/// Turns per batch, and each turn's six events: a batch of 60 events, ~1 MB of tool output, so
/// that a writer spends most of its life inside an append and a kill lands in one.
const TURNS_PER_BATCH: usize = 10;
const EVENTS_PER_BATCH: u64 = 6 * TURNS_PER_BATCH as u64;
const OUTPUT_BYTES: usize = 100_000;
const KILLS: usize = 8;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if let Ok(store) = std::env::var(WRITER_ENV) {
        let run_id = RunId::from_string(std::env::var(RUN_ENV).unwrap());
        runtime.block_on(write_batches_until_killed(store, run_id));
        return;
    }
    let mut passed = 0;
    for backend in ["sqlite", "postgres"] {
        runtime.block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let schema = (backend == "postgres").then(PgTestSchema::create);
            let location = match schema {
                Some(schema) => Place::Postgres(schema.await),
                None => Place::Sqlite(dir.path().join("baton.db")),
            };
            a_batch_is_fenced_once_and_refused_whole(&location.url()).await;
            println!("test {backend}::a_batch_is_fenced_once_and_refused_whole ... ok");
            a_writer_killed_in_a_batch_leaves_whole_batches_only(&location.url()).await;
            println!("test {backend}::a_writer_killed_in_a_batch_leaves_whole_batches_only ... ok");
        });
        passed += 2;
    }
    println!("batches: {passed} passed, 0 failed");
}

enum Place {
    Sqlite(std::path::PathBuf),
    Postgres(PgTestSchema),
}

impl Place {
    fn url(&self) -> String {
        match self {
            Place::Sqlite(path) => path.display().to_string(),
            Place::Postgres(schema) => schema.url(),
        }
    }
}

/// The store at `location`: a SQLite file path or a Postgres URL.
async fn open(location: &str) -> Arc<dyn Store> {
    let location = StoreLocation::choose(Some(location), Path::new("/")).unwrap();
    open_store(&location).await.unwrap()
}

fn new_run() -> NewRun {
    NewRun {
        id: RunId::new(),
        goal: "write batches".into(),
        workspace: "/home/dev/project".into(),
    }
}

/// The next `turns` turns of `journal` as one batch.
fn batch(journal: &mut Journal, turns: usize, output_bytes: usize) -> Vec<EventRecord> {
    (0..turns)
        .flat_map(|_| journal.turn(output_bytes))
        .collect()
}

async fn a_batch_is_fenced_once_and_refused_whole(location: &str) {
    let store = open(location).await;
    let run = new_run();
    let stale = store.create_run(&run, &remote_holder()).await.unwrap();
    let mut journal = Journal::new(run.id.clone());
    store
        .append(&stale, &[journal.started("goal")])
        .await
        .unwrap();
    let next = batch(&mut journal, 5, 500);

    // The lease is released and taken by another holder: the old token's whole batch is refused,
    // though it starts exactly where the journal ends.
    store.release(&stale).await.unwrap();
    let fresh = store
        .acquire(&run.id, &Holder::this_process())
        .await
        .unwrap();
    let err = store.append(&stale, &next).await.unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost { .. }), "{err:?}");
    assert_eq!(store.load_events(&run.id).await.unwrap().len(), 1);

    // A batch that starts at the wrong place is refused whole, whatever follows in it.
    let err = store.append(&fresh, &next[1..]).await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::SequenceConflict {
                expected: 1,
                got: 2,
                ..
            }
        ),
        "{err:?}"
    );
    // A batch with another run's record at its end: refused whole, the good events before it too.
    let mut foreign = next.clone();
    foreign.last_mut().unwrap().run_id = RunId::new();
    let err = store.append(&fresh, &foreign).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidRecords { .. }), "{err:?}");
    let summary = store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(summary.event_count, 1);
    assert_eq!(store.load_events(&run.id).await.unwrap().len(), 1);

    // The holder's batch goes in whole, and the next batch is fenced against its end.
    store.append(&fresh, &next).await.unwrap();
    let err = store.append(&fresh, &next).await.unwrap_err();
    assert!(
        matches!(err, StoreError::SequenceConflict { .. }),
        "{err:?}"
    );
    let stored = store.load_events(&run.id).await.unwrap();
    assert_eq!(stored.len(), 1 + next.len());
    assert_eq!(stored[1..], next[..]);
    replay(&stored).unwrap();

    // A batch larger than one INSERT statement takes (SQLite writes it in several), whole.
    let large = batch(&mut journal, 450, 50);
    assert_eq!(large.len(), 2_700);
    store.append(&fresh, &large).await.unwrap();
    let stored = store.load_events(&run.id).await.unwrap();
    assert_eq!(stored.len(), 1 + next.len() + large.len());
    assert_eq!(stored[1 + next.len()..], large[..]);
    assert_eq!(
        store.get_run(&run.id).await.unwrap().unwrap().event_count,
        stored.len() as u64
    );
    replay(&stored).unwrap();
}

fn remote_holder() -> Holder {
    Holder {
        host: "worker-7.example".into(),
        pid: 4242,
        pid_start: Some(99),
        worker_id: None,
    }
}

/// The writer process: takes the run over (its previous writer was killed), continues the
/// journal where it ends, and appends batch after batch, saying on stdout when a batch is
/// handed to the store and when it is committed, until it is killed.
async fn write_batches_until_killed(location: String, run_id: RunId) {
    let store = open(&location).await;
    let lease = store
        .acquire(&run_id, &Holder::this_process())
        .await
        .unwrap();
    let stored = store.load_events(&run_id).await.unwrap().len() as u64;
    // The same journal, regenerated up to where it ends (tool outputs differ, the shape does not).
    let mut journal = Journal::new(run_id.clone());
    journal.started("goal");
    for _ in 0..(stored - 1) / 6 {
        journal.turn(10);
    }
    assert_eq!(journal.next_seq(), stored, "the journal ends inside a turn");
    for k in 0.. {
        let next = batch(&mut journal, TURNS_PER_BATCH, OUTPUT_BYTES);
        println!("APPENDING {k}");
        store.append(&lease, &next).await.unwrap();
        println!("COMMITTED {k}");
    }
}

async fn a_writer_killed_in_a_batch_leaves_whole_batches_only(location: &str) {
    let store = open(location).await;
    let run = new_run();
    let lease = store
        .create_run(&run, &Holder::this_process())
        .await
        .unwrap();
    store
        .append(&lease, &[Journal::new(run.id.clone()).started("goal")])
        .await
        .unwrap();
    store.release(&lease).await.unwrap();

    let mut in_an_append = 0;
    let mut count = 1;
    for kill in 0..KILLS {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env(WRITER_ENV, location)
            .env(RUN_ENV, run.id.as_str())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // Kill it once it committed a batch, at a different moment each time.
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let deadline = Instant::now() + Duration::from_secs(120);
        for line in lines.by_ref() {
            if line.unwrap().starts_with("COMMITTED") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the writer never committed a batch"
            );
        }
        std::thread::sleep(Duration::from_millis(3 + 7 * kill as u64));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let last = lines.map_while(Result::ok).last().unwrap_or_default();
        if last.starts_with("APPENDING") {
            in_an_append += 1;
        }

        // A fresh store, as the next process would open it (SQLite recovers the WAL here), read
        // as that process would: with the run's lease taken first (the killed holder's process
        // is gone, so at once). On PostgreSQL the killed writer's last statement may still be
        // running in the server, which finishes and commits a statement whose client died;
        // taking the lease queues behind its row lock, and a statement that starts later is
        // fenced off by the new token.
        let store = open(location).await;
        let reader = store
            .acquire(&run.id, &Holder::this_process())
            .await
            .unwrap();
        let events = store.load_events(&run.id).await.unwrap();
        let summary = store.get_run(&run.id).await.unwrap().unwrap();
        store.release(&reader).await.unwrap();
        assert_eq!(
            summary.event_count,
            events.len() as u64,
            "after kill {kill}"
        );
        assert_eq!(
            (events.len() as u64 - 1) % EVENTS_PER_BATCH,
            0,
            "kill {kill} left part of a batch: {} events",
            events.len()
        );
        for (i, event) in events.iter().enumerate() {
            assert_eq!(event.seq, i as u64, "after kill {kill}");
        }
        replay(&events).unwrap();
        assert!(events.len() > count, "kill {kill}: no batch was committed");
        count = events.len();
    }
    // The property was put to the test: kills landed while a batch was being written.
    assert!(
        in_an_append >= KILLS / 2,
        "only {in_an_append} of {KILLS} kills came during an append"
    );
}
