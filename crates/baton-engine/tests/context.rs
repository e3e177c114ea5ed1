#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The context layer inside real runs: compaction keeps the agent oriented, masked outputs come
//! back exactly through `recall`, an overflow error compacts instead of failing, and every
//! journaled request can be rebuilt byte for byte from the journal.

#[allow(dead_code)]
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use baton_context::tokens::calibrate;
use baton_context::{assemble, request_digest};
use baton_core::*;
use baton_engine::RunOutcome;
use baton_model::ModelError;
use serde_json::json;
use support::backend::{Backend, on_both_backends};
use support::fn_provider::{FnProvider, call, is_summary_request, prompt_text, text};
use support::run::{Ran, run};

on_both_backends!(
    after_compaction_the_prompt_keeps_goal_plan_facts_and_next_step,
    every_journaled_request_is_rebuilt_byte_for_byte_by_replay,
    recall_returns_a_masked_output_exactly,
    recall_names_what_is_wrong_with_a_bad_handle,
    a_context_overflow_error_compacts_and_the_call_succeeds,
    an_overflow_compaction_cannot_fix_pauses_instead_of_looping,
    a_summary_request_that_overflows_leaves_out_the_oldest_history,
    requests_carry_context_metrics_and_the_prefix_stays_stable,
    search_memory_finds_history_by_handle_and_files_by_lines,
);

/// About 3 KB of ordinary, varied text: a realistic tool output.
fn write_big_file(dir: &std::path::Path) {
    let text: String = (0..60)
        .map(|i| {
            format!(
                "line {i}: module_{i} computes value {} from parse_input\n",
                i * 7
            )
        })
        .collect();
    std::fs::write(dir.join("big.txt"), text).unwrap();
}

const SUMMARY: &str = "## Goal\nFix the parser.\n## Done so far\nRead big.txt several times.\n\
## Next step\nRun the parser tests in tests/parser.rs.\n## Key files\nsrc/parser.rs";

fn unmasked(window_tokens: u64) -> ContextSettings {
    ContextSettings {
        window_tokens,
        compact_at_percent: 80,
        masking: Masking::Off,
        compaction: Compaction::Summarize {
            keep_recent_turns: 1,
        },
    }
}

fn kinds(events: &[EventRecord]) -> Vec<&'static str> {
    events.iter().map(|e| e.event.kind()).collect()
}

async fn after_compaction_the_prompt_keeps_goal_plan_facts_and_next_step(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    write_big_file(ws.path());
    let steps = Arc::new(AtomicUsize::new(0));
    let after: Arc<Mutex<Option<ModelRequest>>> = Arc::default();
    let provider = {
        let (steps, after) = (steps.clone(), after.clone());
        Arc::new(FnProvider::new(move |request, _| {
            if is_summary_request(request) {
                return text(SUMMARY, 3000);
            }
            let k = steps.fetch_add(1, Ordering::SeqCst);
            if prompt_text(request).contains("Handoff summary") {
                *after.lock().unwrap() = Some(request.clone());
                return call("finish", json!({"summary": "done"}), 900);
            }
            match k {
                0 => call(
                    "update_plan",
                    json!({"items": [{"step": "read the parser", "status": "in_progress"},
                                     {"step": "make tests/parser.rs pass", "status": "pending"}]}),
                    900,
                ),
                1 => call(
                    "remember",
                    json!({"fact": "The parser lives in src/parser.rs and uses tabs."}),
                    950,
                ),
                40.. => call("finish", json!({"summary": "gave up"}), 900),
                _ => call(
                    "shell",
                    json!({"command": "cat big.txt"}),
                    1000 + 700 * k as u64,
                ),
            }
        }))
    };
    let Ran {
        outcome, events, ..
    } = run(backend, ws.path(), unmasked(6_000), provider).await;
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    let request = after
        .lock()
        .unwrap()
        .clone()
        .expect("a request after compaction");
    let prompt = prompt_text(&request);
    assert!(
        prompt.contains("Fix the parser so that tests/parser.rs passes"),
        "goal"
    );
    assert!(prompt.contains("1. [in_progress] read the parser"), "plan");
    assert!(
        prompt.contains("2. [pending] make tests/parser.rs pass"),
        "plan"
    );
    assert!(
        prompt.contains("1. The parser lives in src/parser.rs and uses tabs."),
        "fact"
    );
    assert!(
        prompt.contains("Run the parser tests in tests/parser.rs."),
        "next step"
    );
    // The working memory comes last, the goal right after the system prompt.
    let Message::User { content } = request.messages.last().unwrap() else {
        panic!("the working memory is the last message");
    };
    assert!(content.starts_with("Working memory"), "{content}");
    assert!(matches!(&request.messages[1], Message::User { content } if content.contains("Goal:")));

    let started: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::CompactionStarted { trigger, .. } => Some(*trigger),
            _ => None,
        })
        .collect();
    assert!(!started.is_empty(), "{:?}", kinds(&events));
    assert!(started.iter().all(|t| *t == CompactionTrigger::Threshold));
    // Every request was sent under the window's threshold after compacting.
    for event in &events {
        if let Event::ModelCallStarted {
            context: Some(c), ..
        } = &event.event
        {
            assert!(c.estimated_prompt_tokens <= 6_000, "{c:?}");
        }
    }
}

async fn every_journaled_request_is_rebuilt_byte_for_byte_by_replay(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    write_big_file(ws.path());
    let provider = Arc::new(FnProvider::new(|request, n| {
        if is_summary_request(request) {
            return text(SUMMARY, 2000);
        }
        match n {
            0 => call(
                "update_plan",
                json!({"items": [{"step": "s", "status": "pending"}]}),
                900,
            ),
            1 => call("remember", json!({"fact": "f"}), 900),
            25.. => call("finish", json!({"summary": "done"}), 900),
            _ => call(
                "shell",
                json!({"command": "cat big.txt"}),
                900 + 600 * n as u64,
            ),
        }
    }));
    let context = ContextSettings {
        window_tokens: 6_000,
        compact_at_percent: 80,
        masking: Masking::OlderThan {
            keep_turns: 1,
            batch_turns: 2,
            min_bytes: 100,
        },
        compaction: Compaction::Summarize {
            keep_recent_turns: 2,
        },
    };
    let Ran {
        outcome,
        store,
        _schema,
        ..
    } = run(backend, ws.path(), context, provider.clone()).await;
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    let run_id = outcome.run_id().clone();
    let journal = store.load_events(&run_id).await.unwrap();
    assert!(
        journal
            .iter()
            .any(|e| matches!(e.event, Event::CompactionFinished { .. }))
    );
    let sent: Vec<ModelRequest> = provider
        .requests
        .lock()
        .unwrap()
        .iter()
        .filter(|r| !is_summary_request(r))
        .cloned()
        .collect();
    let mut checked = 0;
    for (i, record) in journal.iter().enumerate() {
        if let Event::ModelCallStarted {
            request_sha256,
            context,
            ..
        } = &record.event
        {
            // Replaying the journal up to the call rebuilds exactly the request that was sent.
            let state = replay(&journal[..i]).unwrap();
            let rebuilt = assemble(&state).unwrap();
            assert_eq!(&request_digest(&rebuilt), request_sha256);
            assert_eq!(rebuilt, sent[checked]);
            assert!(context.is_some());
            checked += 1;
        }
    }
    assert_eq!(checked, sent.len());
    // Masking happened too: some request shows a placeholder.
    assert!(
        sent.iter()
            .any(|r| prompt_text(r).contains("output elided"))
    );
}

async fn recall_returns_a_masked_output_exactly(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    // Unicode, tabs, trailing spaces, blank lines, no final newline.
    let original: String = (0..300)
        .map(|i| {
            format!(
                "{i}\tzeile Ünïcödé → {}  \n{}",
                "x".repeat(i % 7),
                if i % 50 == 0 { "\n" } else { "" }
            )
        })
        .collect::<String>()
        + "last line without newline";
    std::fs::write(ws.path().join("weird.txt"), &original).unwrap();
    let seen_placeholder: Arc<Mutex<Option<String>>> = Arc::default();
    let provider = {
        let seen = seen_placeholder.clone();
        Arc::new(FnProvider::new(move |request, n| match n {
            0 => call("shell", json!({"command": "cat weird.txt"}), 900),
            1 | 2 => call("list_dir", json!({"path": "."}), 900),
            3 => {
                // Find the placeholder the way a model would: in the prompt text.
                let prompt = prompt_text(request);
                let start = prompt.find("[shell#").expect("the cat output is masked");
                let handle = prompt[start + 1..].split(' ').next().unwrap().to_string();
                *seen.lock().unwrap() = Some(prompt[start..].lines().next().unwrap().to_string());
                call("recall", json!({ "handle": handle }), 900)
            }
            _ => call("finish", json!({"summary": "done"}), 900),
        }))
    };
    let context = ContextSettings {
        window_tokens: 100_000,
        compact_at_percent: 80,
        masking: Masking::OlderThan {
            keep_turns: 1,
            batch_turns: 1,
            min_bytes: 100,
        },
        compaction: Compaction::Off,
    };
    let Ran {
        outcome, events, ..
    } = run(backend, ws.path(), context, provider).await;
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    let results: Vec<(u64, &ToolResult)> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallFinished { result, .. } => Some((e.seq, result)),
            _ => None,
        })
        .collect();
    let (cat_seq, cat) = results[0];
    assert!(cat.content.contains("last line without newline"));
    let placeholder = seen_placeholder.lock().unwrap().clone().unwrap();
    let lines = cat.content.lines().count();
    assert!(
        placeholder.starts_with(&format!("[shell#{cat_seq} output elided: {lines} lines")),
        "{placeholder}"
    );
    let recalled = &results[3].1;
    assert_eq!(
        recalled.outcome,
        ToolOutcome::Success,
        "{}",
        recalled.content
    );
    let header = format!("shell#{cat_seq} ({lines} lines, exact):\n");
    assert_eq!(recalled.content, format!("{header}{}", cat.content));
}

async fn recall_names_what_is_wrong_with_a_bad_handle(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let provider = Arc::new(FnProvider::new(|_, n| match n {
        0 => call("list_dir", json!({"path": "."}), 900),
        1 => call("recall", json!({"handle": "nonsense"}), 900),
        2 => call("recall", json!({"handle": "shell#9999"}), 900),
        // Event 0 is run_started: no recallable content.
        3 => call("recall", json!({"handle": "shell#0"}), 900),
        // The list_dir output, asked for under the wrong tool name.
        4 => call("recall", json!({"handle": "shell#5"}), 900),
        _ => call("finish", json!({"summary": "done"}), 900),
    }));
    let Ran {
        outcome, events, ..
    } = run(backend, ws.path(), ContextSettings::default(), provider).await;
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    let errors: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallFinished { result, .. } if result.outcome == ToolOutcome::Error => {
                Some(result.content.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 4, "{errors:?}");
    assert!(errors[0].contains("not a handle"), "{}", errors[0]);
    assert!(errors[1].contains("no journal event 9999"), "{}", errors[1]);
    assert!(errors[2].contains("no recallable content"), "{}", errors[2]);
    assert!(errors[3].contains("output of `list_dir`"), "{}", errors[3]);
}

async fn a_context_overflow_error_compacts_and_the_call_succeeds(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    write_big_file(ws.path());
    let provider = Arc::new(FnProvider::new(|request, n| {
        if is_summary_request(request) {
            return text(SUMMARY, 2000);
        }
        if prompt_text(request).contains("Handoff summary") {
            return call("finish", json!({"summary": "done after compaction"}), 900);
        }
        match n {
            0..=2 => call("shell", json!({"command": "cat big.txt"}), 900),
            _ => Err(ModelError::new(
                ErrorClass::ContextOverflow,
                "This model's maximum context length is 4096 tokens",
            )),
        }
    }));
    // A window far larger than the prompt: only the server's error can trigger compaction.
    let Ran {
        outcome, events, ..
    } = run(backend, ws.path(), unmasked(1_000_000), provider).await;
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    let failed = events
        .iter()
        .position(|e| {
            matches!(
                &e.event,
                Event::ModelCallFailed {
                    class: ErrorClass::ContextOverflow,
                    retry_in_ms: None,
                    ..
                }
            )
        })
        .expect("the overflow is journaled");
    assert!(matches!(
        events[failed + 1].event,
        Event::CompactionStarted {
            trigger: CompactionTrigger::Overflow,
            ..
        }
    ));
    assert!(matches!(
        events[failed + 2].event,
        Event::CompactionFinished { .. }
    ));
    // The same call is sent again as its next attempt.
    let (
        Event::ModelCallFailed { call, attempt, .. },
        Event::ModelCallStarted {
            call: again,
            attempt: next,
            ..
        },
    ) = (&events[failed].event, &events[failed + 3].event)
    else {
        panic!("{:?}", kinds(&events[failed..]));
    };
    assert_eq!((again, *next), (call, attempt + 1));
}

async fn an_overflow_compaction_cannot_fix_pauses_instead_of_looping(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    write_big_file(ws.path());
    let provider = Arc::new(FnProvider::new(|request, n| {
        if is_summary_request(request) {
            return text(SUMMARY, 2000);
        }
        match n {
            0..=3 => call("shell", json!({"command": "cat big.txt"}), 900),
            _ => Err(ModelError::new(
                ErrorClass::ContextOverflow,
                "prompt is too long",
            )),
        }
    }));
    let Ran {
        outcome, events, ..
    } = run(backend, ws.path(), unmasked(1_000_000), provider).await;
    let RunOutcome::Paused { reason, .. } = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(reason, PauseReason::ContextOverflow);
    let compactions = events
        .iter()
        .filter(|e| matches!(e.event, Event::CompactionFinished { .. }))
        .count();
    assert!((1..=2).contains(&compactions), "{compactions}");
}

async fn a_summary_request_that_overflows_leaves_out_the_oldest_history(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    write_big_file(ws.path());
    let summary_requests = Arc::new(AtomicUsize::new(0));
    let provider = {
        let summary_requests = summary_requests.clone();
        Arc::new(FnProvider::new(move |request, n| {
            if is_summary_request(request) {
                return match summary_requests.fetch_add(1, Ordering::SeqCst) {
                    0 | 1 => Err(ModelError::new(ErrorClass::ContextOverflow, "too long")),
                    _ => text(SUMMARY, 2000),
                };
            }
            if prompt_text(request).contains("Handoff summary") {
                return call("finish", json!({"summary": "done"}), 900);
            }
            match n {
                0..=5 => call("shell", json!({"command": "cat big.txt"}), 900),
                _ => Err(ModelError::new(ErrorClass::ContextOverflow, "too long")),
            }
        }))
    };
    let Ran {
        outcome, events, ..
    } = run(backend, ws.path(), unmasked(1_000_000), provider.clone()).await;
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    let left_out = events.iter().find_map(|e| match &e.event {
        Event::CompactionFinished { left_out, .. } => Some(*left_out),
        _ => None,
    });
    assert!(left_out.unwrap() > 0, "{left_out:?}");
    let sizes: Vec<usize> = provider
        .requests
        .lock()
        .unwrap()
        .iter()
        .filter(|r| is_summary_request(r))
        .map(|r| r.messages.len())
        .collect();
    assert_eq!(sizes.len(), 3);
    assert!(sizes[0] > sizes[1] && sizes[1] > sizes[2], "{sizes:?}");
}

async fn requests_carry_context_metrics_and_the_prefix_stays_stable(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    write_big_file(ws.path());
    let provider = Arc::new(FnProvider::new(|_, n| match n {
        0..=5 => call(
            "shell",
            json!({"command": "cat big.txt"}),
            900 + 800 * n as u64,
        ),
        _ => call("finish", json!({"summary": "done"}), 900),
    }));
    let Ran {
        outcome, events, ..
    } = run(backend, ws.path(), unmasked(1_000_000), provider).await;
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    let metrics: Vec<RequestMetrics> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::ModelCallStarted { context, .. } => *context,
            _ => None,
        })
        .collect();
    assert_eq!(metrics.len(), 7);
    assert_eq!(metrics[0].prefix_stability, None);
    for pair in metrics.windows(2) {
        // Append-only between compactions: almost all of each prompt was in the one before.
        let stability = pair[1].prefix_stability.unwrap();
        assert!(stability > 0.7 && stability < 1.0, "{stability}");
        assert!(pair[1].counted_prompt_tokens > pair[0].counted_prompt_tokens);
        assert_eq!(pair[1].window_tokens, 1_000_000);
    }
    // Not an OpenAI model: each estimate is the previous call's reported usage (900 + 800 n)
    // plus the local count of what was appended since.
    for (k, pair) in metrics.windows(2).enumerate() {
        let reported = 900 + 800 * k as u64;
        assert_eq!(
            pair[1].estimated_prompt_tokens,
            calibrate(
                pair[1].counted_prompt_tokens,
                pair[0].counted_prompt_tokens,
                reported
            )
        );
    }
    assert_ne!(
        metrics[3].estimated_prompt_tokens,
        metrics[3].counted_prompt_tokens
    );
}

async fn search_memory_finds_history_by_handle_and_files_by_lines(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("notes.md"),
        "# Notes\nThe quokka config lives here.\n",
    )
    .unwrap();
    let provider = Arc::new(FnProvider::new(|_, n| match n {
        0 => call(
            "shell",
            json!({"command": "echo the zanzibar_flag is set"}),
            900,
        ),
        1 => call("search_memory", json!({"query": "zanzibar_flag"}), 900),
        2 => call(
            "search_memory",
            json!({"query": "quokka config", "scope": "files"}),
            900,
        ),
        3 => call(
            "search_memory",
            json!({"query": "quokka", "scope": "history"}),
            900,
        ),
        4 => call("search_memory", json!({"query": "\"(*"}), 900),
        _ => call("finish", json!({"summary": "done"}), 900),
    }));
    let Ran {
        outcome, events, ..
    } = run(backend, ws.path(), ContextSettings::default(), provider).await;
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    let results: Vec<(u64, &ToolResult)> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallFinished { result, .. } => Some((e.seq, result)),
            _ => None,
        })
        .collect();
    let shell_seq = results[0].0;
    let history = &results[1].1.content;
    assert!(
        history.contains(&format!("shell#{shell_seq} — ")),
        "{history}"
    );
    assert!(history.contains("«zanzibar_flag»"), "{history}");
    let files = &results[2].1.content;
    assert!(files.contains("1. notes.md:1-2 — "), "{files}");
    // A history search finds the earlier calls and results, never the file itself.
    let only_history = &results[3].1.content;
    assert!(only_history.contains("model#"), "{only_history}");
    assert!(
        !only_history.lines().any(|l| l
            .split_once(". ")
            .is_some_and(|(_, rest)| rest.starts_with("notes.md"))),
        "{only_history}"
    );
    // Garbage with no words is the model's error, not a crash.
    let garbage = results[4].1;
    assert_eq!(garbage.outcome, ToolOutcome::Error, "{}", garbage.content);
}
