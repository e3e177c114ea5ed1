use super::*;
use baton_core::{
    AssistantMessage, ErrorClass, Limits, ModelSettings, PauseReason, ResponseMode, ToolEffect,
    ToolResult,
};

fn settings(model: &str) -> RunSettings {
    RunSettings {
        tasks: Default::default(),
        model: ModelSettings {
            provider: ProviderKind::OpenAiCompatible,
            base_url: "https://user:pw@api.openai.com:8443/v1".into(),
            model: model.into(),
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
    }
}

/// A journal under construction: each event one second after the previous.
struct Journal {
    run: RunId,
    events: Vec<EventRecord>,
}

impl Journal {
    fn new() -> Journal {
        Journal {
            run: RunId::from_string("run-1"),
            events: Vec::new(),
        }
    }

    fn push(&mut self, event: Event) -> &mut Journal {
        let seq = self.events.len() as u64;
        self.events.push(EventRecord {
            run_id: self.run.clone(),
            seq,
            at: Timestamp::from_second(1_800_000_000 + seq as i64).expect("valid time"),
            event,
        });
        self
    }

    fn start(&mut self) -> &mut Journal {
        self.push(Event::RunStarted {
            goal: "fix it".into(),
            workspace: "/w".into(),
            settings: settings("gpt-test"),
            system_prompt: String::new(),
            project_instructions: None,
            tools: Vec::new(),
        })
    }

    fn model_call(&mut self, turn: u32, call: u32, tool: Option<&str>) -> &mut Journal {
        self.push(Event::ModelCallStarted {
            turn,
            call,
            attempt: 1,
            request_sha256: "x".into(),
            context: None,
        })
        .push(Event::ModelCallFinished {
            turn,
            call,
            message: AssistantMessage {
                content: Some("ok".into()),
                tool_calls: Vec::new(),
                ..Default::default()
            },
            usage: Some(Usage {
                prompt_tokens: 100,
                completion_tokens: 7,
                cached_prompt_tokens: Some(40),
                ..Usage::default()
            }),
            cost_usd: Some(0.5),
            finish_reason: Some(if tool.is_some() { "tool_calls" } else { "stop" }.into()),
            served_model: Some("gpt-test-2026".into()),
            duration_ms: 5,
        })
    }

    fn tool(&mut self, turn: u32, id: &str, name: &str) -> &mut Journal {
        self.push(Event::ToolCallStarted {
            turn,
            call_id: id.into(),
            name: name.into(),
            arguments: "{}".into(),
            effect: ToolEffect::ReadOnly,
        })
        .push(Event::ToolCallFinished {
            turn,
            call_id: id.into(),
            result: ToolResult::success("done"),
            duration_ms: 1,
        })
    }

    fn spans(&self) -> Vec<SpanRecord> {
        spans(&self.run, &self.events)
    }
}

fn named<'a>(spans: &'a [SpanRecord], name: &str) -> Vec<&'a SpanRecord> {
    spans.iter().filter(|s| s.name == name).collect()
}

fn one<'a>(spans: &'a [SpanRecord], name: &str) -> &'a SpanRecord {
    let found = named(spans, name);
    assert_eq!(found.len(), 1, "exactly one span {name} in {spans:#?}");
    found[0]
}

#[test]
fn a_finished_run_is_a_tree_of_run_turns_and_calls() {
    let mut j = Journal::new();
    j.start()
        .push(Event::TurnStarted { turn: 1 })
        .model_call(1, 1, Some("read_file"))
        .tool(1, "c1", "read_file")
        .push(Event::TurnFinished { turn: 1 })
        .push(Event::TurnStarted { turn: 2 })
        .model_call(2, 2, None)
        .push(Event::TurnFinished { turn: 2 })
        .push(Event::RunFinished {
            summary: "done".into(),
            finished_by: None,
        });
    let spans = j.spans();
    assert_eq!(spans.len(), 6, "{spans:#?}");
    let run = one(&spans, "invoke_agent baton");
    assert_eq!(run.parent, None);
    assert_eq!(run.span_id, span_id(&j.run, 0));
    assert_eq!(run.status, Status::Ok);
    assert_eq!(run.start, j.events[0].at);
    assert_eq!(run.end, j.events.last().expect("events").at);
    assert_eq!(
        run.attr("gen_ai.usage.input_tokens"),
        Some(&Value::Int(200))
    );
    assert_eq!(
        run.attr("gen_ai.usage.output_tokens"),
        Some(&Value::Int(14))
    );
    assert_eq!(run.attr("baton.cost_usd"), Some(&Value::F64(1.0)));
    assert_eq!(run.attr("baton.exit_code"), Some(&Value::Int(0)));
    assert_eq!(run.attr("baton.run.id"), Some(&Value::Str("run-1".into())));

    let turn1 = one(&spans, "turn 1");
    let turn2 = one(&spans, "turn 2");
    for turn in [turn1, turn2] {
        assert_eq!(turn.parent, Some(run.span_id));
    }
    let chats = named(&spans, "chat gpt-test");
    assert_eq!(chats.len(), 2);
    assert_eq!(chats[0].parent, Some(turn1.span_id));
    assert_eq!(chats[1].parent, Some(turn2.span_id));
    let chat = chats[0];
    assert_eq!(chat.kind, Kind::Client);
    assert_eq!(chat.attr("gen_ai.operation.name"), Some(&"chat".into()));
    assert_eq!(chat.attr("gen_ai.provider.name"), Some(&"openai".into()));
    assert_eq!(chat.attr("gen_ai.request.model"), Some(&"gpt-test".into()));
    assert_eq!(
        chat.attr("gen_ai.response.model"),
        Some(&"gpt-test-2026".into())
    );
    assert_eq!(
        chat.attr("gen_ai.usage.input_tokens"),
        Some(&Value::Int(100))
    );
    assert_eq!(
        chat.attr("gen_ai.usage.output_tokens"),
        Some(&Value::Int(7))
    );
    assert_eq!(
        chat.attr("gen_ai.usage.cache_read.input_tokens"),
        Some(&Value::Int(40))
    );
    assert_eq!(
        chat.attr("gen_ai.response.finish_reasons"),
        Some(&Value::StrList(vec!["tool_calls".into()]))
    );
    // Host and port, never the credentials in the URL.
    assert_eq!(chat.attr("server.address"), Some(&"api.openai.com".into()));
    assert_eq!(chat.attr("server.port"), Some(&Value::Int(8443)));
    assert!(
        !format!("{spans:?}").contains("pw@"),
        "user info of the base URL leaked"
    );
    assert_eq!(chat.start, j.events[2].at);
    assert_eq!(chat.end, j.events[3].at);

    let tool = one(&spans, "execute_tool read_file");
    assert_eq!(tool.parent, Some(turn1.span_id));
    assert_eq!(tool.attr("gen_ai.tool.call.id"), Some(&"c1".into()));
    assert_eq!(tool.attr("gen_ai.tool.name"), Some(&"read_file".into()));
    assert_eq!(
        tool.attr("gen_ai.operation.name"),
        Some(&"execute_tool".into())
    );
    assert_eq!(tool.status, Status::Unset);

    // Every span id is distinct.
    let mut ids: Vec<_> = spans.iter().map(|s| s.span_id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), spans.len());
}

#[test]
fn failed_attempts_are_their_own_spans_with_the_error_class() {
    let mut j = Journal::new();
    j.start()
        .push(Event::TurnStarted { turn: 1 })
        .push(Event::ModelCallStarted {
            turn: 1,
            call: 1,
            attempt: 1,
            request_sha256: "x".into(),
            context: None,
        })
        .push(Event::ModelCallFailed {
            turn: 1,
            call: 1,
            attempt: 1,
            class: ErrorClass::RateLimited,
            message: "429".into(),
            retry_in_ms: Some(250),
        })
        .model_call(1, 1, None);
    let spans = j.spans();
    let chats = named(&spans, "chat gpt-test");
    assert_eq!(chats.len(), 2);
    assert_eq!(chats[0].status, Status::Error("rate_limited".into()));
    assert_eq!(chats[0].attr("error.type"), Some(&"rate_limited".into()));
    assert_eq!(chats[0].attr("baton.retry_in_ms"), Some(&Value::Int(250)));
    assert_eq!(chats[0].attr("baton.attempt"), Some(&Value::Int(1)));
    assert_eq!(chats[1].status, Status::Unset);
    // The run and the turn are still open: nothing ended them.
    assert!(named(&spans, "invoke_agent baton").is_empty());
    assert!(named(&spans, "turn 1").is_empty());
}

#[test]
fn a_resumed_process_ends_spans_opened_before_it_with_the_same_ids() {
    let mut j = Journal::new();
    j.start()
        .push(Event::TurnStarted { turn: 1 })
        .push(Event::ModelCallStarted {
            turn: 1,
            call: 1,
            attempt: 1,
            request_sha256: "x".into(),
            context: None,
        })
        .push(Event::ToolCallStarted {
            turn: 1,
            call_id: "c9".into(),
            name: "shell".into(),
            arguments: "{}".into(),
            effect: ToolEffect::Mutating,
        });
    // The process dies; the next one resumes.
    let split = j.events.len();
    j.push(Event::SupervisorRestarted {
        attempt: 1,
        cause: "killed".into(),
        backoff_ms: 500,
    })
    .push(Event::RunResumed {
        settings: settings("gpt-test"),
    })
    .push(Event::ToolCallFinished {
        turn: 1,
        call_id: "c9".into(),
        result: ToolResult::interrupted(),
        duration_ms: 0,
    })
    .push(Event::TurnFinished { turn: 1 })
    .push(Event::RunFinished {
        summary: "ok".into(),
        finished_by: None,
    });

    // One process seeing everything and two processes (the second replaying the first's part
    // and exporting only what its own events end) give the same spans.
    let whole = j.spans();
    let mut second = SpanBuilder::new(j.run.clone());
    for e in &j.events[..split] {
        assert!(second.push(e).is_empty(), "nothing ends before the crash");
    }
    let tail: Vec<_> = j.events[split..]
        .iter()
        .flat_map(|e| second.push(e))
        .collect();
    assert_eq!(whole, tail);

    let chat = one(&whole, "chat gpt-test");
    assert_eq!(chat.attr("error.type"), Some(&"interrupted".into()));
    assert_eq!(chat.span_id, span_id(&j.run, 2));
    let tool = one(&whole, "execute_tool shell");
    assert_eq!(tool.span_id, span_id(&j.run, 3));
    assert_eq!(tool.status, Status::Error("interrupted".into()));
    assert_eq!(tool.start, j.events[3].at);
    assert_eq!(one(&whole, "invoke_agent baton").start, j.events[0].at);
}

#[test]
fn a_pause_ends_only_what_was_in_flight() {
    let mut j = Journal::new();
    j.start()
        .push(Event::TurnStarted { turn: 1 })
        .push(Event::ModelCallStarted {
            turn: 1,
            call: 1,
            attempt: 1,
            request_sha256: "x".into(),
            context: None,
        })
        .push(Event::RunPaused {
            reason: PauseReason::Interrupted,
            detail: "stop".into(),
        });
    let spans = j.spans();
    assert_eq!(spans.len(), 1, "{spans:#?}");
    assert_eq!(spans[0].name, "chat gpt-test");
    assert_eq!(spans[0].status, Status::Error("interrupted".into()));
}

#[test]
fn turns_inside_a_task_are_its_children_and_checks_hang_under_it() {
    let mut j = Journal::new();
    j.start()
        .push(Event::TaskStarted {
            task: "parse".into(),
            approach: 1,
            attempt: 1,
        })
        .push(Event::TurnStarted { turn: 1 })
        .model_call(1, 1, None)
        .push(Event::TurnFinished { turn: 1 })
        .push(Event::CheckStarted {
            task: Some("parse".into()),
            attempt: 1,
            command: "cargo test".into(),
        })
        .push(Event::CheckFinished {
            task: Some("parse".into()),
            attempt: 1,
            passed: false,
            exit_code: Some(101),
            output: "failed".into(),
            duration_ms: 9,
        })
        // The next attempt in a fresh context.
        .push(Event::TaskStarted {
            task: "parse".into(),
            approach: 1,
            attempt: 2,
        })
        .push(Event::TurnStarted { turn: 2 })
        .model_call(2, 2, None)
        .push(Event::TurnFinished { turn: 2 })
        .push(Event::CheckStarted {
            task: Some("parse".into()),
            attempt: 2,
            command: "cargo test".into(),
        })
        .push(Event::CheckFinished {
            task: Some("parse".into()),
            attempt: 2,
            passed: true,
            exit_code: Some(0),
            output: "ok".into(),
            duration_ms: 9,
        })
        .push(Event::TaskFinished {
            task: "parse".into(),
            summary: "parsed".into(),
        })
        .push(Event::TaskSkipped {
            task: "emit".into(),
            reason: "depends on a failed task".into(),
        })
        .push(Event::CheckStarted {
            task: None,
            attempt: 1,
            command: "make".into(),
        })
        .push(Event::CheckFinished {
            task: None,
            attempt: 1,
            passed: true,
            exit_code: Some(0),
            output: String::new(),
            duration_ms: 1,
        })
        .push(Event::RunFinished {
            summary: "done".into(),
            finished_by: None,
        });
    let spans = j.spans();
    let run = one(&spans, "invoke_agent baton");
    let tasks = named(&spans, "task parse");
    assert_eq!(tasks.len(), 2);
    for task in &tasks {
        assert_eq!(task.parent, Some(run.span_id));
    }
    assert_eq!(
        tasks[0].attr("baton.task.outcome"),
        Some(&"superseded".into())
    );
    assert_eq!(
        tasks[1].attr("baton.task.outcome"),
        Some(&"finished".into())
    );
    assert_eq!(tasks[1].attr("baton.task.attempt"), Some(&Value::Int(2)));
    assert_eq!(tasks[1].status, Status::Ok);
    assert_eq!(one(&spans, "turn 1").parent, Some(tasks[0].span_id));
    assert_eq!(one(&spans, "turn 2").parent, Some(tasks[1].span_id));
    let checks = named(&spans, "check parse");
    assert_eq!(checks.len(), 2);
    assert_eq!(checks[0].parent, Some(tasks[0].span_id));
    assert_eq!(checks[0].status, Status::Error("check failed".into()));
    assert_eq!(checks[0].attr("baton.exit_code"), Some(&Value::Int(101)));
    assert_eq!(checks[1].parent, Some(tasks[1].span_id));
    assert_eq!(checks[1].status, Status::Ok);
    let skipped = one(&spans, "task emit");
    assert_eq!(skipped.attr("baton.task.outcome"), Some(&"skipped".into()));
    assert_eq!(skipped.start, skipped.end);
    // The run-level check hangs under the run: no task is in progress.
    assert_eq!(one(&spans, "check final").parent, Some(run.span_id));
}

#[test]
fn a_failed_task_and_rollback_are_spans_under_the_task() {
    let mut j = Journal::new();
    j.start()
        .push(Event::TaskStarted {
            task: "a".into(),
            approach: 1,
            attempt: 1,
        })
        .push(Event::RollbackStarted {
            task: Some("a".into()),
            snapshot: "abc".into(),
            reason: "approach failed".into(),
        })
        .push(Event::RollbackFinished {
            task: Some("a".into()),
            snapshot: "abc".into(),
        })
        .push(Event::TaskFailed {
            task: "a".into(),
            reason: "no approach left".into(),
        })
        .push(Event::RunFailed {
            error: "task a failed".into(),
        });
    let spans = j.spans();
    let task = one(&spans, "task a");
    assert_eq!(task.status, Status::Error("no approach left".into()));
    assert_eq!(one(&spans, "rollback").parent, Some(task.span_id));
    let run = one(&spans, "invoke_agent baton");
    assert_eq!(run.status, Status::Error("task a failed".into()));
    assert_eq!(run.attr("baton.exit_code"), Some(&Value::Int(1)));
    assert_eq!(run.attr("error.type"), Some(&"run_failed".into()));
}

#[test]
fn ids_are_stable_per_run_and_differ_between_runs() {
    let a = RunId::from_string("a");
    let b = RunId::from_string("b");
    assert_eq!(trace_id(&a), trace_id(&a));
    assert_ne!(trace_id(&a), trace_id(&b));
    assert_ne!(span_id(&a, 0), span_id(&a, 1));
    assert_ne!(span_id(&a, 0), span_id(&b, 0));
}

#[test]
fn provider_names_follow_the_conventions() {
    assert_eq!(
        provider_name(ProviderKind::Anthropic, "https://api.anthropic.com"),
        "anthropic"
    );
    assert_eq!(
        provider_name(
            ProviderKind::OpenAiCompatible,
            "https://api.deepseek.com/v1"
        ),
        "deepseek"
    );
    assert_eq!(
        provider_name(ProviderKind::OpenAiCompatible, "http://127.0.0.1:8080/v1"),
        "openai"
    );
    assert_eq!(
        server_of("http://[::1]:9/v1"),
        Some(("::1".to_string(), Some(9)))
    );
    assert_eq!(
        server_of("localhost"),
        Some(("localhost".to_string(), None))
    );
}
