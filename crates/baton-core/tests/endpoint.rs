#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The reducer's count of calls the current endpoint answered: what decides whether a failure
//! to connect pauses fast (a new endpoint) or waits out the patient retry schedule.

use baton_core::*;

fn settings(base_url: &str) -> RunSettings {
    RunSettings {
        tasks: Default::default(),
        model: ModelSettings {
            provider: ProviderKind::OpenAiCompatible,
            base_url: base_url.into(),
            model: "m".into(),
            response_mode: ResponseMode::Whole,
            tool_choice: Default::default(),
            reasoning: Default::default(),
            wire_api: Default::default(),
        },
        limits: Limits::default(),
        context: Default::default(),
        budget: Default::default(),
        loop_detection: Default::default(),
        endings: Default::default(),
    }
}

struct Run {
    state: RunState,
    seq: u64,
}

impl Run {
    /// A run just started against `base_url`.
    fn started(base_url: &str) -> Run {
        let mut run = Run {
            state: RunState::default(),
            seq: 0,
        };
        run.apply(Event::RunStarted {
            goal: "g".into(),
            workspace: "/w".into(),
            settings: settings(base_url),
            system_prompt: "s".into(),
            project_instructions: None,
            tools: vec![],
        });
        run
    }

    fn apply(&mut self, event: Event) {
        let record = EventRecord {
            run_id: RunId::from_string("r"),
            seq: self.seq,
            at: jiff::Timestamp::from_second(1_700_000_000 + self.seq as i64).unwrap(),
            event,
        };
        self.seq += 1;
        self.state.apply(&record).unwrap();
    }

    fn answered_turn(&mut self, turn: u32) {
        self.apply(Event::TurnStarted { turn });
        self.apply(Event::ModelCallStarted {
            turn,
            call: turn,
            attempt: 1,
            request_sha256: "0".repeat(64),
            context: None,
        });
        self.apply(Event::ModelCallFinished {
            turn,
            call: turn,
            message: AssistantMessage {
                content: Some("working".into()),
                tool_calls: vec![],
                ..Default::default()
            },
            usage: None,
            cost_usd: None,
            finish_reason: None,
            served_model: None,
            duration_ms: 1,
        });
        self.apply(Event::TurnFinished { turn });
    }

    fn pause_and_resume(&mut self, base_url: &str) {
        self.apply(Event::RunPaused {
            reason: PauseReason::MaxTurns,
            detail: "limit".into(),
        });
        self.apply(Event::RunResumed {
            settings: settings(base_url),
        });
    }
}

#[test]
fn a_resume_to_another_endpoint_counts_its_answers_afresh() {
    let mut run = Run::started("http://a/v1");
    assert_eq!(run.state.calls_on_endpoint, 0, "nothing answered yet");
    run.answered_turn(1);
    assert_eq!(run.state.calls_on_endpoint, 1);
    // Same endpoint (a raised limit, say): it has answered before.
    run.pause_and_resume("http://a/v1");
    assert_eq!(run.state.calls_on_endpoint, 1);
    run.answered_turn(2);
    assert_eq!(run.state.calls_on_endpoint, 2);
    // Another base URL: it has never answered this run.
    run.pause_and_resume("http://b/v1");
    assert_eq!(run.state.calls_on_endpoint, 0);
    assert_eq!(run.state.model_calls_finished, 2);
}

/// MCP servers are per process: a failure is kept (the same server's later one replacing it)
/// until the next resume, which starts its own servers; a finished run refuses one.
#[test]
fn mcp_server_failures_last_until_the_next_resume() {
    let mut run = Run::started("http://a/v1");
    let failed = |server: &str, error: &str| Event::McpServerFailed {
        server: server.into(),
        error: error.into(),
    };
    run.apply(failed("docs", "timed out"));
    run.apply(failed("github", "no token"));
    run.apply(failed("docs", "refused"));
    assert_eq!(
        run.state.mcp_failures,
        vec![
            ("github".to_string(), "no token".to_string()),
            ("docs".to_string(), "refused".to_string())
        ]
    );
    run.answered_turn(1);
    run.pause_and_resume("http://a/v1");
    assert!(run.state.mcp_failures.is_empty());
    run.apply(Event::RunFinished {
        summary: "done".into(),
        finished_by: Default::default(),
    });
    let late = EventRecord {
        run_id: RunId::from_string("r"),
        seq: run.seq,
        at: jiff::Timestamp::from_second(1_800_000_000).unwrap(),
        event: failed("docs", "after the end"),
    };
    assert!(run.state.apply(&late).is_err());
}
