use super::*;
use baton_core::*;

/// The settings of the tests' runs: an OpenAI-compatible `test-model`, defaults otherwise.
pub(crate) fn settings() -> RunSettings {
    RunSettings {
        tasks: Default::default(),
        model: ModelSettings {
            provider: ProviderKind::OpenAiCompatible,
            base_url: "http://127.0.0.1:9/v1".into(),
            model: "test-model".into(),
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

fn state_with_history() -> RunState {
    let run_id = RunId::from_string("r1");
    let settings = settings();
    let tools = vec![ToolSpec {
        name: "read_file".into(),
        description: "Read a file".into(),
        parameters: serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        effect: ToolEffect::ReadOnly,
    }];
    let events = vec![
        Event::RunStarted {
            goal: "Make the tests pass".into(),
            workspace: "/w".into(),
            settings,
            system_prompt: SYSTEM_PROMPT.into(),
            project_instructions: Some("Use tabs.\n".into()),
            tools,
        },
        Event::TurnStarted { turn: 1 },
        Event::ModelCallStarted {
            turn: 1,
            call: 1,
            attempt: 1,
            request_sha256: "x".into(),
            context: None,
        },
        Event::ModelCallFinished {
            turn: 1,
            call: 1,
            message: AssistantMessage {
                content: Some("Reading.".into()),
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"a.txt"}"#.into(),
                }],
                ..Default::default()
            },
            usage: Some(Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
                cached_prompt_tokens: None,
                ..Default::default()
            }),
            cost_usd: None,
            finish_reason: Some("tool_calls".into()),
            served_model: None,
            duration_ms: 3,
        },
        Event::ToolCallStarted {
            turn: 1,
            call_id: "c1".into(),
            name: "read_file".into(),
            arguments: r#"{"path":"a.txt"}"#.into(),
            effect: ToolEffect::ReadOnly,
        },
        Event::ToolCallFinished {
            turn: 1,
            call_id: "c1".into(),
            result: ToolResult::success("1: hello"),
            duration_ms: 1,
        },
    ];
    let records: Vec<EventRecord> = events
        .into_iter()
        .enumerate()
        .map(|(i, event)| EventRecord {
            run_id: run_id.clone(),
            seq: i as u64,
            // Distinct timestamps: they must not leak into the prompt.
            at: jiff::Timestamp::from_second(1_000 + i as i64 * 7).unwrap(),
            event,
        })
        .collect();
    replay(&records).unwrap()
}

#[test]
fn request_is_byte_identical_for_the_same_journal() {
    let a = assemble(&state_with_history()).unwrap();
    let b = assemble(&state_with_history()).unwrap();
    assert_eq!(
        serde_json::to_vec(&a).unwrap(),
        serde_json::to_vec(&b).unwrap()
    );
    assert_eq!(request_digest(&a), request_digest(&b));
}

#[test]
fn history_growth_keeps_the_prefix_and_changes_the_digest() {
    let before = assemble(&state_with_history()).unwrap();
    let mut state = state_with_history();
    state.history.push(HistoryEntry {
        seq: 99,
        turn: 2,
        message: Message::User {
            content: "more".into(),
        },
    });
    let after = assemble(&state).unwrap();
    assert_eq!(before.messages[..], after.messages[..before.messages.len()]);
    assert_ne!(request_digest(&before), request_digest(&after));
}

#[test]
fn assembled_request_snapshot() {
    let request = assemble(&state_with_history()).unwrap();
    insta::assert_json_snapshot!(request);
}

#[test]
fn no_request_before_the_run_started() {
    assert!(assemble(&RunState::default()).is_none());
}

/// A run of `turns` turns, each calling `shell` for a 20-line output (turn 1 also sets the plan,
/// turn 2 records a fact), with the history through turn `compact_after` compacted.
fn long_run(turns: u32, compact_after: u32) -> Vec<EventRecord> {
    let run_id = RunId::from_string("r2");
    let mut settings = state_with_history().settings.unwrap();
    settings.context = ContextSettings {
        window_tokens: 8_192,
        compact_at_percent: 80,
        masking: Masking::OlderThan {
            keep_turns: 1,
            batch_turns: 2,
            min_bytes: 100,
        },
        compaction: Compaction::Summarize {
            keep_recent_turns: 1,
        },
    };
    let mut state = RunState::default();
    let mut records = vec![];
    let mut push = |state: &mut RunState, event: Event| {
        let record = EventRecord {
            run_id: run_id.clone(),
            seq: state.next_seq,
            at: jiff::Timestamp::from_second(2_000 + state.next_seq as i64).unwrap(),
            event,
        };
        state.apply(&record).unwrap();
        records.push(record);
    };
    push(
        &mut state,
        Event::RunStarted {
            goal: "Make the tests pass".into(),
            workspace: "/w".into(),
            settings,
            system_prompt: "You are a test agent.".into(),
            project_instructions: None,
            tools: vec![update_plan_spec()],
        },
    );
    for turn in 1..=turns {
        push(&mut state, Event::TurnStarted { turn });
        if turn == compact_after + 1 {
            let replaced = compact::compaction_cut(&state, 1).unwrap();
            let (first_seq, last_seq) = (
                state.history[0].seq,
                state.history[replaced as usize - 1].seq,
            );
            push(
                &mut state,
                Event::CompactionStarted {
                    turn,
                    replaced,
                    trigger: CompactionTrigger::Threshold,
                    estimated_prompt_tokens: 7_000,
                },
            );
            push(
                &mut state,
                Event::CompactionFinished {
                    turn,
                    summary: "## Next step\nFix parse_line.".into(),
                    replaced,
                    first_seq,
                    last_seq,
                    left_out: 0,
                    usage: None,
                    cost_usd: None,
                    served_model: None,
                    duration_ms: 1,
                },
            );
        }
        let (name, arguments) = match turn {
            1 => (
                "update_plan",
                r#"{"items":[{"step":"fix parse_line","status":"in_progress"}]}"#.to_string(),
            ),
            2 => ("remember", r#"{"fact":"tests live in tests/"}"#.to_string()),
            _ => ("shell", format!(r#"{{"command":"cargo test {turn}"}}"#)),
        };
        let call = ToolCall {
            id: format!("c{turn}"),
            name: name.into(),
            arguments: arguments.clone(),
        };
        push(
            &mut state,
            Event::ModelCallStarted {
                turn,
                call: turn,
                attempt: 1,
                request_sha256: "x".into(),
                context: None,
            },
        );
        push(
            &mut state,
            Event::ModelCallFinished {
                turn,
                call: turn,
                message: AssistantMessage {
                    content: None,
                    tool_calls: vec![call],
                    ..Default::default()
                },
                usage: None,
                cost_usd: None,
                finish_reason: None,
                served_model: None,
                duration_ms: 1,
            },
        );
        push(
            &mut state,
            Event::ToolCallStarted {
                turn,
                call_id: format!("c{turn}"),
                name: name.into(),
                arguments,
                effect: ToolEffect::ReadOnly,
            },
        );
        let output = match name {
            "shell" => (0..20)
                .map(|i| format!("test case {i} of turn {turn} ... ok\n"))
                .collect(),
            _ => "ok".to_string(),
        };
        push(
            &mut state,
            Event::ToolCallFinished {
                turn,
                call_id: format!("c{turn}"),
                result: ToolResult::success(output),
                duration_ms: 1,
            },
        );
        push(&mut state, Event::TurnFinished { turn });
    }
    push(&mut state, Event::TurnStarted { turn: turns + 1 });
    records
}

#[test]
fn long_run_request_snapshot_shows_summary_masking_and_working_memory() {
    let state = replay(&long_run(7, 4)).unwrap();
    let assembly = assemble_with_report(&state).unwrap();
    // The compaction at turn 5 kept turn 4 on; at turn 8 the horizon masks through turn 6, so
    // the outputs of turns 4, 5 and 6 are placeholders and turn 7's is whole.
    assert_eq!(assembly.masked_outputs, 3);
    insta::assert_json_snapshot!(assembly.request);
}

#[test]
fn compaction_request_snapshot() {
    let state = replay(&long_run(4, 99)).unwrap();
    let cut = compact::compaction_cut(&state, 1).unwrap();
    let request = compact::compaction_request(&state, cut, 0).unwrap();
    assert_eq!(request.tool_choice, ToolChoice::None);
    insta::assert_json_snapshot!(request);
}

/// `update_plan`'s spec as the engine offers it (`baton-engine/src/tools/plan.rs`), spelled out:
/// the snapshots show a run whose tools include it.
fn update_plan_spec() -> ToolSpec {
    ToolSpec {
        name: baton_core::memory::UPDATE_PLAN_TOOL.into(),
        description: "Replace your plan: the whole todo list with each step's status. The plan \
                      is shown at the end of every request and survives compaction."
            .into(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "step": {"type": "string"},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "done"]}
                        },
                        "required": ["step", "status"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["items"],
            "additionalProperties": false
        }),
        effect: ToolEffect::ReadOnly,
    }
}
