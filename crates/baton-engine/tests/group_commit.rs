#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Group commit in the journal (issue 20): a turn with one tool call costs two durable commits
//! in steady state, on both stores — and no effect starts before its intent is durable: when the
//! model is asked, the last committed event is that call's `model_call_started`; when a
//! mutating tool runs, its `tool_call_started`. A read-only call, which has no effect to
//! protect, runs while its intent is being written. The journal has every observed event, in
//! order, once.

#[allow(dead_code)]
mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use baton_core::*;
use baton_store::Store;
use baton_store::testing::PgTestSchema;
use baton_tools::{ToolContext, ToolRegistry, TypedTool};
use serde_json::json;
use support::backend::{Backend, on_both_backends};
use support::counting::CountingStore;
use support::fn_provider::{FnProvider, call, is_summary_request, text};
use support::run::{engine, engine_with_tools, settings};

const TURNS: usize = 100;

/// Runs a goal in `workspace` until it finishes, with loop detection out of the way: these runs
/// repeat the same calls on purpose.
async fn run_to_the_end(
    engine: &baton_engine::Engine,
    workspace: &std::path::Path,
    mut run_settings: RunSettings,
) {
    run_settings.loop_detection = baton_core::governance::LoopPolicy {
        repeats: 1_000,
        alternations: 1_000,
        stalled_turns: 1_000,
        ..Default::default()
    };
    let outcome = engine
        .start(baton_engine::StartRun {
            plan: None,
            goal: "call the same tools again and again".into(),
            workspace: workspace.into(),
            settings: run_settings,
        })
        .await
        .unwrap();
    assert!(
        matches!(outcome, baton_engine::RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
}

/// `backend`'s store for `workspace` with its commits counted: the counter, the store the engine
/// is given (the same one), and the PostgreSQL schema to keep alive.
async fn counted_store(
    backend: Backend,
    workspace: &std::path::Path,
) -> (Arc<CountingStore>, Arc<dyn Store>, Option<PgTestSchema>) {
    let (inner, schema) = backend.store(workspace).await;
    let commits = Arc::new(CountingStore::new(inner));
    let store: Arc<dyn Store> = commits.clone();
    (commits, store, schema)
}

async fn two_commits_a_turn(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "hello\n").unwrap();
    let (commits, store, _schema) = counted_store(backend, ws.path()).await;
    let intent_checks = Arc::new(Mutex::new(Vec::new()));
    let provider = {
        let commits = commits.clone();
        let intent_checks = intent_checks.clone();
        Arc::new(FnProvider::new(move |_request, n| {
            // The request is being sent: its intent must be the last durable event.
            intent_checks.lock().unwrap().push(commits.last_kind());
            if n >= TURNS {
                return call("finish", json!({"summary": "done"}), 100);
            }
            call("read_file", json!({"path": "a.txt"}), 100)
        }))
    };
    let (engine, observer) = engine(store.clone(), provider);
    let mut run_settings = settings(ContextSettings::default());
    run_settings.limits.max_turns = TURNS as u32 + 10;
    run_to_the_end(&engine, ws.path(), run_settings).await;

    // Every request went out with its model_call_started durable, nothing after it.
    let checks = intent_checks.lock().unwrap().clone();
    assert_eq!(checks.len(), TURNS + 1);
    assert!(
        checks.iter().all(|k| *k == Some("model_call_started")),
        "{checks:?}"
    );
    // Every tool_call_started was the last event of its commit (the tool ran after it).
    let batches: Vec<Vec<&'static str>> = commits.appends().into_iter().map(|a| a.kinds).collect();
    for batch in &batches {
        if let Some(i) = batch.iter().position(|k| *k == "tool_call_started") {
            assert_eq!(i, batch.len() - 1, "{batch:?}");
        }
    }
    // Steady state: two commits a turn (the first and last turns add the run's own events).
    let turns = TURNS as f64 + 1.0;
    let per_turn = batches.len() as f64 / turns;
    println!(
        "{} commits for {} events over {} turns: {per_turn:.2} per turn",
        batches.len(),
        batches.iter().map(Vec::len).sum::<usize>(),
        turns
    );
    assert!(per_turn <= 2.05, "{per_turn:.2} commits per turn");
    let steady = &batches[10..batches.len() - 10];
    assert!(
        steady
            .iter()
            .all(|b| b.last() == Some(&"model_call_started")
                || b.last() == Some(&"tool_call_started")),
        "{steady:?}"
    );

    // The journal holds exactly what was observed, gap-free, and replays to the same end.
    let run_id = observer.events()[0].run_id.clone();
    let journal = store.load_events(&run_id).await.unwrap();
    let observed = observer.events();
    assert_eq!(journal.len(), observed.len());
    for (i, (stored, seen)) in journal.iter().zip(&observed).enumerate() {
        assert_eq!(stored.seq, i as u64);
        assert_eq!(stored.event, seen.event);
    }
    assert_eq!(replay(&journal).unwrap().status, RunStatus::Finished);
}

/// A compaction adds one commit, its intent before the summary call; the summary is committed
/// with the next model call's intent, as a model call's outcome is with the next tool's.
async fn a_compaction_adds_one_commit(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "hello\n").unwrap();
    let (commits, store, _schema) = counted_store(backend, ws.path()).await;
    let last_durable = Arc::new(Mutex::new(Vec::new()));
    let provider = {
        let commits = commits.clone();
        let last_durable = last_durable.clone();
        Arc::new(FnProvider::new(move |request, n| {
            let summary = is_summary_request(request);
            last_durable
                .lock()
                .unwrap()
                .push((summary, commits.last_kind()));
            if summary {
                return text("## Goal\nRead a.txt.\n## Next step\nRead it again.", 500);
            }
            if n >= 40 {
                return call("finish", json!({"summary": "done"}), 500);
            }
            // Reported usage that climbs past the window's threshold every few turns.
            call(
                "read_file",
                json!({"path": "a.txt"}),
                1_000 + 400 * (n as u64 % 10),
            )
        }))
    };
    let (engine, observer) = engine(store.clone(), provider);
    let mut run_settings = settings(ContextSettings {
        window_tokens: 5_000,
        compact_at_percent: 80,
        masking: Masking::Off,
        compaction: Compaction::Summarize {
            keep_recent_turns: 1,
        },
    });
    run_settings.limits.max_turns = 60;
    run_to_the_end(&engine, ws.path(), run_settings).await;

    let seen = last_durable.lock().unwrap().clone();
    let summaries = seen.iter().filter(|(summary, _)| *summary).count();
    assert!(summaries >= 2, "the run should have compacted: {seen:?}");
    for (summary, last) in &seen {
        let intent = if *summary {
            "compaction_started"
        } else {
            "model_call_started"
        };
        assert_eq!(*last, Some(intent), "{seen:?}");
    }
    let batches: Vec<Vec<&'static str>> = commits.appends().into_iter().map(|a| a.kinds).collect();
    for batch in &batches {
        if batch.contains(&"compaction_finished") {
            assert_eq!(batch.last(), Some(&"model_call_started"), "{batch:?}");
        }
    }
    // Two commits a turn, one more per compaction, and the run's start and end.
    let turns = seen.len() - summaries;
    let extra = batches.len() as i64 - 2 * turns as i64 - summaries as i64;
    assert!(
        (0..=3).contains(&extra),
        "{} commits: {batches:?}",
        batches.len()
    );

    let run_id = observer.events()[0].run_id.clone();
    let journal = store.load_events(&run_id).await.unwrap();
    assert_eq!(journal.len(), observer.events().len());
    assert_eq!(replay(&journal).unwrap().status, RunStatus::Finished);
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct NoArgs {}

/// A tool that says it runs to the store holding its intent, and notes which event was the last
/// durable one when it ran.
struct Probe<const MUTATING: bool> {
    commits: Arc<CountingStore>,
    last_durable: Arc<Mutex<Vec<Option<&'static str>>>>,
}

#[async_trait]
impl<const MUTATING: bool> TypedTool for Probe<MUTATING> {
    type Args = NoArgs;
    const NAME: &'static str = if MUTATING {
        "probe_write"
    } else {
        "probe_read"
    };
    const EFFECT: ToolEffect = if MUTATING {
        ToolEffect::Mutating
    } else {
        ToolEffect::ReadOnly
    };

    fn description(&self) -> String {
        "A probe.".into()
    }

    async fn run(&self, _ctx: &ToolContext<'_>, _args: NoArgs) -> ToolResult {
        self.last_durable
            .lock()
            .unwrap()
            .push(self.commits.last_kind());
        self.commits.call_runs(Self::NAME);
        ToolResult::success("probed")
    }
}

/// The commit announcing a read-only call is held until the call runs: it runs (the engine
/// does not wait for that commit), and the next request still goes out only once everything
/// before it is durable. The commit announcing a mutating call is held for a while too, and its
/// call never runs during the hold: it starts after its intent is durable, whatever the timing.
async fn read_only_calls_run_while_their_intent_is_written(backend: Backend) {
    const ROUNDS: usize = 3;
    let ws = tempfile::tempdir().unwrap();
    let (commits, store, _schema) = counted_store(backend, ws.path()).await;
    // The read-only hold ends when the call runs (the bound only stops a wrong engine from
    // hanging the test); the mutating one at its bound, as its call must wait for it.
    commits.hold("probe_read", Duration::from_secs(20));
    commits.hold("probe_write", Duration::from_millis(300));
    let intent_checks = Arc::new(Mutex::new(Vec::new()));
    let provider = {
        let commits = commits.clone();
        let intent_checks = intent_checks.clone();
        Arc::new(FnProvider::new(move |_request, n| {
            intent_checks.lock().unwrap().push(commits.last_kind());
            match n {
                n if n >= 2 * ROUNDS => call("finish", json!({"summary": "done"}), 100),
                n if n % 2 == 0 => call("probe_read", json!({}), 100),
                _ => call("probe_write", json!({}), 100),
            }
        }))
    };
    let reads = Arc::new(Mutex::new(Vec::new()));
    let writes = Arc::new(Mutex::new(Vec::new()));
    let tools = ToolRegistry::standard()
        .with(Arc::new(Probe::<false> {
            commits: commits.clone(),
            last_durable: reads.clone(),
        }))
        .with(Arc::new(Probe::<true> {
            commits: commits.clone(),
            last_durable: writes.clone(),
        }));
    let (engine, observer) = engine_with_tools(store.clone(), provider, tools);
    run_to_the_end(&engine, ws.path(), settings(ContextSettings::default())).await;

    let held = commits.held();
    let expected: Vec<(String, bool)> = (0..ROUNDS)
        .flat_map(|_| [("probe_read".into(), true), ("probe_write".into(), false)])
        .collect();
    assert_eq!(held, expected, "(tool, ran while its intent was held)");
    // While a read ran, its own intent was not durable yet; a write saw its own.
    let reads = reads.lock().unwrap().clone();
    assert_eq!(reads, vec![Some("model_call_started"); ROUNDS]);
    let writes = writes.lock().unwrap().clone();
    assert_eq!(writes, vec![Some("tool_call_started"); ROUNDS]);
    // Every request waited for everything before it, the held read's intent included.
    let checks = intent_checks.lock().unwrap().clone();
    assert_eq!(checks, vec![Some("model_call_started"); 2 * ROUNDS + 1]);
    let run_id = observer.events()[0].run_id.clone();
    let journal = store.load_events(&run_id).await.unwrap();
    let observed = observer.events();
    assert_eq!(journal.len(), observed.len());
    for (i, (stored, seen)) in journal.iter().zip(&observed).enumerate() {
        assert_eq!(stored.seq, i as u64);
        assert_eq!(stored.event, seen.event);
    }
}

/// An overlapped commit that fails (the lease went to someone else while it was written) stops
/// the run at the next commit: the read-only call ran, but nothing after it is journaled and no
/// further request goes out.
async fn a_failed_overlapped_commit_stops_the_run(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let (commits, store, _schema) = counted_store(backend, ws.path()).await;
    commits.refuse_intents_of("probe_read");
    let provider = Arc::new(FnProvider::new(|_request, n| match n {
        0 => call("probe_read", json!({}), 100),
        _ => call("finish", json!({"summary": "done"}), 100),
    }));
    let requests = provider.requests.clone();
    let reads = Arc::new(Mutex::new(Vec::new()));
    let tools = ToolRegistry::standard().with(Arc::new(Probe::<false> {
        commits: commits.clone(),
        last_durable: reads.clone(),
    }));
    let (engine, observer) = engine_with_tools(store.clone(), provider, tools);
    let outcome = engine
        .start(baton_engine::StartRun {
            plan: None,
            goal: "probe once".into(),
            workspace: ws.path().into(),
            settings: settings(ContextSettings::default()),
        })
        .await;
    assert!(
        matches!(
            outcome,
            Err(baton_engine::EngineError::Store(
                baton_store::StoreError::LeaseLost { .. }
            ))
        ),
        "{outcome:?}"
    );
    assert_eq!(
        reads.lock().unwrap().len(),
        1,
        "the read-only call ran once"
    );
    assert_eq!(
        requests.lock().unwrap().len(),
        1,
        "no request after the failure"
    );
    // The journal ends where the last successful commit did: the first request's intent.
    let run_id = observer.events()[0].run_id.clone();
    let journal = store.load_events(&run_id).await.unwrap();
    assert_eq!(
        journal.last().map(|r| r.event.kind()),
        Some("model_call_started")
    );
    assert_eq!(journal.len(), observer.events().len());
}

on_both_backends!(
    two_commits_a_turn,
    read_only_calls_run_while_their_intent_is_written,
    a_failed_overlapped_commit_stops_the_run,
    a_compaction_adds_one_commit
);
