#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The engine's extension point in real runs: the MCP servers' start results given in
//! `Extensions` are journaled right after `run_started` (every started one, then every failed
//! one), and the side usage is settled — with the run's end wait — and journaled before the
//! event that ends the run, by the engine (the journal waits for nothing).

#[allow(dead_code)]
mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use baton_core::*;
use baton_engine::{Extensions, McpOutcome, McpStart, RunOutcome, SideUsage, StartRun};
use serde_json::json;
use support::backend::{Backend, on_both_backends};
use support::fn_provider::{FnProvider, call};
use support::run::{engine_with, settings};

on_both_backends!(
    mcp_start_results_are_journaled_after_the_start,
    side_usage_is_settled_and_journaled_before_the_end,
);

/// A side service whose background work spends one embedding call while the run's end waits.
#[derive(Default)]
struct Embedder {
    settled: Mutex<Vec<Duration>>,
    pending: Mutex<Vec<Event>>,
}

#[async_trait]
impl SideUsage for Embedder {
    fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.pending.lock().unwrap())
    }

    async fn settle(&self, within: Duration) {
        self.settled.lock().unwrap().push(within);
        self.pending.lock().unwrap().push(Event::EmbeddingsUsed {
            model: "test/embedder".into(),
            calls: 1,
            inputs: 3,
            input_tokens: 30,
            cost_usd: None,
        });
    }
}

async fn start(backend: Backend, extensions: Extensions) -> (RunOutcome, Vec<EventRecord>) {
    let ws = tempfile::tempdir().unwrap();
    let (store, _schema) = backend.store(ws.path()).await;
    let provider = FnProvider::new(|_, _| call("finish", json!({"summary": "done"}), 10));
    let (engine, observer) = engine_with(
        store,
        Arc::new(provider),
        baton_tools::ToolRegistry::standard(),
        extensions,
    );
    let outcome = engine
        .start(StartRun {
            plan: None,
            goal: "nothing to do".into(),
            workspace: ws.path().into(),
            settings: settings(ContextSettings::default()),
        })
        .await
        .unwrap();
    (outcome, observer.events())
}

fn kinds(events: &[EventRecord]) -> Vec<&'static str> {
    events.iter().map(|r| r.event.kind()).collect()
}

async fn mcp_start_results_are_journaled_after_the_start(backend: Backend) {
    let servers = vec![
        McpStart {
            server: "broken".into(),
            outcome: McpOutcome::Failed {
                error: "exited with status 1".into(),
            },
        },
        McpStart {
            server: "docs".into(),
            outcome: McpOutcome::Started {
                version: "1.2.0".into(),
                tools: vec!["mcp__docs__lookup".into()],
            },
        },
    ];
    let extensions = Extensions {
        mcp_servers: servers,
        ..Extensions::default()
    };
    let (outcome, events) = start(backend, extensions).await;
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    assert_eq!(
        kinds(&events)[..3],
        ["run_started", "mcp_server_started", "mcp_server_failed"]
    );
    assert!(matches!(
        &events[1].event,
        Event::McpServerStarted { server, version, tools }
            if server == "docs" && version == "1.2.0" && tools == &["mcp__docs__lookup"]
    ));
    assert!(matches!(
        &events[2].event,
        Event::McpServerFailed { server, error }
            if server == "broken" && error == "exited with status 1"
    ));
}

async fn side_usage_is_settled_and_journaled_before_the_end(backend: Backend) {
    let embedder = Arc::new(Embedder::default());
    let extensions = Extensions {
        side_usage: Some(embedder.clone()),
        ..Extensions::default()
    };
    let (outcome, events) = start(backend, extensions).await;
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    // Settled once, with the run's end wait (a run that ends on its own is not in a hurry).
    assert_eq!(*embedder.settled.lock().unwrap(), [Duration::from_secs(10)]);
    let kinds = kinds(&events);
    let used = kinds.iter().position(|k| *k == "embeddings_used").unwrap();
    let finished = kinds.iter().position(|k| *k == "run_finished").unwrap();
    assert_eq!(used + 1, finished, "{kinds:?}");
}
