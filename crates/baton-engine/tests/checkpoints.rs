#![allow(clippy::unwrap_used, clippy::expect_used)]
//! State checkpoints (issue 20), on both stores: a long run saves its replayed state every
//! thousand events; a resume folds only the events after the latest checkpoint and arrives at
//! exactly the state a replay of the whole journal gives; a checkpoint this build cannot trust —
//! another layout, a field it does not know, a state that does not end where it says — is
//! ignored and the journal replayed, and the run goes on just the same.

#[allow(dead_code)]
mod support;

use std::sync::Arc;

use baton_core::*;
use baton_engine::{RunOutcome, SettingsOverride};
use baton_store::{Checkpoint, Holder, Store};
use serde_json::json;
use support::backend::{Backend, on_both_backends};
use support::counting::CountingStore;
use support::fn_provider::{FnProvider, call};
use support::run::{engine, settings};

/// Turns before the run pauses at its turn limit: ~6 events a turn, so past one checkpoint.
const TURNS: u32 = 200;

fn provider(finish_after: usize) -> Arc<FnProvider> {
    Arc::new(FnProvider::new(move |_request, n| {
        if n >= finish_after {
            return call("finish", json!({"summary": "done"}), 100);
        }
        call("read_file", json!({"path": "a.txt"}), 100)
    }))
}

fn run_settings() -> RunSettings {
    let mut run_settings = settings(ContextSettings::default());
    run_settings.limits.max_turns = TURNS;
    run_settings.loop_detection = baton_core::governance::LoopPolicy {
        repeats: 1_000,
        alternations: 1_000,
        stalled_turns: 1_000,
        ..Default::default()
    };
    run_settings
}

/// A run paused at its turn limit after [`TURNS`] turns, on a counting store.
async fn paused_run(
    backend: Backend,
    ws: &std::path::Path,
) -> (Arc<CountingStore>, RunId, impl Drop) {
    std::fs::write(ws.join("a.txt"), "hello\n").unwrap();
    let (inner, schema) = backend.store(ws).await;
    let store = Arc::new(CountingStore::new(inner));
    let (engine, observer) = engine(store.clone(), provider(usize::MAX));
    let outcome = engine
        .start(baton_engine::StartRun {
            plan: None,
            goal: "read a.txt again and again".into(),
            workspace: ws.into(),
            settings: run_settings(),
        })
        .await
        .unwrap();
    assert!(matches!(outcome, RunOutcome::Paused { .. }), "{outcome:?}");
    let run_id = observer.events()[0].run_id.clone();
    (store, run_id, DropLast(schema))
}

/// Keeps a Postgres schema alive until the test ends.
struct DropLast<T>(T);
impl<T> Drop for DropLast<T> {
    fn drop(&mut self) {}
}

async fn resume_to_the_end(store: Arc<CountingStore>, run_id: &RunId) -> RunOutcome {
    let (engine, _) = engine(store, provider(3));
    let overrides = SettingsOverride::edit(|s| s.limits.max_turns = TURNS + 10);
    engine.resume(run_id, &overrides).await.unwrap()
}

async fn a_resume_folds_only_the_events_after_the_checkpoint(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let (store, run_id, _keep) = paused_run(backend, ws.path()).await;
    let journal = store.load_events(&run_id).await.unwrap();
    assert!(journal.len() > 1_000, "{} events", journal.len());
    let saved = store.checkpoints();
    assert!(
        !saved.is_empty(),
        "no checkpoint in {} events",
        journal.len()
    );
    assert!(saved.windows(2).all(|w| w[1] >= w[0] + 1_000), "{saved:?}");

    // The stored checkpoint is exactly the replay of the events before it.
    let checkpoint = store.load_checkpoint(&run_id).await.unwrap().unwrap();
    assert_eq!(checkpoint.seq, *saved.last().unwrap());
    assert_eq!(checkpoint.format, STATE_FORMAT);
    let stored: RunState = serde_json::from_str(&checkpoint.state).unwrap();
    let prefix = usize::try_from(checkpoint.seq).unwrap();
    assert_eq!(stored, replay(&journal[..prefix]).unwrap());

    let reads_before = store.reads().len();
    let outcome = resume_to_the_end(store.clone(), &run_id).await;
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    // The resume read the journal from the checkpoint on, never from the start.
    let resume_reads = &store.reads()[reads_before..];
    assert_eq!(
        resume_reads.first(),
        Some(&checkpoint.seq),
        "{resume_reads:?}"
    );
    assert!(!resume_reads.contains(&0), "{resume_reads:?}");
    // And it went on from the same state: the whole journal still replays, to the end.
    let journal = store.load_events(&run_id).await.unwrap();
    let end = replay(&journal).unwrap();
    assert_eq!(end.status, RunStatus::Finished);
    assert_eq!(end.turns_finished, TURNS + 3);
}

/// The checkpoint the run saved, made into one this build must not trust in each of the ways
/// the loader checks; each time the resume replays the whole journal and the run continues as
/// from the real state.
async fn an_untrusted_checkpoint_is_ignored(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let (store, run_id, _keep) = paused_run(backend, ws.path()).await;
    let real = store.load_checkpoint(&run_id).await.unwrap().unwrap();
    // Each claims to end beyond the journal: trusted, it would make the resume append at the
    // wrong seq.
    let beyond = |i: u64, edit: &dyn Fn(&mut serde_json::Value)| {
        let seq = 1_000_000 + i;
        let mut state: serde_json::Value = serde_json::from_str(&real.state).unwrap();
        state["next_seq"] = json!(seq);
        edit(&mut state);
        Checkpoint {
            seq,
            format: STATE_FORMAT.to_owned(),
            state: state.to_string(),
        }
    };
    let untrusted = [
        // Another layout.
        Checkpoint {
            format: "run-state/0+0.0.0".into(),
            ..beyond(0, &|_| {})
        },
        // A field this build's RunState does not have (it would be dropped silently).
        beyond(1, &|state| state["from_a_newer_reducer"] = json!(42)),
        // A state that does not end where the checkpoint says.
        beyond(2, &|state| state["next_seq"] = json!(real.seq)),
        // Another run's.
        beyond(3, &|state| state["run_id"] = json!(RunId::new().as_str())),
        // Not a state at all.
        Checkpoint {
            state: "{\"not\": \"a state\"}".into(),
            ..beyond(4, &|_| {})
        },
    ];
    for (i, checkpoint) in untrusted.iter().enumerate() {
        let lease = store
            .acquire(&run_id, &Holder::this_process())
            .await
            .unwrap();
        store.save_checkpoint(&lease, checkpoint).await.unwrap();
        store.release(&lease).await.unwrap();
        let (engine, _) = engine(store.clone(), provider(usize::MAX));
        let reads_before = store.reads().len();
        // One more turn each time, then the turn limit pauses it again.
        let overrides = SettingsOverride::edit(move |s| s.limits.max_turns = TURNS + 1 + i as u32);
        let outcome = engine.resume(&run_id, &overrides).await.unwrap();
        assert!(
            matches!(outcome, RunOutcome::Paused { .. }),
            "{i}: {outcome:?}"
        );
        let reads = &store.reads()[reads_before..];
        assert_eq!(
            reads.first(),
            Some(&0),
            "checkpoint {i} was trusted: {reads:?}"
        );
        let journal = store.load_events(&run_id).await.unwrap();
        assert_eq!(
            replay(&journal).unwrap().turns_finished,
            TURNS + 1 + i as u32
        );
    }
}

on_both_backends!(
    a_resume_folds_only_the_events_after_the_checkpoint,
    an_untrusted_checkpoint_is_ignored,
);
