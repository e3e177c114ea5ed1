//! Test support (feature `test-support`): journals written straight through the [`Store`] API
//! (not through the engine: the summary must show any journal, including ones the reducer
//! would refuse), for the API tests, the dashboard's browser test and the benchmark.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use baton_core::task::{PlanSource, TaskSpec};
use baton_core::*;
use baton_store::{Holder, Lease, NewRun, Store};

/// Settings of a scripted run on `model`.
pub fn settings(model: &str) -> RunSettings {
    RunSettings {
        tasks: Default::default(),
        model: ModelSettings {
            provider: ProviderKind::OpenAiCompatible,
            base_url: "http://127.0.0.1:9/v1".into(),
            model: model.into(),
            response_mode: ResponseMode::Whole,
            tool_choice: Default::default(),
            reasoning: Default::default(),
            wire_api: Default::default(),
        },
        limits: Limits {
            max_turns: 50,
            shell_timeout_secs: 10,
        },
        context: Default::default(),
        budget: Default::default(),
        loop_detection: Default::default(),
        endings: Default::default(),
    }
}

/// Appends events to one run under its lease, one second apart from a fixed start.
pub struct JournalWriter {
    pub store: Arc<dyn Store>,
    pub lease: Lease,
    pub run_id: RunId,
    pub next_seq: u64,
    start: jiff::Timestamp,
}

impl JournalWriter {
    /// Creates the run and journals `run_started`.
    pub async fn start(store: Arc<dyn Store>, goal: &str, model: &str) -> JournalWriter {
        let run_id = RunId::new();
        let lease = store
            .create_run(
                &NewRun {
                    id: run_id.clone(),
                    goal: goal.into(),
                    workspace: "/tmp/scripted".into(),
                },
                &Holder::this_process(),
            )
            .await
            .unwrap();
        let mut writer = JournalWriter {
            store,
            lease,
            run_id,
            next_seq: 0,
            start: jiff::Timestamp::now(),
        };
        writer
            .push(Event::RunStarted {
                goal: goal.into(),
                workspace: "/tmp/scripted".into(),
                settings: settings(model),
                system_prompt: "You are a coding agent.".into(),
                project_instructions: None,
                tools: vec![],
            })
            .await;
        writer
    }

    fn record(&self, seq: u64, event: Event) -> EventRecord {
        EventRecord {
            run_id: self.run_id.clone(),
            seq,
            at: self
                .start
                .checked_add(jiff::SignedDuration::from_millis(seq as i64 * 1000))
                .unwrap(),
            event,
        }
    }

    pub async fn push(&mut self, event: Event) {
        self.push_all(vec![event]).await;
    }

    /// Appends several events in one durable batch.
    pub async fn push_all(&mut self, events: Vec<Event>) {
        let records: Vec<EventRecord> = events
            .into_iter()
            .enumerate()
            .map(|(i, e)| self.record(self.next_seq + i as u64, e))
            .collect();
        self.store.append(&self.lease, &records).await.unwrap();
        self.next_seq += records.len() as u64;
    }

    /// One turn: a model call with this usage and cost asking for one `shell` call, and the
    /// call's result.
    pub async fn turn(&mut self, turn: u32, usage: Usage, cost_usd: Option<f64>, tool_ms: u64) {
        let call_id = format!("call-{turn}");
        let call = ToolCall {
            id: call_id.clone(),
            name: "shell".into(),
            arguments: format!("{{\"command\":\"make step{turn}\"}}"),
        };
        self.push_all(vec![
            Event::TurnStarted { turn },
            Event::ModelCallStarted {
                turn,
                call: turn,
                attempt: 1,
                request_sha256: "0".repeat(64),
                context: None,
            },
            Event::ModelCallFinished {
                turn,
                call: turn,
                message: AssistantMessage {
                    content: Some(format!("step {turn}")),
                    tool_calls: vec![call.clone()],
                    ..Default::default()
                },
                usage: Some(usage),
                cost_usd,
                finish_reason: Some("tool_calls".into()),
                served_model: None,
                duration_ms: 1200,
            },
            Event::ToolCallStarted {
                turn,
                call_id: call_id.clone(),
                name: call.name,
                arguments: call.arguments,
                effect: ToolEffect::Mutating,
            },
            Event::ToolCallFinished {
                turn,
                call_id,
                result: ToolResult {
                    outcome: ToolOutcome::Success,
                    content: "ok".into(),
                    exit_code: Some(0),
                },
                duration_ms: tool_ms,
            },
            Event::TurnFinished { turn },
        ])
        .await;
    }

    pub async fn release(&self) {
        self.store.release(&self.lease).await.unwrap();
    }
}

/// Titles and final states of the tasks [`finished_task_run`] writes.
pub const TASKS: &[(&str, &str, &str)] = &[
    ("setup", "Set up the parser crate", "verified"),
    ("parse", "Parse nested expressions", "verified"),
    ("docs", "Document the grammar", "failed"),
    ("release", "Tag a release", "skipped"),
];

/// What [`finished_task_run`] leaves: its id and the totals its journal adds up to.
pub struct TaskRun {
    pub run_id: RunId,
    pub input_tokens: u64,
    pub cached_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    pub events: u64,
}

/// A finished run with a task graph (two tasks verified, one failed, one skipped), three
/// priced model calls on `gpt-4o` and one failed (rate-limited) attempt.
pub async fn finished_task_run(store: Arc<dyn Store>, goal: &str) -> TaskRun {
    let mut w = JournalWriter::start(store, goal, "gpt-4o").await;
    let spec = |i: usize, deps: &[&str]| TaskSpec {
        id: TASKS[i].0.into(),
        title: TASKS[i].1.into(),
        instructions: format!("do {}", TASKS[i].0),
        deps: deps.iter().map(|d| d.to_string()).collect(),
        check: format!("make check-{}", TASKS[i].0),
        risky: false,
    };
    w.push(Event::PlanSet {
        source: PlanSource::User,
        tasks: vec![
            spec(0, &[]),
            spec(1, &["setup"]),
            spec(2, &["setup"]),
            spec(3, &["parse", "docs"]),
        ],
        final_check: Some("make test".into()),
    })
    .await;
    let usage = |i: u64| Usage {
        prompt_tokens: 1000 * i,
        completion_tokens: 100 * i,
        cached_prompt_tokens: Some(500 * i),
        ..Default::default()
    };
    let costs = [0.0125, 0.025, 0.0375];
    let task_started = |task: &str, attempt| Event::TaskStarted {
        task: task.into(),
        approach: 1,
        attempt,
    };
    let check = |task: &str, passed: bool| {
        vec![
            Event::CheckStarted {
                task: Some(task.into()),
                attempt: 1,
                command: format!("make check-{task}"),
            },
            Event::CheckFinished {
                task: Some(task.into()),
                attempt: 1,
                passed,
                exit_code: Some(if passed { 0 } else { 2 }),
                output: String::new(),
                duration_ms: 300,
            },
        ]
    };
    w.push(task_started("setup", 1)).await;
    w.turn(1, usage(1), Some(costs[0]), 150).await;
    w.push_all(check("setup", true)).await;
    w.push(Event::TaskFinished {
        task: "setup".into(),
        summary: "crate set up".into(),
    })
    .await;
    w.push(task_started("parse", 1)).await;
    w.push_all(vec![
        Event::TurnStarted { turn: 2 },
        Event::ModelCallStarted {
            turn: 2,
            call: 2,
            attempt: 1,
            request_sha256: "0".repeat(64),
            context: None,
        },
        Event::ModelCallFailed {
            turn: 2,
            call: 2,
            attempt: 1,
            class: ErrorClass::RateLimited,
            message: "429 slow down".into(),
            retry_in_ms: Some(10),
        },
    ])
    .await;
    // The rest of turn 2 (the retried call) as JournalWriter::turn writes it, minus its start.
    let call = ToolCall {
        id: "call-2".into(),
        name: "edit_file".into(),
        arguments: "{}".into(),
    };
    w.push_all(vec![
        Event::ModelCallStarted {
            turn: 2,
            call: 2,
            attempt: 2,
            request_sha256: "0".repeat(64),
            context: None,
        },
        Event::ModelCallFinished {
            turn: 2,
            call: 2,
            message: AssistantMessage {
                content: None,
                tool_calls: vec![call.clone()],
                ..Default::default()
            },
            usage: Some(usage(2)),
            cost_usd: Some(costs[1]),
            finish_reason: None,
            served_model: None,
            duration_ms: 2600,
        },
        Event::ToolCallStarted {
            turn: 2,
            call_id: call.id.clone(),
            name: call.name,
            arguments: call.arguments,
            effect: ToolEffect::Mutating,
        },
        Event::ToolCallFinished {
            turn: 2,
            call_id: call.id,
            result: ToolResult {
                outcome: ToolOutcome::Success,
                content: "edited".into(),
                exit_code: None,
            },
            duration_ms: 20,
        },
        Event::TurnFinished { turn: 2 },
    ])
    .await;
    w.push_all(check("parse", true)).await;
    w.push(Event::TaskFinished {
        task: "parse".into(),
        summary: "nested expressions parse".into(),
    })
    .await;
    w.push(task_started("docs", 1)).await;
    w.turn(3, usage(3), Some(costs[2]), 4000).await;
    w.push_all(check("docs", false)).await;
    w.push_all(vec![
        Event::TaskFailed {
            task: "docs".into(),
            reason: "the grammar check kept failing".into(),
        },
        Event::TaskSkipped {
            task: "release".into(),
            reason: "depends on docs, which failed".into(),
        },
        Event::RunFinished {
            summary: "parser done; docs need a person".into(),
            finished_by: None,
        },
    ])
    .await;
    w.release().await;
    TaskRun {
        run_id: w.run_id.clone(),
        input_tokens: 6000,
        cached_tokens: 3000,
        output_tokens: 600,
        cost_usd: costs.iter().sum(),
        events: w.next_seq,
    }
}
