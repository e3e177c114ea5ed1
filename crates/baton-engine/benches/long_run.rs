#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Context benchmark: a scripted 300-turn run with ~2 KB of tool output per turn against a
//! 32k-token window, through the real engine, store and tools.
//!
//! Prints the prompt tokens sent (summary calls included) against a naive full-history
//! baseline (every request carrying the whole conversation, counted as if the window were
//! unbounded), the peak prompt, the number of compactions and the mean prefix stability
//! between compactions. Token counts are exact o200k counts (the run uses an OpenAI model
//! name, and the scripted server reports the same counts as usage).
//!
//! `cargo bench -p baton-engine --bench long_run [-- TURNS]`

#[path = "../tests/support/fn_provider.rs"]
mod fn_provider;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use baton_context::assemble;
use baton_context::tokens::{Encoding, TokenCounter};
use baton_core::*;
use baton_engine::{Engine, EngineParts, RunOutcome, StartRun};
use baton_model::RetryPolicy;
use baton_store::{SqliteStore, Store};
use baton_tools::ToolRegistry;
use fn_provider::{FnProvider, call, is_summary_request, text};
use serde_json::json;

const WINDOW: u64 = 32_768;
const FILES: usize = 20;

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this as a smoke test.
    let full = std::env::args().any(|arg| arg == "--bench");
    let turns: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(if full { 300 } else { 40 });
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // A strong model's profile and the default one (any unknown model), both held to a 32k
    // window; token counts are o200k in both.
    for profile_model in ["gpt-4o", "some-local-model"] {
        runtime.block_on(bench(turns, profile_model));
    }
}

/// ~2 KB of code-like text, different per file.
fn file_text(n: usize) -> String {
    (0..40)
        .map(|i| {
            format!(
                "    let value_{n}_{i} = compute_{i}(input, {});  // step {i}\n",
                n * 31 + i
            )
        })
        .collect()
}

async fn bench(turns: usize, profile_model: &str) {
    let ws = tempfile::tempdir().unwrap();
    for n in 0..FILES {
        std::fs::write(ws.path().join(format!("f{n}.rs")), file_text(n)).unwrap();
    }
    let counter = Arc::new(TokenCounter::default());
    let model_calls = Arc::new(AtomicUsize::new(0));
    let provider = {
        let counter = counter.clone();
        let model_calls = model_calls.clone();
        Arc::new(FnProvider::new(move |request, _| {
            // The scripted server reports exact prompt tokens, as a real one would.
            let prompt = counter.count(Encoding::O200k, request);
            if is_summary_request(request) {
                return text(&summary(), prompt);
            }
            // Turns are counted by the script itself: after compaction the request no longer
            // shows how many came before.
            let turn = model_calls.fetch_add(1, Ordering::SeqCst);
            if turn >= turns {
                return call("finish", json!({"summary": "done"}), prompt);
            }
            match turn % 25 {
                0 => call(
                    "update_plan",
                    json!({"items": [
                        {"step": format!("refactor batch {}", turn / 25), "status": "in_progress"},
                        {"step": "run the tests", "status": "pending"}]}),
                    prompt,
                ),
                13 => call(
                    "remember",
                    json!({"fact": format!("batch {} uses compute_N helpers", turn / 25)}),
                    prompt,
                ),
                _ => call(
                    "read_file",
                    json!({"path": format!("f{}.rs", turn % FILES)}),
                    prompt,
                ),
            }
        }))
    };
    let store = Arc::new(SqliteStore::for_workspace(ws.path()).await.unwrap());
    let engine = Engine::new(EngineParts {
        store: store.clone(),
        provider: provider.clone(),
        tools: Arc::new(ToolRegistry::standard()),
        retry: RetryPolicy {
            max_attempts: 1,
            max_total_wait: Duration::from_secs(1),
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(1),
        },
        secrets: vec![],
        secret_env_vars: vec![],
        exec: baton_tools::ExecEnv::unconfined(),
        observer: Arc::new(Quiet),
        stop: baton_engine::StopSignal::never(),
        model_call_timeout: Duration::from_secs(60),
        breaker_failures: 100,
        prices: Arc::new(baton_model::pricing::PriceTable::defaults()),
        rate_limiter: baton_model::ratelimit::RateLimiter::unlimited(),
        extensions: baton_engine::Extensions::default(),
    });
    let profile = baton_context::profile::profile_for(profile_model);
    let mut context = profile.context;
    context.window_tokens = WINDOW;
    let settings = RunSettings {
        tasks: Default::default(),
        model: ModelSettings {
            provider: ProviderKind::OpenAiCompatible,
            base_url: "http://127.0.0.1:9/v1".into(),
            model: "gpt-4o".into(),
            response_mode: ResponseMode::Whole,
            tool_choice: Default::default(),
            reasoning: Default::default(),
            wire_api: Default::default(),
        },
        limits: Limits {
            max_turns: turns as u32 + 50,
            shell_timeout_secs: 10,
        },
        context,
        budget: Default::default(),
        // The scripted agent cycles through 20 files on purpose; the loop detector would (rightly)
        // stop it.
        loop_detection: baton_core::governance::LoopPolicy {
            repeats: 10_000,
            alternations: 10_000,
            stalled_turns: 10_000,
            ..Default::default()
        },
        endings: Default::default(),
    };
    let settings_masking = settings.context.masking;
    let started = Instant::now();
    let outcome = engine
        .start(StartRun {
            plan: None,
            goal:
                "Refactor every compute_N call site to the new helper API and keep the tests green."
                    .into(),
            workspace: ws.path().into(),
            settings,
        })
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    let journal = store.load_events(outcome.run_id()).await.unwrap();

    let requests = provider.requests.lock().unwrap().clone();
    let sizes: Vec<u64> = requests
        .iter()
        .map(|r| counter.count(Encoding::O200k, r))
        .collect();
    let sent: u64 = sizes.iter().sum();
    let peak = sizes.iter().max().copied().unwrap_or(0);
    let naive = naive_total(&journal, &counter);
    let compactions = journal
        .iter()
        .filter(|e| matches!(e.event, Event::CompactionFinished { .. }))
        .count();
    // Stability of each request against the one before, skipping the first request after a
    // compaction (its predecessor is the pre-compaction prompt by design).
    let mut stabilities = vec![];
    let mut after_compaction = true;
    for record in &journal {
        match &record.event {
            Event::CompactionFinished { .. } => after_compaction = true,
            Event::ModelCallStarted {
                context: Some(c), ..
            } => {
                if !after_compaction && let Some(s) = c.prefix_stability {
                    stabilities.push(s);
                }
                after_compaction = false;
            }
            _ => {}
        }
    }
    let mean_stability = stabilities.iter().sum::<f64>() / stabilities.len().max(1) as f64;
    let model_calls = sizes.len() - requests.iter().filter(|r| is_summary_request(r)).count();

    println!(
        "context benchmark, profile `{}` ({:?}): {turns} turns, ~2 KB tool output per turn, window {WINDOW} tokens",
        profile.name, settings_masking
    );
    println!("  model calls                {model_calls} (+{compactions} summary calls)");
    println!("  prompt tokens sent         {sent}");
    println!("  naive full-history tokens  {naive}");
    println!(
        "  ratio                      {:.1}%  (target <= 35%)",
        100.0 * sent as f64 / naive as f64
    );
    println!(
        "  peak prompt                {peak} tokens ({:.0}% of the window)",
        100.0 * peak as f64 / WINDOW as f64
    );
    println!("  compactions                {compactions}");
    println!(
        "  mean prefix stability      {:.1}%  between compactions (target >= 90%)",
        100.0 * mean_stability
    );
    println!(
        "  wall time                  {:.1} s",
        elapsed.as_secs_f64()
    );
}

/// Tokens a full-history agent would send: replay the journal without compaction or masking
/// and count each model request.
fn naive_total(journal: &[EventRecord], counter: &TokenCounter) -> u64 {
    let mut state = RunState::default();
    let mut total = 0;
    for record in journal {
        let event = match &record.event {
            Event::CompactionStarted { .. }
            | Event::CompactionFailed { .. }
            | Event::CompactionFinished { .. } => continue,
            Event::RunStarted { .. } => {
                let mut record = record.clone();
                if let Event::RunStarted { settings, .. } = &mut record.event {
                    settings.context.masking = Masking::Off;
                }
                record
            }
            _ => record.clone(),
        };
        if matches!(event.event, Event::ModelCallStarted { .. }) {
            total += counter.count(Encoding::O200k, &assemble(&state).unwrap());
        }
        let mut event = event;
        event.seq = state.next_seq;
        state.apply(&event).unwrap();
    }
    total
}

struct Quiet;

impl baton_engine::RunObserver for Quiet {
    fn on_event(&self, _record: &EventRecord, _state: &RunState) {}
}

fn summary() -> String {
    "## Goal\nRefactor every compute_N call site to the new helper API.\n\
     ## Done so far\nRead the files f0.rs to f19.rs; the call sites follow one pattern.\n\
     ## Decisions and why\nKeep one helper per batch: smaller diffs.\n\
     ## Approaches that failed and why\nNone yet.\n## Errors seen\nNone.\n\
     ## Constraints and user preferences\nKeep the tests green.\n## Open problems\nNone.\n\
     ## Next step\nContinue with the next file.\n## Key files\nf0.rs … f19.rs\n"
        .repeat(2)
}
