#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Group commit in the journal (issue 20): a turn with one mutating tool call costs two durable
//! commits in steady state, on both stores, and one whose read-only call returns within the
//! read-only commit delay costs one — and no effect starts before its intent is durable: when
//! the model is asked, the last committed event is that call's `model_call_started`; when a
//! mutating tool runs, its `tool_call_started`. A read-only call, which has no effect to
//! protect, runs while its intent waits for the next commit (or, with a zero delay, while it is
//! being written); a slow one's intent is written at the delay, while it runs. The journal has
//! every observed event, in order, once.

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
use support::run::{engine, engine_with, settings};

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

/// Extensions with only the read-only commit delay set.
fn delayed(read_only_commit_delay: Duration) -> baton_engine::Extensions {
    baton_engine::Extensions {
        read_only_commit_delay,
        ..Default::default()
    }
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

/// The last durable event each time a request was sent.
type IntentChecks = Arc<Mutex<Vec<Option<&'static str>>>>;

/// A model that calls `tool` with `arguments` `calls` times, then finishes, noting the last
/// durable event as each request is sent (its intent must be it).
fn calling(
    commits: &Arc<CountingStore>,
    calls: usize,
    tool: &'static str,
    arguments: serde_json::Value,
) -> (Arc<FnProvider>, IntentChecks) {
    let intent_checks = IntentChecks::default();
    let provider = {
        let commits = commits.clone();
        let intent_checks = intent_checks.clone();
        Arc::new(FnProvider::new(move |_request, n| {
            intent_checks.lock().unwrap().push(commits.last_kind());
            if n >= calls {
                return call("finish", json!({"summary": "done"}), 100);
            }
            call(tool, arguments.clone(), 100)
        }))
    };
    (provider, intent_checks)
}

/// How many commits a turn whose tool call is `tool` costs in steady state, and how long a
/// read-only call's intent may wait for the next commit in that run.
#[derive(Clone, Copy, Debug)]
struct Shape {
    tool: &'static str,
    delay: Duration,
    per_turn: usize,
    /// The last durable event when the call runs, where the timing does not decide it.
    runs_after: Option<&'static str>,
}

/// A mutating call's intent is committed before it runs: two commits a turn.
const MUTATING: Shape = Shape {
    tool: "probe_write",
    delay: baton_engine::DEFAULT_READ_ONLY_COMMIT_DELAY,
    per_turn: 2,
    runs_after: Some("tool_call_started"),
};
/// A read-only call's intent, with a delay no step of the run comes near, always waits for the
/// next request's: one commit a turn.
const READ_FOLDED: Shape = Shape {
    tool: "probe_read",
    delay: Duration::from_secs(600),
    per_turn: 1,
    runs_after: Some("model_call_started"),
};
/// A zero delay writes a read-only call's intent at once (while the call runs, which may or
/// may not see it land): two a turn.
const READ_AT_ONCE: Shape = Shape {
    tool: "probe_read",
    delay: Duration::ZERO,
    per_turn: 2,
    runs_after: None,
};

/// The probe tools, noting into `last_durable` which event was durable when they ran.
fn probes(
    commits: &Arc<CountingStore>,
    last_durable: &Arc<Mutex<Vec<Option<&'static str>>>>,
) -> ToolRegistry {
    ToolRegistry::standard()
        .with(Arc::new(Probe::<false> {
            commits: commits.clone(),
            last_durable: last_durable.clone(),
        }))
        .with(Arc::new(Probe::<true> {
            commits: commits.clone(),
            last_durable: last_durable.clone(),
        }))
}

async fn commits_a_turn(backend: Backend, shape: Shape) {
    let ws = tempfile::tempdir().unwrap();
    let (commits, store, _schema) = counted_store(backend, ws.path()).await;
    let (provider, intent_checks) = calling(&commits, TURNS, shape.tool, json!({}));
    let last_durable = Arc::new(Mutex::new(Vec::new()));
    let (engine, observer) = engine_with(
        store.clone(),
        provider,
        probes(&commits, &last_durable),
        delayed(shape.delay),
    );
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
    // A mutating call ran with its own intent durable; a deferred read before it was.
    let last_durable = last_durable.lock().unwrap().clone();
    assert_eq!(last_durable.len(), TURNS);
    if let Some(expected) = shape.runs_after {
        assert_eq!(last_durable, vec![Some(expected); TURNS], "{shape:?}");
    }
    // Steady state: the turn's commits, each ending with an intent (the first and last turns
    // add the run's own events).
    let batches: Vec<Vec<&'static str>> = commits.appends().into_iter().map(|a| a.kinds).collect();
    let steady = &batches[10..batches.len() - 10];
    let ends: &[&str] = match shape.per_turn {
        1 => &["model_call_started"],
        _ => &["model_call_started", "tool_call_started"],
    };
    assert!(
        steady.iter().all(|b| ends.contains(b.last().unwrap())),
        "{shape:?}: {steady:?}"
    );
    if shape.per_turn == 1 {
        // The reply and the read's intent went out with the next request's intent.
        assert!(
            steady
                .iter()
                .all(|b| b.contains(&"model_call_finished") && b.contains(&"tool_call_started")),
            "{steady:?}"
        );
    }
    let turns = TURNS as f64 + 1.0;
    let per_turn = batches.len() as f64 / turns;
    println!(
        "{shape:?}: {} commits for {} events over {turns} turns: {per_turn:.2} per turn",
        batches.len(),
        batches.iter().map(Vec::len).sum::<usize>(),
    );
    assert!(
        per_turn <= shape.per_turn as f64 + 0.05,
        "{per_turn:.2} commits per turn"
    );
    assert!(
        per_turn >= shape.per_turn as f64,
        "{per_turn:.2} commits per turn"
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

async fn two_commits_a_turn_with_a_mutating_call(backend: Backend) {
    commits_a_turn(backend, MUTATING).await;
}

async fn one_commit_a_turn_with_a_quick_read(backend: Backend) {
    commits_a_turn(backend, READ_FOLDED).await;
}

async fn two_commits_a_turn_with_reads_written_at_once(backend: Backend) {
    commits_a_turn(backend, READ_AT_ONCE).await;
}

/// With the default delay, whether a read's intent is written with the next request's depends
/// on the machine's speed; either way each request goes out with its intent durable, and a turn
/// costs at most two commits.
async fn at_most_two_commits_a_turn_with_the_default_delay(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "hello\n").unwrap();
    let (commits, store, _schema) = counted_store(backend, ws.path()).await;
    let (provider, intent_checks) = calling(&commits, TURNS, "read_file", json!({"path": "a.txt"}));
    let (engine, observer) = engine(store.clone(), provider);
    let mut run_settings = settings(ContextSettings::default());
    run_settings.limits.max_turns = TURNS as u32 + 10;
    run_to_the_end(&engine, ws.path(), run_settings).await;
    let checks = intent_checks.lock().unwrap().clone();
    assert_eq!(checks, vec![Some("model_call_started"); TURNS + 1]);
    let per_turn = commits.count() as f64 / (TURNS as f64 + 1.0);
    println!("{per_turn:.2} commits per turn");
    assert!(per_turn <= 2.05, "{per_turn:.2} commits per turn");
    let run_id = observer.events()[0].run_id.clone();
    let journal = store.load_events(&run_id).await.unwrap();
    assert_eq!(journal.len(), observer.events().len());
    assert_eq!(replay(&journal).unwrap().status, RunStatus::Finished);
}

/// A compaction adds one commit, its intent before the summary call; the summary is committed
/// with the next model call's intent — whether the reads' intents are written at once (two
/// commits a turn) or with the next commit (one).
async fn a_compaction_adds_one_commit(backend: Backend) {
    compaction_commits(backend, READ_AT_ONCE.delay, 2).await;
    compaction_commits(backend, READ_FOLDED.delay, 1).await;
}

async fn compaction_commits(backend: Backend, delay: Duration, per_turn: i64) {
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
    let (engine, observer) = engine_with(
        store.clone(),
        provider,
        ToolRegistry::standard(),
        delayed(delay),
    );
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
    // The turns' commits, one more per compaction, and the run's start and end.
    let turns = seen.len() - summaries;
    let extra = batches.len() as i64 - per_turn * turns as i64 - summaries as i64;
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

/// Per call: the last durable event when it started, and whether it saw its intent land.
type Seen = Arc<Mutex<Vec<(Option<&'static str>, bool)>>>;

/// A read-only tool that runs until its own intent is durable (or 20 s), and notes what was
/// durable when it started and whether it saw its intent land.
struct SlowRead {
    commits: Arc<CountingStore>,
    seen: Seen,
}

#[async_trait]
impl TypedTool for SlowRead {
    type Args = NoArgs;
    const NAME: &'static str = "slow_read";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;

    fn description(&self) -> String {
        "Reads slowly.".into()
    }

    async fn run(&self, _ctx: &ToolContext<'_>, _args: NoArgs) -> ToolResult {
        let at_start = self.commits.last_kind();
        let landed = tokio::time::timeout(Duration::from_secs(20), async {
            while self.commits.last_kind() != Some("tool_call_started") {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .is_ok();
        self.seen.lock().unwrap().push((at_start, landed));
        ToolResult::success("read")
    }
}

/// A read that is still running at the delay has its intent (and the reply before it) written
/// then, on its own, while it goes on: the reply is not left at risk for as long as the read
/// takes.
async fn a_slow_reads_intent_is_written_at_the_delay(backend: Backend) {
    const ROUNDS: usize = 2;
    let ws = tempfile::tempdir().unwrap();
    let (commits, store, _schema) = counted_store(backend, ws.path()).await;
    let (provider, intent_checks) = calling(&commits, ROUNDS, "slow_read", json!({}));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let tools = ToolRegistry::standard().with(Arc::new(SlowRead {
        commits: commits.clone(),
        seen: seen.clone(),
    }));
    // Long enough that the read starts well before it (on any machine), short enough to wait.
    let delay = Duration::from_millis(500);
    let (engine, observer) = engine_with(store.clone(), provider, tools, delayed(delay));
    run_to_the_end(&engine, ws.path(), settings(ContextSettings::default())).await;

    // Each read started before its intent was durable and saw it land while it ran.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen, vec![(Some("model_call_started"), true); ROUNDS]);
    // That commit held the reply and the intent, and nothing after them.
    let batches: Vec<Vec<&'static str>> = commits.appends().into_iter().map(|a| a.kinds).collect();
    let written_alone: Vec<_> = batches
        .iter()
        .filter(|b| b.last() == Some(&"tool_call_started"))
        .collect();
    assert_eq!(written_alone.len(), ROUNDS, "{batches:?}");
    for batch in written_alone {
        assert_eq!(
            batch[batch.len() - 2..],
            ["model_call_finished", "tool_call_started"],
            "{batch:?}"
        );
    }
    let checks = intent_checks.lock().unwrap().clone();
    assert_eq!(checks, vec![Some("model_call_started"); ROUNDS + 1]);
    let run_id = observer.events()[0].run_id.clone();
    let journal = store.load_events(&run_id).await.unwrap();
    assert_eq!(journal.len(), observer.events().len());
    assert_eq!(replay(&journal).unwrap().status, RunStatus::Finished);
}

/// With a zero delay, the commit announcing a read-only call is written at once and held (by
/// the store) until the call runs: it runs (the engine does not wait for that commit), and the next request still goes out only once everything
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
    let (engine, observer) = engine_with(store.clone(), provider, tools, delayed(Duration::ZERO));
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

/// A read-only call's intent written in the background that fails (the lease went to someone
/// else while it was written) stops the run at the next commit: the read-only call ran, but
/// nothing after it is journaled and no further request goes out.
async fn a_failed_background_commit_stops_the_run(backend: Backend) {
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
    let (engine, observer) = engine_with(store.clone(), provider, tools, delayed(Duration::ZERO));
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
    two_commits_a_turn_with_a_mutating_call,
    one_commit_a_turn_with_a_quick_read,
    two_commits_a_turn_with_reads_written_at_once,
    at_most_two_commits_a_turn_with_the_default_delay,
    a_slow_reads_intent_is_written_at_the_delay,
    read_only_calls_run_while_their_intent_is_written,
    a_failed_background_commit_stops_the_run,
    a_compaction_adds_one_commit
);
