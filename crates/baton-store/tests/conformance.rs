//! The store contract, run against both backends: every test here exists twice, as
//! `sqlite::NAME` (a real SQLite file) and `postgres::NAME` (a real PostgreSQL server, a schema
//! of its own; see `support/backends.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/backends.rs"]
mod backends;
#[path = "support/journal.rs"]
mod journal;

use std::collections::HashSet;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use backends::Place;
use baton_core::{EventRecord, RunId, RunStatus, replay};
use baton_store::{Holder, Lease, NewRun, Store, StoreError};
use journal::Journal;

on_both_backends!(
    journal_round_trips_and_replays,
    status_column_follows_the_events,
    gaps_and_duplicates_are_refused_and_nothing_is_written,
    concurrent_appends_at_the_same_seq_exactly_one_wins,
    many_concurrent_appenders_leave_no_gaps_and_no_duplicates,
    an_expired_lease_is_taken_over_and_the_old_holder_is_fenced_off,
    a_stale_holders_append_at_the_right_seq_is_still_refused,
    concurrent_takeovers_of_an_expired_lease_have_exactly_one_winner,
    a_dead_holder_on_this_host_is_taken_over_at_once,
    a_reused_pid_does_not_keep_a_dead_holders_lease,
    runs_and_leases_survive_reopening_and_list_agrees_with_get,
    the_holders_worker_id_and_lease_renewal_time_are_recorded,
    unknown_runs_are_reported_as_not_found,
);

fn new_run(goal: &str) -> NewRun {
    NewRun {
        id: RunId::new(),
        goal: goal.into(),
        workspace: "/home/dev/project".into(),
    }
}

/// A holder on another machine: nothing can be known about its process, only expiry frees it.
fn remote_holder() -> Holder {
    Holder {
        host: "worker-7.example".into(),
        pid: 4242,
        pid_start: Some(99),
        worker_id: None,
    }
}

/// A store with one run whose lease this process holds, and the run's journal builder.
async fn store_with_run(place: &Place) -> (Arc<dyn Store>, Lease, Journal) {
    let store = place.store().await;
    let run = new_run("add OAuth login with tests");
    let lease = store
        .create_run(&run, &Holder::this_process())
        .await
        .unwrap();
    (store, lease, Journal::new(run.id))
}

async fn journal_round_trips_and_replays(place: Place) {
    let (store, lease, mut journal) = store_with_run(&place).await;

    let mut written = vec![journal.started("add OAuth login with tests")];
    written.extend(journal.take(42)); // seven whole turns
    written.push(journal.paused());
    written.push(journal.resumed());
    written.extend(journal.take(6)); // one more turn
    written.extend(journal.finish());
    // One event per append, as the engine journals, except a batch in the middle.
    for record in &written[..30] {
        store
            .append(&lease, std::slice::from_ref(record))
            .await
            .unwrap();
    }
    store.append(&lease, &written[30..]).await.unwrap();

    let read = store.load_events(&lease.run_id).await.unwrap();
    assert_eq!(read, written);
    let state = replay(&read).unwrap();
    assert_eq!(state.status, RunStatus::Finished);
    assert_eq!(state.turns_finished, 9); // 7 + 1 + the turn that called finish
    assert_eq!(state.next_seq, written.len() as u64);

    let page = store.read_events(&lease.run_id, 10, 5).await.unwrap();
    assert_eq!(page, written[10..15]);
    let tail = store
        .read_events(&lease.run_id, written.len() as u64 - 2, 100)
        .await
        .unwrap();
    assert_eq!(tail, written[written.len() - 2..]);
    assert!(
        store
            .read_events(&lease.run_id, 10_000, 10)
            .await
            .unwrap()
            .is_empty()
    );

    let summary = store.get_run(&lease.run_id).await.unwrap().unwrap();
    assert_eq!(summary.event_count, written.len() as u64);
    assert_eq!(summary.status, RunStatus::Finished);
    assert_eq!(summary.goal, "add OAuth login with tests");
    assert_eq!(summary.workspace, "/home/dev/project");
}

async fn status_column_follows_the_events(place: Place) {
    let (store, lease, mut journal) = store_with_run(&place).await;
    let status =
        async |store: &Arc<dyn Store>| store.get_run(&lease.run_id).await.unwrap().unwrap().status;

    assert_eq!(status(&store).await, RunStatus::Created);
    store
        .append(&lease, &[journal.started("goal")])
        .await
        .unwrap();
    assert_eq!(status(&store).await, RunStatus::Running);
    store.append(&lease, &journal.take(6)).await.unwrap();
    assert_eq!(status(&store).await, RunStatus::Running);
    store.append(&lease, &[journal.paused()]).await.unwrap();
    assert_eq!(status(&store).await, RunStatus::Paused);
    // Within one batch, the last status-changing event decides.
    let mut batch = vec![journal.resumed()];
    batch.extend(journal.finish());
    store.append(&lease, &batch).await.unwrap();
    assert_eq!(status(&store).await, RunStatus::Finished);
}

async fn gaps_and_duplicates_are_refused_and_nothing_is_written(place: Place) {
    let (store, lease, mut journal) = store_with_run(&place).await;
    let mut events = vec![journal.started("goal")];
    events.extend(journal.take(8));
    store.append(&lease, &events[..3]).await.unwrap();

    let conflict = |e: StoreError| match e {
        StoreError::SequenceConflict { expected, got, .. } => (expected, got),
        other => panic!("expected a sequence conflict, got {other:?}"),
    };
    // A gap.
    let err = store.append(&lease, &events[5..6]).await.unwrap_err();
    assert!(!err.is_retryable());
    assert_eq!(conflict(err), (3, 5));
    // A duplicate (overwrite attempt).
    assert_eq!(
        conflict(store.append(&lease, &events[2..4]).await.unwrap_err()),
        (3, 2)
    );
    // A batch with a hole inside it.
    let holed = vec![events[3].clone(), events[5].clone()];
    assert_eq!(
        conflict(store.append(&lease, &holed).await.unwrap_err()),
        (4, 5)
    );
    // Records of another run.
    let mut foreign = events[3].clone();
    foreign.run_id = RunId::new();
    let err = store.append(&lease, &[foreign]).await.unwrap_err();
    assert!(matches!(err, StoreError::InvalidRecords { .. }), "{err:?}");
    // An empty append is a no-op.
    store.append(&lease, &[]).await.unwrap();

    assert_eq!(store.load_events(&lease.run_id).await.unwrap(), events[..3]);
    let summary = store.get_run(&lease.run_id).await.unwrap().unwrap();
    assert_eq!(summary.event_count, 3);
    store.append(&lease, &events[3..]).await.unwrap();
    assert_eq!(store.load_events(&lease.run_id).await.unwrap(), events);
}

async fn concurrent_appends_at_the_same_seq_exactly_one_wins(place: Place) {
    let (store, lease, mut journal) = store_with_run(&place).await;
    store
        .append(&lease, &[journal.started("goal")])
        .await
        .unwrap();
    let contenders = journal.take(8);
    // Eight different candidates for seq 1 (the same seq, different content).
    let barrier = Arc::new(tokio::sync::Barrier::new(contenders.len()));
    let tasks: Vec<_> = contenders
        .iter()
        .map(|record| {
            let (store, lease, barrier) = (store.clone(), lease.clone(), barrier.clone());
            let record = EventRecord {
                seq: 1,
                ..record.clone()
            };
            tokio::spawn(async move {
                barrier.wait().await;
                store
                    .append(&lease, std::slice::from_ref(&record))
                    .await
                    .map(|()| record)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(record) => winners.push(record),
            Err(StoreError::SequenceConflict {
                expected: 2,
                got: 1,
                ..
            }) => {}
            Err(other) => panic!("unexpected error {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1);
    let stored = store.load_events(&lease.run_id).await.unwrap();
    assert_eq!(stored.len(), 2);
    assert_eq!(stored[1], winners[0]);
}

/// Sixteen tasks, each with a store of its own (own connections, as separate processes would
/// have), race to extend one journal: each reads where the journal ends, appends its next event
/// there, and starts over after a conflict. The result is one gap-free journal in which every
/// task's every event appears exactly once.
async fn many_concurrent_appenders_leave_no_gaps_and_no_duplicates(place: Place) {
    const TASKS: usize = 16;
    const PER_TASK: usize = 12;
    let (store, lease, mut journal) = store_with_run(&place).await;
    store
        .append(&lease, &[journal.started("goal")])
        .await
        .unwrap();
    // Event bodies to draw from; each task tags the copies it appends with its own turn number
    // range so that every appended event is distinguishable.
    let template = journal.take(1).remove(0);
    let barrier = Arc::new(tokio::sync::Barrier::new(TASKS));
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let store = if task % 2 == 0 {
            place.store().await
        } else {
            store.clone()
        };
        let (lease, barrier, template) = (lease.clone(), barrier.clone(), template.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            let mut conflicts = 0u32;
            for i in 0..PER_TASK {
                let turn = u32::try_from(1_000 * (task + 1) + i).unwrap();
                loop {
                    let next = store
                        .get_run(&lease.run_id)
                        .await
                        .unwrap()
                        .unwrap()
                        .event_count;
                    let record = EventRecord {
                        seq: next,
                        event: baton_core::Event::TurnStarted { turn },
                        ..template.clone()
                    };
                    match store.append(&lease, &[record]).await {
                        Ok(()) => break,
                        Err(StoreError::SequenceConflict { .. }) => conflicts += 1,
                        Err(other) => panic!("task {task}: unexpected error {other:?}"),
                    }
                }
            }
            conflicts
        }));
    }
    let mut conflicts = 0;
    for task in tasks {
        conflicts += task.await.unwrap();
    }
    let stored = store.load_events(&lease.run_id).await.unwrap();
    assert_eq!(stored.len(), 1 + TASKS * PER_TASK, "{conflicts} conflicts");
    for (i, record) in stored.iter().enumerate() {
        assert_eq!(record.seq, i as u64);
    }
    let turns: HashSet<u32> = stored[1..]
        .iter()
        .map(|r| match r.event {
            baton_core::Event::TurnStarted { turn } => turn,
            ref other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(turns.len(), TASKS * PER_TASK, "an event was stored twice");
    let summary = store.get_run(&lease.run_id).await.unwrap().unwrap();
    assert_eq!(summary.event_count, stored.len() as u64);
}

async fn an_expired_lease_is_taken_over_and_the_old_holder_is_fenced_off(place: Place) {
    let a = place.store_with_ttl(Duration::from_millis(300)).await;
    let b = place.store().await;
    let remote = remote_holder();
    let run = new_run("goal");
    let mut journal = Journal::new(run.id.clone());
    let lease_a = a.create_run(&run, &remote).await.unwrap();
    a.append(&lease_a, &[journal.started("goal")])
        .await
        .unwrap();

    let summary = b.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(summary.holder.as_ref().unwrap().holder, remote);

    // B is refused while A's lease runs, then takes the run over once it expired.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut refusals = 0;
    let lease_b = loop {
        match b.acquire(&run.id, &Holder::this_process()).await {
            Ok(lease) => break lease,
            Err(StoreError::Locked { holder, .. }) => {
                assert_eq!(holder, "pid 4242 on worker-7.example");
                refusals += 1;
            }
            Err(other) => panic!("unexpected error {other:?}"),
        }
        assert!(Instant::now() < deadline, "the lease never expired");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(refusals > 0, "the live lease was taken at once");
    assert_ne!(lease_b.token, lease_a.token);

    // A, unaware, keeps going: every write is refused.
    let next = journal.take(2);
    let err = a.append(&lease_a, &next[..1]).await.unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost { .. }), "{err:?}");
    assert!(!err.is_retryable());
    let err = a.renew(&lease_a).await.unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost { .. }), "{err:?}");
    a.release(&lease_a).await.unwrap(); // A no-op: must not free B's lease.

    b.append(&lease_b, &next).await.unwrap();
    let renewed = b.renew(&lease_b).await.unwrap();
    assert!(renewed.expires_at >= lease_b.expires_at);
    b.append(&renewed, &journal.take(1)).await.unwrap();
    let summary = b.get_run(&run.id).await.unwrap().unwrap();
    let holder = summary.holder.unwrap();
    assert_eq!(holder.holder, Holder::this_process());
    assert!(holder.alive);
    assert_eq!(summary.event_count, 4);
    replay(&b.load_events(&run.id).await.unwrap()).unwrap();

    b.release(&renewed).await.unwrap();
    assert!(b.get_run(&run.id).await.unwrap().unwrap().holder.is_none());
    // A released lease can be taken by anyone.
    a.acquire(&run.id, &remote).await.unwrap();
}

/// The fencing invariant on its own: a worker that lost its lease (here: it expired and another
/// worker took the run) appends exactly the event the journal expects next — right seq, valid
/// content — and is refused because its token is stale; the journal does not change.
async fn a_stale_holders_append_at_the_right_seq_is_still_refused(place: Place) {
    let stale_store = place.store_with_ttl(Duration::from_millis(100)).await;
    let other_store = place.store().await;
    let run = new_run("goal");
    let mut journal = Journal::new(run.id.clone());
    let stale = stale_store
        .create_run(&run, &remote_holder())
        .await
        .unwrap();
    let start = journal.started("goal");
    stale_store.append(&stale, &[start]).await.unwrap();

    tokio::time::sleep(Duration::from_millis(250)).await;
    let worker = Holder {
        host: "worker-8.example".into(),
        pid: 77,
        pid_start: None,
        worker_id: Some("worker-8".into()),
    };
    let fresh = other_store.acquire(&run.id, &worker).await.unwrap();

    let next = journal.take(1);
    assert_eq!(next[0].seq, 1);
    let err = stale_store.append(&stale, &next).await.unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost { .. }), "{err:?}");
    assert!(err.to_string().contains("must stop working on it"), "{err}");
    let stored = other_store.load_events(&run.id).await.unwrap();
    assert_eq!(stored.len(), 1);
    // The journal continues with the new holder's events only.
    other_store.append(&fresh, &next).await.unwrap();
    let summary = other_store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(summary.event_count, 2);
    assert_eq!(summary.holder.unwrap().holder, worker);
}

/// Eight workers on other machines see the same expired lease and try to take it at once:
/// exactly one gets it, the others are told who holds it now, and only the winner can append.
async fn concurrent_takeovers_of_an_expired_lease_have_exactly_one_winner(place: Place) {
    const WORKERS: u32 = 8;
    let first = place.store_with_ttl(Duration::from_millis(100)).await;
    let run = new_run("goal");
    let old = first.create_run(&run, &remote_holder()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;

    let barrier = Arc::new(tokio::sync::Barrier::new(WORKERS as usize));
    let mut tasks = Vec::new();
    for worker in 0..WORKERS {
        let store = place.store().await;
        let (barrier, run_id) = (barrier.clone(), run.id.clone());
        tasks.push(tokio::spawn(async move {
            let holder = Holder {
                host: format!("worker-{}.example", 100 + worker),
                pid: 1000 + worker,
                pid_start: None,
                worker_id: None,
            };
            barrier.wait().await;
            let result = store.acquire(&run_id, &holder).await;
            (store, holder, result)
        }));
    }
    let mut winners = Vec::new();
    let mut losers = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            (store, holder, Ok(lease)) => winners.push((store, holder, lease)),
            (store, _, Err(StoreError::Locked { holder, .. })) => losers.push((store, holder)),
            (_, _, Err(other)) => panic!("unexpected error {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "{} workers took the run", winners.len());
    let (winner_store, winner, lease) = winners.remove(0);
    for (_, seen) in &losers {
        assert_eq!(seen, &winner.describe());
    }
    let mut journal = Journal::new(run.id.clone());
    let start = journal.started("goal");
    let err = first
        .append(&old, std::slice::from_ref(&start))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::LeaseLost { .. }), "{err:?}");
    winner_store.append(&lease, &[start]).await.unwrap();
    let summary = winner_store.get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(summary.holder.unwrap().holder, winner);
    assert_eq!(summary.event_count, 1);
}

/// Start time (field 22 of /proc/PID/stat) of a process, parsed independently of the crate.
fn proc_start_time(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_comm = &stat[stat.rfind(')').unwrap() + 1..];
    after_comm
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap()
}

async fn a_dead_holder_on_this_host_is_taken_over_at_once(place: Place) {
    let store = place.store().await;
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let sleeper = Holder {
        host: Holder::this_process().host,
        pid: child.id(),
        pid_start: Some(proc_start_time(child.id())),
        worker_id: None,
    };
    let run = new_run("goal");
    store.create_run(&run, &sleeper).await.unwrap();

    let err = store
        .acquire(&run.id, &Holder::this_process())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(&format!("pid {}", child.id())),
        "{err}"
    );
    let alive = async || {
        let summary = store.get_run(&run.id).await.unwrap().unwrap();
        summary.holder.unwrap().alive
    };
    assert!(alive().await);

    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(!alive().await);
    // Long before the 60 s lease would expire.
    store
        .acquire(&run.id, &Holder::this_process())
        .await
        .unwrap();
}

async fn a_reused_pid_does_not_keep_a_dead_holders_lease(place: Place) {
    let store = place.store().await;
    let me = Holder::this_process();
    // Our own pid, but a start time that is not ours: the recorded process is gone.
    let ghost = Holder {
        pid_start: me.pid_start.map(|s| s + 1),
        ..me.clone()
    };
    let run = new_run("goal");
    store.create_run(&run, &ghost).await.unwrap();
    store.acquire(&run.id, &me).await.unwrap();
}

async fn runs_and_leases_survive_reopening_and_list_agrees_with_get(place: Place) {
    let store = place.store().await;
    let first = new_run("first");
    let second = new_run("second");
    let lease = store
        .create_run(&first, &Holder::this_process())
        .await
        .unwrap();
    let mut journal = Journal::new(first.id.clone());
    let mut events = vec![journal.started("first")];
    events.extend(journal.take(20));
    store.append(&lease, &events).await.unwrap();
    store.create_run(&second, &remote_holder()).await.unwrap();
    let err = store
        .create_run(&first, &Holder::this_process())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::AlreadyExists { .. }), "{err:?}");
    store.close().await;
    drop(store);

    let store = place.store().await;
    assert_eq!(store.load_events(&first.id).await.unwrap(), events);
    let runs = store.list_runs().await.unwrap();
    let ids: Vec<&RunId> = runs.iter().map(|r| &r.id).collect();
    assert_eq!(ids, [&second.id, &first.id], "newest first");
    assert_eq!(runs[1].event_count, 21);
    assert_eq!(runs[1].status, RunStatus::Running);
    assert_eq!(runs[0].status, RunStatus::Created);
    assert!(runs[0].created_at >= runs[1].created_at);
    assert!(runs[1].updated_at >= runs[1].created_at);
    // Every listed run reads back the same one by one.
    for listed in &runs {
        let got = store.get_run(&listed.id).await.unwrap().unwrap();
        assert_eq!(&got, listed);
    }
    assert_eq!(runs[0].holder.as_ref().unwrap().holder, remote_holder());
    assert!(runs[0].holder.as_ref().unwrap().alive);
    // The lease survived the reopening too: held by a live process (this one), it cannot be
    // taken again — not even by the same process, which must not drive a run twice. Released,
    // it can, and the old token is fenced off.
    let err = store
        .acquire(&first.id, &Holder::this_process())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Locked { .. }), "{err:?}");
    store.release(&lease).await.unwrap();
    let again = store
        .acquire(&first.id, &Holder::this_process())
        .await
        .unwrap();
    assert_ne!(again.token, lease.token);
    assert!(matches!(
        store.append(&lease, &journal.take(1)).await,
        Err(StoreError::LeaseLost { .. })
    ));
}

/// `baton ls --all` / `status` show who holds a run by its worker id and how old the lease is:
/// the id is stored with every way of taking a lease, the renewal time moves with `renew`, and
/// both are cleared by `release`.
async fn the_holders_worker_id_and_lease_renewal_time_are_recorded(place: Place) {
    let store = place.store_with_ttl(Duration::from_millis(200)).await;
    let run = new_run("goal");
    let first = remote_holder().with_worker_id("builder-1");
    let before = jiff::Timestamp::now();
    let lease = store.create_run(&run, &first).await.unwrap();
    let summary = store.get_run(&run.id).await.unwrap().unwrap();
    assert!(!summary.queued, "only `baton submit` queues a run");
    let info = summary.holder.unwrap();
    assert_eq!(info.holder, first);
    assert!(
        info.holder.describe().starts_with("builder-1 (pid 4242"),
        "{}",
        info.holder.describe()
    );
    let taken = info
        .renewed_at
        .expect("a new lease records when it was taken");
    // PostgreSQL judges by the server's clock (same machine here): allow a little skew.
    assert!(
        taken >= before - Duration::from_secs(1),
        "{taken} vs {before}"
    );
    assert!(taken < info.expires_at);

    tokio::time::sleep(Duration::from_millis(50)).await;
    let renewed = store.renew(&lease).await.unwrap();
    let info = store
        .get_run(&run.id)
        .await
        .unwrap()
        .unwrap()
        .holder
        .unwrap();
    let again = info.renewed_at.unwrap();
    assert!(
        again > taken,
        "renewing moves the renewal time: {again} vs {taken}"
    );
    // The listing carries the same.
    let listed = store.list_runs().await.unwrap();
    let row = listed.iter().find(|r| r.id == run.id).unwrap();
    assert_eq!(row.holder.as_ref().unwrap().renewed_at, Some(again));
    assert_eq!(
        row.holder.as_ref().unwrap().holder.worker_id.as_deref(),
        Some("builder-1")
    );

    store.release(&renewed).await.unwrap();
    assert!(
        store
            .get_run(&run.id)
            .await
            .unwrap()
            .unwrap()
            .holder
            .is_none()
    );
    // A holder without a worker id (a plain `baton run`) takes it: no stale id is left over.
    let plain = remote_holder();
    store.acquire(&run.id, &plain).await.unwrap();
    let info = store
        .get_run(&run.id)
        .await
        .unwrap()
        .unwrap()
        .holder
        .unwrap();
    assert_eq!(info.holder.worker_id, None);
    assert!(info.renewed_at.unwrap() >= again);
}

async fn unknown_runs_are_reported_as_not_found(place: Place) {
    let store = place.store().await;
    let id = RunId::new();
    assert!(store.get_run(&id).await.unwrap().is_none());
    let not_found = |r: Result<_, StoreError>| matches!(r, Err(StoreError::NotFound { .. }));
    assert!(not_found(
        store
            .acquire(&id, &Holder::this_process())
            .await
            .map(|_| ())
    ));
    assert!(not_found(store.load_events(&id).await.map(|_| ())));
    let lease = Lease {
        run_id: id.clone(),
        token: "t".into(),
        expires_at: jiff::Timestamp::now(),
    };
    assert!(not_found(store.renew(&lease).await.map(|_| ())));
    assert!(not_found(
        store.append(&lease, &[Journal::new(id).started("g")]).await
    ));
}
