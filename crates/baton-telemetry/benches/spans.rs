//! What tracing costs a run per journaled event, on the journal's own path (the observer runs
//! inside `Journal::record`): folding events into spans, and that plus converting the ended
//! spans into OpenTelemetry `SpanData` (what the observer queues). Printed as plain numbers.
//!
//! Run with `cargo bench -p baton-telemetry --bench spans`. Without `--bench` (as under
//! `cargo test --all-targets`) it does a tiny smoke run that only checks that everything works.

use std::time::Instant;

use baton_core::{
    AssistantMessage, Event, EventRecord, Limits, ModelSettings, ProviderKind, ResponseMode, RunId,
    RunSettings, ToolEffect, ToolResult, Usage,
};
use baton_telemetry::span_data;
use baton_telemetry::spans::{SpanBuilder, trace_id};
use opentelemetry::InstrumentationScope;
use opentelemetry::trace::TraceId;

fn journal(run: &RunId, turns: u32) -> Vec<EventRecord> {
    let settings = RunSettings {
        tasks: Default::default(),
        model: ModelSettings {
            provider: ProviderKind::OpenAiCompatible,
            base_url: "http://127.0.0.1:8080/v1".into(),
            model: "bench-model".into(),
            response_mode: ResponseMode::default(),
            tool_choice: Default::default(),
            reasoning: Default::default(),
            wire_api: Default::default(),
        },
        limits: Limits::default(),
        budget: Default::default(),
        loop_detection: Default::default(),
        endings: Default::default(),
        context: Default::default(),
    };
    let mut events = vec![Event::RunStarted {
        goal: "bench".into(),
        workspace: "/w".into(),
        settings,
        system_prompt: String::new(),
        project_instructions: None,
        tools: Vec::new(),
    }];
    for turn in 1..=turns {
        let id = format!("call-{turn}");
        events.extend([
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
                message: AssistantMessage::default(),
                usage: Some(Usage {
                    prompt_tokens: 1000,
                    completion_tokens: 50,
                    ..Usage::default()
                }),
                cost_usd: Some(0.01),
                finish_reason: Some("tool_calls".into()),
                served_model: Some("bench-model".into()),
                duration_ms: 100,
            },
            Event::ToolCallStarted {
                turn,
                call_id: id.clone(),
                name: "read_file".into(),
                arguments: "{}".into(),
                effect: ToolEffect::ReadOnly,
            },
            Event::ToolCallFinished {
                turn,
                call_id: id,
                result: ToolResult::success("x"),
                duration_ms: 1,
            },
            Event::TurnFinished { turn },
        ]);
    }
    events.push(Event::RunFinished {
        summary: "done".into(),
        finished_by: None,
    });
    let start = jiff::Timestamp::now();
    events
        .into_iter()
        .enumerate()
        .map(|(i, event)| EventRecord {
            run_id: run.clone(),
            seq: i as u64,
            at: start + jiff::SignedDuration::from_millis(i as i64),
            event,
        })
        .collect()
}

fn main() {
    let full = std::env::args().any(|arg| arg == "--bench");
    let (turns, rounds) = if full { (10_000, 7) } else { (10, 1) };
    if !full {
        println!("smoke run (pass --bench, as `cargo bench` does, for real numbers)");
    }
    let run = RunId::from_string("bench-run");
    let events = journal(&run, turns);
    let scope = InstrumentationScope::builder("baton").build();
    let trace = TraceId::from_bytes(trace_id(&run));

    let mut fold = Vec::new();
    let mut convert = Vec::new();
    let mut spans = 0;
    for _ in 0..rounds {
        let started = Instant::now();
        let mut builder = SpanBuilder::new(run.clone());
        let mut ended = Vec::new();
        for record in &events {
            ended.extend(builder.push(record));
        }
        fold.push(started.elapsed());
        spans = ended.len();

        let started = Instant::now();
        let mut builder = SpanBuilder::new(run.clone());
        let mut data = Vec::new();
        for record in &events {
            for span in builder.push(record) {
                data.push(span_data(span, trace, &scope));
            }
        }
        convert.push(started.elapsed());
        assert_eq!(data.len(), spans);
    }
    fold.sort();
    convert.sort();
    let per_event = |d: std::time::Duration| d.as_nanos() as f64 / events.len() as f64;
    println!(
        "{} events ({turns} turns) -> {spans} spans; median of {rounds}:",
        events.len()
    );
    println!(
        "  fold into spans:            {:>8.0} ns/event",
        per_event(fold[rounds / 2])
    );
    println!(
        "  fold + convert to SpanData: {:>8.0} ns/event",
        per_event(convert[rounds / 2])
    );
}
