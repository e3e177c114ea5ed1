#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Budgets and loop detection in real runs: a run pauses before a call that could pass its
//! budget and after one that did, resumes with a raised budget; a scripted loop is first
//! nudged, then paused; a long poll whose output grows is left alone.

#[allow(dead_code)]
mod support;

use std::sync::Arc;

use baton_core::governance::{Budget, BudgetResource, LoopPattern};
use baton_core::*;
use baton_engine::{RunOutcome, SettingsOverride};
use baton_model::ModelError;
use serde_json::json;
use support::backend::{Backend, on_both_backends};
use support::fn_provider::{FnProvider, call, prompt_text};
use support::run::{Ran, engine, run_with, settings};

on_both_backends!(
    a_call_that_could_pass_the_token_budget_is_not_sent_and_resume_raises_it,
    usage_past_the_budget_pauses_at_the_turn_boundary_after_a_warning,
    the_wall_time_budget_pauses_between_turns,
    a_loop_is_nudged_then_paused,
    a_long_poll_with_growing_output_is_not_a_loop,
);

fn with_budget(budget: Budget) -> RunSettings {
    RunSettings {
        tasks: Default::default(),
        budget,
        ..settings(ContextSettings::default())
    }
}

fn paused(outcome: &RunOutcome) -> PauseReason {
    match outcome {
        RunOutcome::Paused { reason, .. } => *reason,
        other => panic!("expected a pause, got {other:?}"),
    }
}

fn reply_with_usage(prompt_tokens: u64) -> Result<ModelReply, ModelError> {
    call("list_dir", json!({"path": "."}), prompt_tokens)
}

async fn a_call_that_could_pass_the_token_budget_is_not_sent_and_resume_raises_it(
    backend: Backend,
) {
    let ws = tempfile::tempdir().unwrap();
    // Each call reports 1,000 prompt + 20 completion tokens; the worst case of the next one is
    // its estimate plus 4,096 completion tokens.
    let provider = Arc::new(FnProvider::new(|_, n| match n {
        0..=3 => reply_with_usage(1_000),
        _ => call("finish", json!({"summary": "done"}), 1_000),
    }));
    let budget = Budget {
        tokens: Some(8_000),
        ..Budget::default()
    };
    let Ran {
        outcome,
        events,
        store,
        _schema,
    } = run_with(backend, ws.path(), with_budget(budget), provider.clone()).await;
    assert_eq!(paused(&outcome), PauseReason::Budget);
    let RunOutcome::Paused { detail, .. } = &outcome else {
        unreachable!()
    };
    assert!(detail.contains("could use up to"), "{detail}");
    assert!(detail.contains("--budget-tokens"), "{detail}");
    // The refused call was never sent: every request the provider saw has a journaled start.
    let sent = provider.requests.lock().unwrap().len();
    let started = events
        .iter()
        .filter(|e| matches!(e.event, Event::ModelCallStarted { .. }))
        .count();
    assert_eq!(sent, started);
    assert!((1..5).contains(&sent), "{sent}");

    // Resume with a raised budget: the run finishes.
    let (engine, _) = engine(store.clone(), provider.clone());
    let overrides = SettingsOverride::edit(|s| s.budget.tokens = Some(1_000_000));
    let outcome = engine.resume(outcome.run_id(), &overrides).await.unwrap();
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
}

async fn usage_past_the_budget_pauses_at_the_turn_boundary_after_a_warning(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    // The server reports far more than estimated: the pre-call check lets the calls through,
    // the totals then cross 80% and 100% of the budget.
    let provider = Arc::new(FnProvider::new(|_, n| match n {
        0 => reply_with_usage(85_000),
        1 => reply_with_usage(30_000),
        _ => call("finish", json!({"summary": "done"}), 1_000),
    }));
    let budget = Budget {
        tokens: Some(100_000),
        ..Budget::default()
    };
    let Ran {
        outcome, events, ..
    } = run_with(backend, ws.path(), with_budget(budget), provider).await;
    assert_eq!(paused(&outcome), PauseReason::Budget);
    let warnings: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::BudgetWarning { resource, used, .. } => Some((*resource, *used)),
            _ => None,
        })
        .collect();
    assert_eq!(warnings, [(BudgetResource::Tokens, 85_020.0)]);
    let RunOutcome::Paused { detail, .. } = &outcome else {
        unreachable!()
    };
    assert!(
        detail.contains("budget used up: 115040 of 100000 tokens"),
        "{detail}"
    );
}

async fn the_wall_time_budget_pauses_between_turns(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let provider = Arc::new(FnProvider::new(|_, n| match n {
        0 => call("shell", json!({"command": "sleep 2"}), 900),
        _ => call("finish", json!({"summary": "done"}), 900),
    }));
    let budget = Budget {
        wall_time_secs: Some(1),
        ..Budget::default()
    };
    let Ran {
        outcome, events, ..
    } = run_with(backend, ws.path(), with_budget(budget), provider).await;
    assert_eq!(paused(&outcome), PauseReason::Budget);
    let RunOutcome::Paused { detail, .. } = &outcome else {
        unreachable!()
    };
    assert!(
        detail.contains("budget used up") && detail.contains("--max-time"),
        "{detail}"
    );
    // It paused at a clean point: after turn 1 finished, before turn 2 started.
    let kinds: Vec<&str> = events.iter().map(|e| e.event.kind()).collect();
    let pause = kinds.iter().rposition(|k| *k == "run_paused").unwrap();
    assert_eq!(kinds[pause - 1], "turn_finished", "{kinds:?}");
}

async fn a_loop_is_nudged_then_paused(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let provider = Arc::new(FnProvider::new(|_, _| {
        call("shell", json!({"command": "echo same"}), 900)
    }));
    let Ran {
        outcome, events, ..
    } = run_with(
        backend,
        ws.path(),
        settings(ContextSettings::default()),
        provider.clone(),
    )
    .await;
    assert_eq!(paused(&outcome), PauseReason::Loop);
    let detections: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::LoopDetected {
                pattern, response, ..
            } => Some((*pattern, *response)),
            _ => None,
        })
        .collect();
    assert_eq!(
        detections,
        [
            (LoopPattern::Repeat, LoopResponse::Nudge),
            (LoopPattern::Repeat, LoopResponse::Pause)
        ]
    );
    // The model was told before the run paused: 4 calls, the nudge, 4 more.
    let requests = provider.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 8);
    assert!(prompt_text(&requests[4]).contains("baton noticed a loop"));
    assert!(!prompt_text(&requests[3]).contains("baton noticed a loop"));
}

async fn a_long_poll_with_growing_output_is_not_a_loop(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let provider = Arc::new(FnProvider::new(|_, n| match n {
        0..=19 => call(
            "shell",
            json!({"command": "echo compiling >> build.log; cat build.log"}),
            900,
        ),
        _ => call("finish", json!({"summary": "built"}), 900),
    }));
    let mut run_settings = settings(ContextSettings::default());
    run_settings.limits.max_turns = 40;
    let Ran {
        outcome, events, ..
    } = run_with(backend, ws.path(), run_settings, provider).await;
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.event, Event::LoopDetected { .. })),
        "a growing output is progress"
    );
}
