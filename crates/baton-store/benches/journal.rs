//! Journal benchmarks, the same on both backends: the per-event cost of a durable, fenced append
//! as history grows (it must stay flat), and the time to load and replay a long run (what
//! `baton resume` pays).
//!
//! Run with `cargo bench -p baton-store`. SQLite files live under cargo's target tmp dir, on
//! the same disk as the build, so that fsync costs what it costs there (not on a RAM-backed
//! /tmp). Postgres runs on the server of `BATON_TEST_POSTGRES` (default
//! `postgres://postgres@127.0.0.1:5432/test`), in a schema of its own that is dropped afterwards.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/journal.rs"]
mod journal;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::{RunId, replay};
use baton_store::testing::PgTestSchema;
use baton_store::{Holder, Lease, NewRun, SqliteStore, Store};
use journal::Journal;

const MEASURED_APPENDS: usize = 200;
const REPLAY_EVENTS: usize = 10_000;
const REPLAY_REPETITIONS: usize = 7;
/// Prefixes are written in batches of this many events (one transaction, one fsync each).
const PREFIX_BATCH: usize = 500;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

/// Where the stores of one backend live during the benchmark.
enum Backend {
    Sqlite(tempfile::TempDir),
    Postgres(PgTestSchema),
}

impl Backend {
    fn sqlite_path(dir: &tempfile::TempDir, name: &str) -> PathBuf {
        dir.path().join(format!("{name}.db"))
    }

    /// Opens (creating) the store named `name`: a file of its own for SQLite; for Postgres all
    /// names share the schema, each measurement using a run of its own.
    async fn open(&self, name: &str) -> Arc<dyn Store> {
        match self {
            Backend::Sqlite(dir) => Arc::new(
                SqliteStore::open(&Self::sqlite_path(dir, name))
                    .await
                    .unwrap(),
            ),
            Backend::Postgres(schema) => Arc::new(schema.store().await),
        }
    }
}

async fn run() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let sqlite = Backend::Sqlite(tempfile::tempdir_in(dir.path()).unwrap());
    println!(
        "== SQLite: WAL, synchronous=FULL, files in {}",
        dir.path().display()
    );
    bench(&sqlite).await;

    let schema = PgTestSchema::create().await;
    let probe = schema.store().await;
    // The store's URL, password redacted (BATON_TEST_POSTGRES may carry one).
    let url = probe.url().to_owned();
    probe.close().await;
    let postgres = Backend::Postgres(schema);
    println!();
    println!(
        "== PostgreSQL at {url} (synchronous_commit=on; an append is one statement: the fence's \
         UPDATE in a CTE, the INSERT of the batch)"
    );
    bench(&postgres).await;
}

async fn bench(backend: &Backend) {
    println!("durable fenced append, one event per append ({MEASURED_APPENDS} appends):");
    for prior in [100, 10_000] {
        append_latency(backend, &format!("append-{prior}"), prior).await;
    }
    load_and_replay(backend).await;
}

/// A store with one run whose journal already holds `prior` events.
async fn run_with_history(
    backend: &Backend,
    name: &str,
    prior: usize,
) -> (Arc<dyn Store>, Lease, Journal) {
    let store = backend.open(name).await;
    let run = NewRun {
        id: RunId::new(),
        goal: "migrate the codebase".into(),
        workspace: "/w".into(),
    };
    let lease = store
        .create_run(&run, &Holder::this_process())
        .await
        .unwrap();
    let mut journal = Journal::new(run.id);
    let mut prefix = vec![journal.started("migrate the codebase")];
    prefix.extend(journal.take(prior - 1));
    for batch in prefix.chunks(PREFIX_BATCH) {
        store.append(&lease, batch).await.unwrap();
    }
    (store, lease, journal)
}

async fn append_latency(backend: &Backend, name: &str, prior: usize) {
    let (store, lease, mut journal) = run_with_history(backend, name, prior).await;
    let mut samples = Vec::with_capacity(MEASURED_APPENDS);
    let mut bytes = 0;
    for _ in 0..MEASURED_APPENDS {
        let record = journal.take(1);
        bytes += serde_json::to_string(&record[0].event).unwrap().len();
        let start = Instant::now();
        store.append(&lease, &record).await.unwrap();
        samples.push(start.elapsed());
    }
    samples.sort();
    println!(
        "  append p50 {} p95 {} p99 {} max {} ({prior} prior events, payload {} B/event avg)",
        ms(percentile(&samples, 50)),
        ms(percentile(&samples, 95)),
        ms(percentile(&samples, 99)),
        ms(samples[samples.len() - 1]),
        bytes / MEASURED_APPENDS,
    );
    store.close().await;
}

async fn load_and_replay(backend: &Backend) {
    let (store, lease, _) = run_with_history(backend, "replay", REPLAY_EVENTS).await;
    let run_id = lease.run_id.clone();
    store.close().await;
    drop(store);
    let size = match backend {
        Backend::Sqlite(dir) => {
            let bytes = std::fs::metadata(Backend::sqlite_path(dir, "replay"))
                .unwrap()
                .len();
            format!(" of the {:.1} MB store", bytes as f64 / 1e6)
        }
        Backend::Postgres(_) => String::new(),
    };

    let start = Instant::now();
    let store = backend.open("replay").await;
    let open = start.elapsed();

    let (mut loads, mut replays, mut totals) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..REPLAY_REPETITIONS {
        let start = Instant::now();
        let events = store.load_events(&run_id).await.unwrap();
        let loaded = start.elapsed();
        let state = replay(&events).unwrap();
        let total = start.elapsed();
        assert_eq!(state.next_seq, REPLAY_EVENTS as u64);
        loads.push(loaded);
        replays.push(total - loaded);
        totals.push(total);
    }
    for samples in [&mut loads, &mut replays, &mut totals] {
        samples.sort();
    }
    println!(
        "load + replay of a {REPLAY_EVENTS}-event run (median of {REPLAY_REPETITIONS}; target < 100 ms):"
    );
    println!(
        "  load_events {} + replay {} = {}",
        ms(percentile(&loads, 50)),
        ms(percentile(&replays, 50)),
        ms(percentile(&totals, 50)),
    );
    let what = match backend {
        Backend::Sqlite(_) => "open (integrity check + migrate)",
        Backend::Postgres(_) => "connect (+ schema version check and migrate)",
    };
    println!("  {what}{size}: {}", ms(open));
    store.close().await;
}

/// The `p`th percentile of sorted samples (nearest rank).
fn percentile(sorted: &[Duration], p: usize) -> Duration {
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted[rank - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}
