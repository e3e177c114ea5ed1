#![allow(clippy::unwrap_used, clippy::expect_used)]
//! How real runs end, on both stores, with a provider that answers the way models do: a final
//! reply without a tool call finishes after exactly one nudge; inside a task it claims the task
//! done and a failing check's real output reaches the model; repeated text under
//! `on_text_reply = nudge` and empty replies pause with `loop`; `pause` pauses for a person; and
//! a run cut short after any journaled event resumes to the same decisions, with no second nudge
//! and no request answered twice.

#[allow(dead_code)]
mod support;

use std::sync::Arc;

use baton_core::ending::{EndingPolicy, OnTextReply};
use baton_core::governance::LoopPolicy;
use baton_core::task::{Plan, TaskSpec};
use baton_core::*;
use baton_engine::{RunOutcome, SettingsOverride, StartRun};
use baton_model::ModelError;
use baton_store::{Holder, NewRun};
use serde_json::json;
use support::backend::{Backend, on_both_backends};
use support::fn_provider::{FnProvider, call, prompt_text, text};
use support::run::{Ran, engine, run_with, settings};

on_both_backends!(
    a_text_ending_finishes_after_exactly_one_nudge,
    inside_a_task_a_text_ending_runs_the_check_and_its_failure_reaches_the_model,
    repeated_text_in_nudge_mode_pauses_with_loop_after_the_configured_count,
    empty_replies_are_never_an_ending,
    pause_mode_pauses_for_a_person,
    a_run_cut_short_after_any_event_resumes_to_the_same_ending,
    finish_with_open_todo_items_is_answered_once_then_accepted,
);

fn with_endings(on_text_reply: OnTextReply, no_tool_turns: u32) -> RunSettings {
    RunSettings {
        loop_detection: LoopPolicy {
            no_tool_turns,
            ..LoopPolicy::default()
        },
        endings: EndingPolicy {
            on_text_reply,
            ..EndingPolicy::default()
        },
        ..settings(ContextSettings::default())
    }
}

/// Answers by how many assistant messages the request already has (as a server replaying a
/// script would), so a resumed run gets the same answers.
fn by_turn(
    answers: impl Fn(usize) -> Result<ModelReply, ModelError> + Send + Sync + 'static,
) -> Arc<FnProvider> {
    Arc::new(FnProvider::new(move |request, _| {
        let assistants = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant(_)))
            .count();
        answers(assistants)
    }))
}

fn script(n: usize) -> Result<ModelReply, ModelError> {
    match n {
        0 => call("list_dir", json!({"path": "."}), 100),
        1 => call(
            "write_file",
            json!({"path": "a.txt", "content": "hello\n"}),
            110,
        ),
        _ => text("Done: a.txt says hello.", 120),
    }
}

fn count(events: &[EventRecord], kind: &str) -> usize {
    events.iter().filter(|e| e.event.kind() == kind).count()
}

/// The texts of the run's notes to the model, in order.
fn notes(events: &[EventRecord]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match &e.event {
            Event::NoteAdded { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn paused(outcome: &RunOutcome) -> PauseReason {
    match outcome {
        RunOutcome::Paused { reason, .. } => *reason,
        other => panic!("expected a pause, got {other:?}"),
    }
}

async fn a_text_ending_finishes_after_exactly_one_nudge(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let provider = by_turn(script);
    let Ran {
        outcome, events, ..
    } = run_with(
        backend,
        ws.path(),
        with_endings(OnTextReply::Finish, 3),
        provider.clone(),
    )
    .await;
    let RunOutcome::Finished { summary, .. } = &outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(summary, "Done: a.txt says hello.");
    // Two tool turns, the text reply, and the one reply after its nudge.
    assert_eq!(provider.requests.lock().unwrap().len(), 4);
    assert_eq!(count(&events, "note_added"), 1);
    assert_eq!(count(&events, "text_end_accepted"), 1);
    let finished = events
        .iter()
        .find_map(|e| match &e.event {
            Event::RunFinished { finished_by, .. } => Some(*finished_by),
            _ => None,
        })
        .unwrap();
    assert_eq!(finished, Some(FinishedBy::Text));
    // The nudge said how to end, and the model saw it.
    let last = prompt_text(&provider.requests.lock().unwrap()[3]);
    assert!(last.contains("reply once more"), "{last}");
}

async fn inside_a_task_a_text_ending_runs_the_check_and_its_failure_reaches_the_model(
    backend: Backend,
) {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().to_path_buf();
    // The model claims the task done by text before doing it; once the check's failure is in
    // its prompt, it writes the file and ends by text again.
    let provider = Arc::new(FnProvider::new(move |request, _| {
        let prompt = prompt_text(request);
        if prompt.contains("The acceptance check") && !root.join("done.txt").exists() {
            call(
                "write_file",
                json!({"path": "done.txt", "content": "ok"}),
                100,
            )
        } else {
            text("The task is done.", 100)
        }
    }));
    let (store, _schema) = backend.store(ws.path()).await;
    let (engine, observer) = engine(store, provider.clone());
    let plan = Plan {
        tasks: vec![TaskSpec {
            id: "make-done".into(),
            title: "Create done.txt".into(),
            instructions: "Create the file done.txt.".into(),
            deps: vec![],
            check: "test -f done.txt && echo CHECK-OUTPUT-MARKER".into(),
            risky: false,
        }],
        final_check: None,
    };
    let outcome = engine
        .start(StartRun {
            plan: Some(plan),
            goal: "make done.txt".into(),
            workspace: ws.path().into(),
            settings: with_endings(OnTextReply::Finish, 3),
        })
        .await
        .unwrap();
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    let events = observer.events();
    let checks: Vec<bool> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::CheckFinished { passed, .. } => Some(*passed),
            _ => None,
        })
        .collect();
    assert_eq!(checks, vec![false, true]);
    assert_eq!(count(&events, "text_end_accepted"), 2);
    assert_eq!(count(&events, "task_finished"), 1);
    let requests = provider.requests.lock().unwrap();
    // The failed check's real output (exit code 1) reached the model.
    assert!(
        requests
            .iter()
            .any(|r| prompt_text(r).contains("failed (exit code 1)")),
        "no request carried the check's failure"
    );
    // text, nudge, text (claim) → check fails → write → text, nudge, text (claim) → passes.
    assert_eq!(requests.len(), 5);
}

async fn repeated_text_in_nudge_mode_pauses_with_loop_after_the_configured_count(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let provider = by_turn(|_| text("I am done.", 100));
    let Ran {
        outcome, events, ..
    } = run_with(
        backend,
        ws.path(),
        with_endings(OnTextReply::Nudge, 4),
        provider.clone(),
    )
    .await;
    assert_eq!(paused(&outcome), PauseReason::Loop);
    assert_eq!(provider.requests.lock().unwrap().len(), 4);
    assert_eq!(count(&events, "note_added"), 3);
    assert_eq!(count(&events, "text_end_accepted"), 0);
    assert!(events.iter().any(|e| matches!(
        &e.event,
        Event::LoopDetected {
            pattern: governance::LoopPattern::NoToolReplies,
            ..
        }
    )));
}

async fn empty_replies_are_never_an_ending(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let provider = by_turn(|_| text("   ", 100));
    let Ran {
        outcome, events, ..
    } = run_with(
        backend,
        ws.path(),
        with_endings(OnTextReply::Finish, 3),
        provider.clone(),
    )
    .await;
    assert_eq!(paused(&outcome), PauseReason::Loop);
    assert_eq!(provider.requests.lock().unwrap().len(), 3);
    assert_eq!(count(&events, "text_end_accepted"), 0);
    assert_eq!(count(&events, "run_finished"), 0);
    let notes = notes(&events);
    assert!(notes.iter().all(|n| n.contains("empty")), "{notes:?}");
}

async fn pause_mode_pauses_for_a_person(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let provider = by_turn(script);
    let Ran {
        outcome,
        store,
        _schema,
        ..
    } = run_with(
        backend,
        ws.path(),
        with_endings(OnTextReply::Pause, 3),
        provider.clone(),
    )
    .await;
    assert_eq!(paused(&outcome), PauseReason::TextReply);
    assert_eq!(provider.requests.lock().unwrap().len(), 4);
    // The person agrees: resuming with `finish` accepts the model's next text reply at once
    // (it had its nudge).
    let (engine, _) = engine(store, provider.clone());
    let outcome = engine
        .resume(
            outcome.run_id(),
            &SettingsOverride::edit(|s| s.endings.on_text_reply = OnTextReply::Finish),
        )
        .await
        .unwrap();
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    assert_eq!(provider.requests.lock().unwrap().len(), 5);
}

async fn finish_with_open_todo_items_is_answered_once_then_accepted(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let provider = by_turn(|n| match n {
        0 => call(
            "update_plan",
            json!({"items": [{"step": "write a.txt", "status": "done"},
                             {"step": "write docs", "status": "pending"}]}),
            100,
        ),
        _ => call("finish", json!({"summary": "a.txt written"}), 100),
    });
    let Ran {
        outcome, events, ..
    } = run_with(
        backend,
        ws.path(),
        with_endings(OnTextReply::Finish, 3),
        provider.clone(),
    )
    .await;
    let RunOutcome::Finished { summary, .. } = &outcome else {
        panic!("{outcome:?}");
    };
    assert!(summary.starts_with("a.txt written"), "{summary}");
    assert!(summary.contains("2. [pending] write docs"), "{summary}");
    assert_eq!(provider.requests.lock().unwrap().len(), 3);
    let notes = notes(&events);
    assert_eq!(notes.len(), 1);
    assert!(notes[0].contains("2. [pending] write docs"), "{notes:?}");
}

/// The journal without what a resume adds (its own `run_resumed`, the resent request's start).
fn decisions(events: &[EventRecord]) -> Vec<&'static str> {
    events
        .iter()
        .map(|e| e.event.kind())
        .filter(|k| !matches!(*k, "run_resumed" | "model_call_started"))
        .collect()
}

async fn a_run_cut_short_after_any_event_resumes_to_the_same_ending(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let provider = by_turn(script);
    let Ran {
        events: whole,
        store,
        _schema,
        ..
    } = run_with(
        backend,
        ws.path(),
        with_endings(OnTextReply::Finish, 3),
        provider,
    )
    .await;
    let expected = decisions(&whole);
    let answered = count(&whole, "model_call_finished");
    assert_eq!(answered, 4);
    // The process dies after event k: its journal is the first k events (nothing of a step
    // that was not journaled happened, by invariant 1). A new process resumes it.
    for k in 1..whole.len() {
        let run_id = RunId::new();
        let prefix: Vec<EventRecord> = whole[..k]
            .iter()
            .map(|r| EventRecord {
                run_id: run_id.clone(),
                ..r.clone()
            })
            .collect();
        let lease = store
            .create_run(
                &NewRun {
                    id: run_id.clone(),
                    goal: "g".into(),
                    workspace: ws.path().display().to_string(),
                },
                &Holder::this_process(),
            )
            .await
            .unwrap();
        store.append(&lease, &prefix).await.unwrap();
        store.release(&lease).await.unwrap();
        let provider = by_turn(script);
        let (engine, _) = engine(store.clone(), provider.clone());
        let outcome = engine
            .resume(&run_id, &SettingsOverride::default())
            .await
            .unwrap();
        assert!(
            matches!(outcome, RunOutcome::Finished { .. }),
            "cut after {k}: {outcome:?}"
        );
        let resumed = store.load_events(&run_id).await.unwrap();
        assert_eq!(decisions(&resumed), expected, "cut after event {k}");
        // No reply is asked for twice: only the calls that had not finished are sent.
        let before = count(&whole[..k], "model_call_finished");
        assert_eq!(
            provider.requests.lock().unwrap().len(),
            answered - before,
            "cut after event {k}"
        );
    }
}
