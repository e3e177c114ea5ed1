#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Engine behaviour with a scripted provider and a real store: retries are journaled per
//! attempt, exhausted retries pause (never fail) the run, and resume continues it. Every test
//! runs twice, as `sqlite::NAME` (the workspace's SQLite file) and `postgres::NAME` (a schema of
//! its own on the PostgreSQL test server, `BATON_TEST_POSTGRES`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_core::*;
use baton_engine::{Engine, EngineParts, RunObserver, RunOutcome, SettingsOverride, StartRun};
use baton_model::{ModelError, RetryPolicy, ScriptedProvider};
use baton_store::Store;
use baton_tools::ToolRegistry;
use support::backend::{Backend, on_both_backends};

#[allow(dead_code)]
mod support;

on_both_backends!(
    transient_failures_are_retried_and_each_attempt_is_journaled,
    exhausted_retries_pause_and_resume_continues_without_resending_finished_calls,
    permanent_errors_fail_or_pause_by_class,
    a_model_call_that_never_ends_is_cut_at_the_deadline_and_retried,
    resuming_a_finished_run_changes_nothing,
    the_circuit_breaker_pauses_after_consecutive_failures_across_calls,
    the_client_side_rate_limit_spaces_requests,
);

#[derive(Default)]
struct Collect(Mutex<Vec<EventRecord>>);

impl RunObserver for Collect {
    fn on_event(&self, record: &EventRecord, _state: &RunState) {
        self.0.lock().unwrap().push(record.clone());
    }
}

fn settings() -> RunSettings {
    RunSettings {
        tasks: Default::default(),
        model: ModelSettings {
            provider: ProviderKind::OpenAiCompatible,
            base_url: "http://127.0.0.1:9/v1".into(),
            model: "m".into(),
            response_mode: ResponseMode::Whole,
            tool_choice: Default::default(),
            reasoning: Default::default(),
            wire_api: Default::default(),
        },
        limits: Limits {
            max_turns: 10,
            shell_timeout_secs: 10,
        },
        context: Default::default(),
        budget: Default::default(),
        loop_detection: Default::default(),
        endings: Default::default(),
    }
}

fn reply(calls: &[(&str, serde_json::Value)]) -> Result<ModelReply, ModelError> {
    Ok(ModelReply {
        message: AssistantMessage {
            content: None,
            tool_calls: calls
                .iter()
                .map(|(n, a)| ToolCall {
                    id: String::new(),
                    name: n.to_string(),
                    arguments: a.to_string(),
                })
                .collect(),
            ..Default::default()
        },
        usage: Some(Usage {
            prompt_tokens: 7,
            completion_tokens: 3,
            cached_prompt_tokens: None,
            ..Default::default()
        }),
        finish_reason: Some("tool_calls".into()),
        served_model: None,
    })
}

fn fast_retry(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        max_total_wait: Duration::from_secs(5),
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_millis(5),
    }
}

fn engine(
    store: Arc<dyn Store>,
    script: Vec<Result<ModelReply, ModelError>>,
    retry: RetryPolicy,
) -> (Engine, Arc<ScriptedProvider>, Arc<Collect>) {
    let provider = Arc::new(ScriptedProvider::new(script));
    let observer = Arc::new(Collect::default());
    let engine = Engine::new(EngineParts {
        retry,
        observer: observer.clone(),
        ..parts(store, provider.clone())
    });
    (engine, provider, observer)
}

/// Engine parts with test defaults: no secrets, no stop, generous limits, no rate limit.
fn parts(store: Arc<dyn Store>, provider: Arc<dyn baton_model::ModelProvider>) -> EngineParts {
    EngineParts {
        store,
        provider,
        tools: Arc::new(ToolRegistry::standard()),
        retry: fast_retry(1),
        secrets: vec![],
        secret_env_vars: vec![],
        exec: baton_tools::ExecEnv::unconfined(),
        observer: Arc::new(Collect::default()),
        stop: baton_engine::StopSignal::never(),
        model_call_timeout: Duration::from_secs(60),
        breaker_failures: 100,
        prices: Arc::new(baton_model::pricing::PriceTable::defaults()),
        rate_limiter: baton_model::ratelimit::RateLimiter::unlimited(),
        extensions: baton_engine::Extensions::default(),
    }
}

async fn transient_failures_are_retried_and_each_attempt_is_journaled(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let (store, _schema) = backend.store(ws.path()).await;
    let script = vec![
        Err(ModelError::new(ErrorClass::Overloaded, "529 overloaded")),
        Err(ModelError::new(ErrorClass::RateLimited, "429")
            .with_retry_after(Duration::from_millis(2))),
        reply(&[(
            "write_file",
            serde_json::json!({"path": "f.txt", "content": "x"}),
        )]),
        reply(&[("finish", serde_json::json!({"summary": "ok"}))]),
    ];
    let (engine, provider, observer) = engine(store.clone(), script, fast_retry(5));
    let outcome = engine
        .start(StartRun {
            plan: None,
            goal: "g".into(),
            workspace: ws.path().into(),
            settings: settings(),
        })
        .await
        .unwrap();
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("f.txt")).unwrap(),
        "x"
    );

    let events = observer.0.lock().unwrap().clone();
    let failed: Vec<_> = events
        .iter()
        .filter(|r| matches!(r.event, Event::ModelCallFailed { .. }))
        .collect();
    assert_eq!(failed.len(), 2);
    let Event::ModelCallFailed {
        attempt,
        class,
        retry_in_ms,
        ..
    } = &failed[1].event
    else {
        unreachable!()
    };
    assert_eq!(
        (*attempt, *class, *retry_in_ms),
        (2, ErrorClass::RateLimited, Some(2))
    );
    // The three attempts of call 1 sent the identical request.
    let requests = provider.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[0], requests[2]);
    // Live events are exactly what the store holds, and replay gives the final state.
    let run_id = outcome.run_id().clone();
    let stored = store.load_events(&run_id).await.unwrap();
    assert_eq!(stored, events);
    let state = replay(&stored).unwrap();
    assert_eq!(state.status, RunStatus::Finished);
    assert_eq!(
        state.usage.prompt_tokens, 14,
        "usage counted once per successful call"
    );
    // Missing tool-call ids were filled in, uniquely.
    let Event::ModelCallFinished { message, .. } = &stored
        .iter()
        .find(|r| matches!(r.event, Event::ModelCallFinished { .. }))
        .unwrap()
        .event
    else {
        unreachable!()
    };
    assert_eq!(message.tool_calls[0].id, "call_1_0");
}

async fn exhausted_retries_pause_and_resume_continues_without_resending_finished_calls(
    backend: Backend,
) {
    let ws = tempfile::tempdir().unwrap();
    let (store, _schema) = backend.store(ws.path()).await;
    let script = vec![
        reply(&[(
            "write_file",
            serde_json::json!({"path": "a.txt", "content": "1"}),
        )]),
        Err(ModelError::new(ErrorClass::Transient, "connection reset")),
        Err(ModelError::new(ErrorClass::Transient, "connection reset")),
    ];
    let (first, _, _) = engine(store.clone(), script, fast_retry(2));
    let outcome = first
        .start(StartRun {
            plan: None,
            goal: "g".into(),
            workspace: ws.path().into(),
            settings: settings(),
        })
        .await
        .unwrap();
    let RunOutcome::Paused { run_id, reason, .. } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(reason, PauseReason::ModelUnavailable);

    let (second, provider, _) = engine(
        store.clone(),
        vec![reply(&[("finish", serde_json::json!({"summary": "done"}))])],
        fast_retry(2),
    );
    let outcome = second
        .resume(&run_id, &SettingsOverride::default())
        .await
        .unwrap();
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    // Only turn 2 was asked for again; turn 1's answer came from the journal.
    let requests = provider.requests();
    assert_eq!(requests.len(), 1);
    let assistant_msgs = requests[0]
        .messages
        .iter()
        .filter(|m| matches!(m, Message::Assistant(_)))
        .count();
    assert_eq!(assistant_msgs, 1);
    let state = replay(&store.load_events(&run_id).await.unwrap()).unwrap();
    assert_eq!(state.model_calls_started, 2);
    assert_eq!(state.turns_finished, 1);
}

async fn permanent_errors_fail_or_pause_by_class(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let (store, _schema) = backend.store(ws.path()).await;
    let (e, _, _) = engine(
        store.clone(),
        vec![Err(ModelError::new(ErrorClass::Auth, "bad key"))],
        fast_retry(5),
    );
    let outcome = e
        .start(StartRun {
            plan: None,
            goal: "g".into(),
            workspace: ws.path().into(),
            settings: settings(),
        })
        .await
        .unwrap();
    assert!(
        matches!(
            outcome,
            RunOutcome::Paused {
                reason: PauseReason::ModelAuth,
                ..
            }
        ),
        "{outcome:?}"
    );

    let (e, _, _) = engine(
        store.clone(),
        vec![Err(ModelError::new(
            ErrorClass::InvalidRequest,
            "bad schema",
        ))],
        fast_retry(5),
    );
    // A rejected request (a typo in the model name, say) pauses: resuming with other settings
    // can fix it, so the run is never ended for it.
    let outcome = e
        .start(StartRun {
            plan: None,
            goal: "g".into(),
            workspace: ws.path().into(),
            settings: settings(),
        })
        .await
        .unwrap();
    let RunOutcome::Paused {
        run_id,
        reason,
        detail,
    } = outcome
    else {
        panic!("{outcome:?}")
    };
    assert_eq!(reason, PauseReason::ModelRejected);
    assert!(
        detail.contains("bad schema") && detail.contains("--model"),
        "{detail}"
    );
    // Resuming with a working model carries on from the same turn.
    let (e, provider, _) = engine(
        store.clone(),
        vec![reply(&[(
            "finish",
            serde_json::json!({"summary": "fixed"}),
        )])],
        fast_retry(1),
    );
    let fixed = SettingsOverride::edit(|s| s.model.model = "right-model".into());
    let outcome = e.resume(&run_id, &fixed).await.unwrap();
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    assert_eq!(provider.requests()[0].model, "right-model");
}

async fn a_model_call_that_never_ends_is_cut_at_the_deadline_and_retried(backend: Backend) {
    struct Hangs;
    #[async_trait::async_trait]
    impl baton_model::ModelProvider for Hangs {
        fn describe(&self) -> String {
            "hangs".into()
        }
        async fn complete(
            &self,
            _request: &ModelRequest,
            _observer: &mut dyn baton_model::StreamObserver,
        ) -> Result<ModelReply, ModelError> {
            std::future::pending().await
        }
    }
    let ws = tempfile::tempdir().unwrap();
    let (store, _schema) = backend.store(ws.path()).await;
    let observer = Arc::new(Collect::default());
    let engine = Engine::new(EngineParts {
        retry: fast_retry(2),
        observer: observer.clone(),
        model_call_timeout: Duration::from_millis(50),
        ..parts(store, Arc::new(Hangs))
    });
    let outcome = engine
        .start(StartRun {
            plan: None,
            goal: "g".into(),
            workspace: ws.path().into(),
            settings: settings(),
        })
        .await
        .unwrap();
    assert!(
        matches!(
            outcome,
            RunOutcome::Paused {
                reason: PauseReason::ModelUnavailable,
                ..
            }
        ),
        "{outcome:?}"
    );
    let failures = observer
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|r| matches!(&r.event, Event::ModelCallFailed { message, .. } if message.contains("longer than")))
        .count();
    assert_eq!(failures, 2);
}

async fn resuming_a_finished_run_changes_nothing(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let (store, _schema) = backend.store(ws.path()).await;
    let (e, _, _) = engine(
        store.clone(),
        vec![reply(&[("finish", serde_json::json!({"summary": "s"}))])],
        fast_retry(1),
    );
    let outcome = e
        .start(StartRun {
            plan: None,
            goal: "g".into(),
            workspace: ws.path().into(),
            settings: settings(),
        })
        .await
        .unwrap();
    let run_id = outcome.run_id().clone();
    let before = store.load_events(&run_id).await.unwrap();
    let (e, provider, _) = engine(store.clone(), vec![], fast_retry(1));
    let again = e
        .resume(&run_id, &SettingsOverride::default())
        .await
        .unwrap();
    assert_eq!(again, outcome);
    assert!(provider.requests().is_empty());
    assert_eq!(store.load_events(&run_id).await.unwrap(), before);
}

async fn the_circuit_breaker_pauses_after_consecutive_failures_across_calls(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let (store, _schema) = backend.store(ws.path()).await;
    let provider = Arc::new(ScriptedProvider::new(vec![
        Err(ModelError::new(ErrorClass::Overloaded, "529")),
        Err(ModelError::new(ErrorClass::Overloaded, "529")),
        reply(&[(
            "write_file",
            serde_json::json!({"path": "a", "content": "1"}),
        )]),
        Err(ModelError::new(ErrorClass::Transient, "reset")),
        Err(ModelError::new(ErrorClass::Transient, "reset")),
        Err(ModelError::new(ErrorClass::Transient, "reset")),
    ]));
    let engine = Engine::new(EngineParts {
        retry: fast_retry(50),
        breaker_failures: 3,
        ..parts(store.clone(), provider.clone())
    });
    let outcome = engine
        .start(StartRun {
            plan: None,
            goal: "g".into(),
            workspace: ws.path().into(),
            settings: settings(),
        })
        .await
        .unwrap();
    // Two failures then a success reset the count; three in a row open the breaker although
    // the retry policy would have allowed 50 attempts.
    let RunOutcome::Paused {
        run_id,
        reason,
        detail,
    } = outcome
    else {
        panic!("{outcome:?}")
    };
    assert_eq!(reason, PauseReason::ModelUnavailable);
    assert!(
        detail.contains("circuit breaker") && detail.contains('3'),
        "{detail}"
    );
    assert_eq!(provider.requests().len(), 6);
    let state = replay(&store.load_events(&run_id).await.unwrap()).unwrap();
    assert_eq!(state.consecutive_model_failures, 3);
    assert_eq!(state.turns_finished, 1);
}

async fn the_client_side_rate_limit_spaces_requests(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let (store, _schema) = backend.store(ws.path()).await;
    let provider = Arc::new(ScriptedProvider::new(vec![
        reply(&[("list_dir", serde_json::json!({}))]),
        reply(&[("list_dir", serde_json::json!({}))]),
        reply(&[("finish", serde_json::json!({"summary": "ok"}))]),
    ]));
    let limiter = baton_model::ratelimit::RateLimiter::new(baton_model::ratelimit::RateLimit {
        requests_per_minute: Some(120),
        request_burst: Some(1),
        ..Default::default()
    })
    .unwrap();
    let engine = Engine::new(EngineParts {
        rate_limiter: limiter,
        ..parts(store, provider.clone())
    });
    let started = std::time::Instant::now();
    let outcome = engine
        .start(StartRun {
            plan: None,
            goal: "g".into(),
            workspace: ws.path().into(),
            settings: settings(),
        })
        .await
        .unwrap();
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    assert_eq!(provider.requests().len(), 3);
    // 120 requests/min with a burst of one: the 2nd and 3rd request each wait ~0.5 s.
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
}
