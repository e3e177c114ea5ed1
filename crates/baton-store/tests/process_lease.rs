//! A run held by a real second process is locked until that process is SIGKILLed, then taken
//! over at once, and the dead process's journal continues — on a SQLite file and on PostgreSQL
//! (a schema of its own on the `BATON_TEST_POSTGRES` server), where the holder on this host is
//! recognised as dead the same way.
//!
//! A test without libtest's harness (`harness = false`) because the test spawns its own binary as
//! the second process: with `BATON_STORE_TEST_HOLDER_DB` set (to the store's path or URL), `main`
//! plays the holder instead.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/journal.rs"]
mod journal;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use baton_core::{RunId, replay};
use baton_store::testing::PgTestSchema;
use baton_store::{Holder, NewRun, Store, StoreError, StoreLocation, open_store};
use journal::Journal;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if let Ok(store) = std::env::var(HELPER_ENV) {
        runtime.block_on(hold_a_run(store));
        return;
    }
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        a_run_held_by_another_process_is_locked_until_it_dies(path.to_str().unwrap()).await;
    });
    println!("test sqlite::a_run_held_by_another_process_is_locked_until_it_dies ... ok");
    runtime.block_on(async {
        let schema = PgTestSchema::create().await;
        a_run_held_by_another_process_is_locked_until_it_dies(&schema.url()).await;
    });
    println!("test postgres::a_run_held_by_another_process_is_locked_until_it_dies ... ok");
    println!("process_lease: 2 passed, 0 failed");
}

/// The store at `location`: a SQLite file path or a Postgres URL.
async fn open(location: &str) -> Arc<dyn Store> {
    let location = StoreLocation::choose(Some(location), Path::new("/")).unwrap();
    open_store(&location).await.unwrap()
}

fn new_run(goal: &str) -> NewRun {
    NewRun {
        id: RunId::new(),
        goal: goal.into(),
        workspace: "/home/dev/project".into(),
    }
}

const HELPER_ENV: &str = "BATON_STORE_TEST_HOLDER_DB";

/// The second process: creates a run, journals its start, says so on stdout and then holds the
/// lease until it is killed.
async fn hold_a_run(location: String) {
    let store = open(&location).await;
    let run = new_run("held by a helper process");
    let lease = store
        .create_run(&run, &Holder::this_process())
        .await
        .unwrap();
    store
        .append(&lease, &[Journal::new(run.id.clone()).started("goal")])
        .await
        .unwrap();
    println!("READY {}", run.id);
    // Hold the lease until killed, or until the parent closes stdin (it died), or at most two
    // minutes, so that a failing parent never leaves this process behind.
    let (done, wait) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_line(&mut String::new());
        let _ = done.send(());
    });
    let _ = wait.recv_timeout(Duration::from_secs(120));
}

fn spawn_holder_process(location: &str) -> (Child, RunId) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(HELPER_ENV, location)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    for line in stdout.lines() {
        let line = line.unwrap();
        if let Some((_, id)) = line.split_once("READY ") {
            return (child, RunId::from_string(id.trim()));
        }
    }
    panic!(
        "the helper process exited without creating its run: {:?}",
        child.wait()
    );
}

async fn a_run_held_by_another_process_is_locked_until_it_dies(location: &str) {
    let (mut child, run_id) = spawn_holder_process(location);
    let store = open(location).await;

    let err = store
        .acquire(&run_id, &Holder::this_process())
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
    assert!(
        message.contains(&format!("pid {} on ", child.id())),
        "{message}"
    );
    assert!(message.contains("wait for it or stop it"), "{message}");
    let holder = store
        .get_run(&run_id)
        .await
        .unwrap()
        .unwrap()
        .holder
        .unwrap();
    assert_eq!(holder.holder.pid, child.id());
    assert!(holder.alive);
    // Nothing of this process keeps the store open across the kill: the next open must recover
    // (SQLite: the dead process's WAL), as `baton resume` after a crash does.
    store.close().await;
    drop(store);

    child.kill().unwrap();
    child.wait().unwrap();
    let store = open(location).await;
    let lease = store
        .acquire(&run_id, &Holder::this_process())
        .await
        .unwrap();
    // The journal the dead process wrote is intact and continues where it ended.
    let events = store.load_events(&run_id).await.unwrap();
    assert_eq!(events.len(), 1);
    let mut journal = Journal::new(run_id.clone());
    journal.started("goal");
    store.append(&lease, &journal.take(3)).await.unwrap();
    replay(&store.load_events(&run_id).await.unwrap()).unwrap();
}
