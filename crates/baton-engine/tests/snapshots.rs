#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Workspace snapshots in real runs: a `run_start` snapshot before the first turn, an
//! `after_tools` one before each `turn_finished` of a turn with a mutating call (and before
//! `run_finished` when that turn ends the run), none after read-only turns; each journaled id
//! restores the workspace as it was then. Off by default; a failing snapshot does not stop the
//! run.

#[allow(dead_code)]
mod support;

use std::sync::Arc;

use baton_core::task::SnapshotReason;
use baton_core::*;
use baton_engine::{Extensions, RunOutcome, Snapshots, StartRun};
use baton_model::ModelError;
use baton_snapshot::{ShadowRepo, SnapshotId};
use serde_json::json;
use support::backend::{Backend, on_both_backends};
use support::fn_provider::{FnProvider, call};
use support::run::{engine_with, settings};

on_both_backends!(
    snapshots_follow_the_turns_that_changed_files,
    a_failing_snapshot_does_not_stop_the_run,
    a_risky_command_is_preceded_by_a_snapshot,
);

fn write_and_finish() -> Result<ModelReply, ModelError> {
    let mut reply = call(
        "write_file",
        json!({"path": "new.txt", "content": "v2\n"}),
        10,
    )?;
    reply.message.tool_calls.push(ToolCall {
        id: String::new(),
        name: "finish".into(),
        arguments: json!({"summary": "done"}).to_string(),
    });
    Ok(reply)
}

fn script() -> FnProvider {
    FnProvider::new(|_, n| match n {
        0 => call(
            "write_file",
            json!({"path": "new.txt", "content": "v1\n"}),
            10,
        ),
        1 => call("read_file", json!({"path": "orig.txt"}), 10),
        _ => write_and_finish(),
    })
}

async fn drive(
    backend: Backend,
    ws: &std::path::Path,
    mode: Option<Snapshots>,
) -> Vec<EventRecord> {
    drive_with(backend, ws, mode, script()).await
}

async fn drive_with(
    backend: Backend,
    ws: &std::path::Path,
    mode: Option<Snapshots>,
    provider: FnProvider,
) -> Vec<EventRecord> {
    let (store, _schema) = backend.store(ws).await;
    let extensions = Extensions {
        snapshots: mode.unwrap_or_default(),
        ..Extensions::default()
    };
    let (engine, _observer) = engine_with(
        store.clone(),
        Arc::new(provider),
        baton_tools::ToolRegistry::standard(),
        extensions,
    );
    let run_id = RunId::new();
    let outcome = engine
        .start_with_id(
            run_id.clone(),
            StartRun {
                plan: None,
                goal: "write new.txt".into(),
                workspace: ws.into(),
                settings: settings(ContextSettings::default()),
            },
        )
        .await
        .unwrap();
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    let events = store.load_events(&run_id).await.unwrap();
    let state = replay(&events).unwrap();
    assert_eq!(
        state.snapshots.len(),
        events
            .iter()
            .filter(|e| e.event.kind() == "snapshot_taken")
            .count()
    );
    events
}

fn kinds(events: &[EventRecord]) -> Vec<&'static str> {
    events.iter().map(|e| e.event.kind()).collect()
}

async fn snapshots_follow_the_turns_that_changed_files(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("orig.txt"), "original\n").unwrap();
    let events = drive(backend, ws.path(), Some(Snapshots::On)).await;
    let kinds = kinds(&events);
    let taken: Vec<(usize, SnapshotReason, String)> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.event {
            Event::SnapshotTaken {
                snapshot,
                reason,
                task,
            } => {
                assert_eq!(task, &None);
                Some((i, *reason, snapshot.clone()))
            }
            _ => None,
        })
        .collect();
    let reasons: Vec<SnapshotReason> = taken.iter().map(|t| t.1).collect();
    assert_eq!(
        reasons,
        [
            SnapshotReason::RunStart,
            SnapshotReason::AfterTools,
            SnapshotReason::AfterTools
        ],
        "{kinds:?}"
    );
    // Where: before the first turn, right before turn 1 ends, right before the run finishes;
    // turn 2 only read.
    assert_eq!(kinds[taken[0].0 + 1], "turn_started", "{kinds:?}");
    assert_eq!(kinds[taken[1].0 + 1], "turn_finished", "{kinds:?}");
    assert_eq!(kinds[taken[2].0 + 1], "run_finished", "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "turn_finished").count(), 2);

    // The journaled ids are the run's chain in the shadow repository, and each restores the
    // workspace as it was.
    let repo = ShadowRepo::open(ws.path()).unwrap();
    let run = events[0].run_id.to_string();
    let ids: Vec<SnapshotId> = repo.list(&run).unwrap().into_iter().map(|s| s.id).collect();
    let journaled: Vec<SnapshotId> = taken
        .iter()
        .map(|t| SnapshotId::parse(&t.2).unwrap())
        .collect();
    assert_eq!(ids, journaled);
    repo.restore(&run, &journaled[0]).unwrap();
    assert!(!ws.path().join("new.txt").exists());
    assert_eq!(
        std::fs::read_to_string(ws.path().join("orig.txt")).unwrap(),
        "original\n"
    );
    repo.restore(&run, &journaled[1]).unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.path().join("new.txt")).unwrap(),
        "v1\n"
    );
    repo.restore(&run, &journaled[2]).unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.path().join("new.txt")).unwrap(),
        "v2\n"
    );

    // Off by default: no events, no shadow repository.
    let other = tempfile::tempdir().unwrap();
    let events = drive(backend, other.path(), None).await;
    assert!(!kinds_of(&events).contains(&"snapshot_taken"));
    assert!(
        !baton_state::StateDir::for_workspace(other.path())
            .shadow_git()
            .exists()
    );
}

fn kinds_of(events: &[EventRecord]) -> Vec<&'static str> {
    kinds(events)
}

async fn a_failing_snapshot_does_not_stop_the_run(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("orig.txt"), "original\n").unwrap();
    // Break the shadow repository where every snapshot needs to write (its index directory).
    let repo = ShadowRepo::open(ws.path()).unwrap();
    let index_dir = repo.git_dir().join("baton-index");
    std::fs::remove_dir_all(&index_dir).unwrap();
    std::fs::write(&index_dir, "not a directory").unwrap();
    let events = drive(backend, ws.path(), Some(Snapshots::On)).await;
    let kinds = kinds(&events);
    assert!(!kinds.contains(&"snapshot_taken"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"run_finished"));
    assert_eq!(
        std::fs::read_to_string(ws.path().join("new.txt")).unwrap(),
        "v2\n"
    );
}

async fn a_risky_command_is_preceded_by_a_snapshot(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    // `rm -r` is risky in the built-in policy: the state right before it is kept.
    let provider = FnProvider::new(|_, n| match n {
        0 => call(
            "write_file",
            json!({"path": "build/out.txt", "content": "built\n"}),
            10,
        ),
        1 => call("shell", json!({"command": "rm -r build"}), 10),
        _ => call("finish", json!({"summary": "done"}), 10),
    });
    let events = drive_with(backend, ws.path(), Some(Snapshots::On), provider).await;
    let names = kinds(&events);
    let taken: Vec<(usize, SnapshotReason, String)> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.event {
            Event::SnapshotTaken {
                snapshot, reason, ..
            } => Some((i, *reason, snapshot.clone())),
            _ => None,
        })
        .collect();
    let reasons: Vec<SnapshotReason> = taken.iter().map(|t| t.1).collect();
    assert_eq!(
        reasons,
        [
            SnapshotReason::RunStart,
            SnapshotReason::AfterTools,
            SnapshotReason::AfterTools,
        ],
        "the state before `rm -r` is turn 1's snapshot, not journaled twice: {names:?}"
    );
    assert!(!ws.path().join("build").exists());

    // Now with a change in the same turn before the risky command: a before_risky snapshot.
    let ws = tempfile::tempdir().unwrap();
    let provider = FnProvider::new(|_, n| match n {
        0 => {
            let mut reply = call(
                "write_file",
                json!({"path": "build/out.txt", "content": "built\n"}),
                10,
            )?;
            reply.message.tool_calls.push(ToolCall {
                id: String::new(),
                name: "shell".into(),
                arguments: json!({"command": "rm -r build"}).to_string(),
            });
            Ok(reply)
        }
        _ => call("finish", json!({"summary": "done"}), 10),
    });
    let events = drive_with(backend, ws.path(), Some(Snapshots::On), provider).await;
    let names = kinds(&events);
    let risky: Vec<(usize, String)> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match &e.event {
            Event::SnapshotTaken {
                snapshot,
                reason: SnapshotReason::BeforeRisky,
                ..
            } => Some((i, snapshot.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(risky.len(), 1, "{names:?}");
    assert!(
        matches!(&events[risky[0].0 + 1].event, Event::ToolCallStarted { name, .. } if name == "shell"),
        "{names:?}"
    );
    let repo = ShadowRepo::open(ws.path()).unwrap();
    let run = events[0].run_id.to_string();
    repo.restore(&run, &SnapshotId::parse(&risky[0].1).unwrap())
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.path().join("build/out.txt")).unwrap(),
        "built\n"
    );
}
