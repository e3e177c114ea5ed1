use super::*;
use baton_core::*;

fn state_with_history() -> RunState {
    let run_id = RunId::from_string("r1");
    let settings = RunSettings {
        model: ModelSettings {
            provider: ProviderKind::OpenAiCompatible,
            base_url: "http://127.0.0.1:9/v1".into(),
            model: "test-model".into(),
            response_mode: ResponseMode::Whole,
            tool_choice: Default::default(),
        },
        limits: Limits::default(),
        context: Default::default(),
    };
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
