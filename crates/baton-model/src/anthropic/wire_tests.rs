use super::*;
use baton_core::{ToolCall, ToolEffect, ToolSpec};
use serde_json::json;

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

fn tool_result(call_id: &str, name: &str, content: &str) -> Message {
    Message::Tool {
        call_id: call_id.into(),
        name: name.into(),
        content: content.into(),
    }
}

fn sample(mode: ResponseMode) -> ModelRequest {
    ModelRequest {
        model: "claude-test".into(),
        messages: vec![
            Message::System {
                content: "You are baton.".into(),
            },
            Message::User {
                content: "Goal:\nFix the build.".into(),
            },
            Message::Assistant(AssistantMessage {
                content: Some("Looking at both.".into()),
                tool_calls: vec![
                    call("toolu_1", "read_file", r#"{"path":"Cargo.toml"}"#),
                    call(
                        "toolu_2",
                        "shell",
                        r#"{"timeout_secs": 60, "command": "cargo build"}"#,
                    ),
                ],
                ..Default::default()
            }),
            tool_result("toolu_1", "read_file", "[package]\nname = \"x\""),
            tool_result("toolu_2", "shell", "error[E0432]: unresolved import"),
            Message::User {
                content: "Note: 3 turns left.".into(),
            },
        ],
        tools: vec![
            ToolSpec {
                name: "read_file".into(),
                description: "Read a file.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"]
                }),
                effect: ToolEffect::ReadOnly,
            },
            ToolSpec {
                name: "shell".into(),
                description: "Run a command.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {"command": {"type": "string"}, "timeout_secs": {"type": "integer"}},
                    "required": ["command"]
                }),
                effect: ToolEffect::Mutating,
            },
        ],
        response_mode: mode,
        tool_choice: Default::default(),
        reasoning: Default::default(),
        provider_compaction_at: Default::default(),
    }
}

fn body_text(request: &ModelRequest) -> String {
    String::from_utf8(request_body(request, 8192).unwrap()).unwrap()
}

fn body_json(request: &ModelRequest) -> Value {
    serde_json::from_str(&body_text(request)).unwrap()
}

/// JSON pointers of every block that carries `cache_control`.
fn breakpoints(body: &Value) -> Vec<String> {
    let mut found = Vec::new();
    for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        if tool.get("cache_control").is_some() {
            found.push(format!("/tools/{i}"));
        }
    }
    for (i, block) in body["system"].as_array().into_iter().flatten().enumerate() {
        if block.get("cache_control").is_some() {
            found.push(format!("/system/{i}"));
        }
    }
    for (m, message) in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for (b, block) in message["content"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if block.get("cache_control").is_some() {
                found.push(format!("/messages/{m}/content/{b}"));
            }
        }
    }
    found
}

#[test]
fn streaming_body_snapshot() {
    insta::assert_snapshot!(body_text(&sample(ResponseMode::Streaming)));
}

#[test]
fn same_request_gives_identical_bytes() {
    let request = sample(ResponseMode::Streaming);
    assert_eq!(
        request_body(&request, 8192).unwrap(),
        request_body(&request.clone(), 8192).unwrap()
    );
}

#[test]
fn whole_body_differs_only_in_stream_flag() {
    let mut streaming = body_json(&sample(ResponseMode::Streaming));
    let mut whole = body_json(&sample(ResponseMode::Whole));
    assert_eq!(streaming["stream"], json!(true));
    assert_eq!(whole["stream"], json!(false));
    streaming["stream"] = Value::Null;
    whole["stream"] = Value::Null;
    assert_eq!(streaming, whole);
}

#[test]
fn tool_results_and_a_following_note_become_one_user_message() {
    let body = body_json(&sample(ResponseMode::Whole));
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    let last = messages[2]["content"].as_array().unwrap();
    let types: Vec<&str> = last.iter().map(|b| b["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["tool_result", "tool_result", "text"]);
    assert_eq!(last[0]["tool_use_id"], "toolu_1");
    assert_eq!(last[1]["tool_use_id"], "toolu_2");
    assert_eq!(last[2]["text"], "Note: 3 turns left.");
}

#[test]
fn roles_always_alternate_and_results_lead_their_message() {
    // Every awkward order the neutral history can hold.
    let request = ModelRequest {
        messages: vec![
            Message::System {
                content: "one".into(),
            },
            Message::System {
                content: "two".into(),
            },
            Message::User {
                content: "a".into(),
            },
            Message::User {
                content: "b".into(),
            },
            Message::Assistant(AssistantMessage {
                content: Some("thinking aloud".into()),
                tool_calls: vec![],
                ..Default::default()
            }),
            Message::Assistant(AssistantMessage {
                content: None,
                tool_calls: vec![call("t1", "ls", "{}")],
                ..Default::default()
            }),
            // A note that landed between calls and results.
            Message::User {
                content: "interrupting note".into(),
            },
            tool_result("t1", "ls", "a.rs"),
            Message::Assistant(AssistantMessage::default()),
            Message::User {
                content: "go on".into(),
            },
        ],
        ..sample(ResponseMode::Whole)
    };
    let body = body_json(&request);
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "one"}, {"type": "text", "text": "two", "cache_control": {"type": "ephemeral"}}])
    );
    let messages = body["messages"].as_array().unwrap();
    for pair in messages.windows(2) {
        assert_ne!(pair[0]["role"], pair[1]["role"], "{body}");
    }
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[0]["content"][0]["text"], "a");
    assert_eq!(messages[0]["content"][1]["text"], "b");
    assert_eq!(messages[1]["content"][0]["text"], "thinking aloud");
    assert_eq!(messages[1]["content"][1]["type"], "tool_use");
    assert_eq!(messages[2]["content"][0]["type"], "tool_result");
    assert_eq!(messages[2]["content"][1]["text"], "interrupting note");
    // An assistant message with nothing in it still has a (non-empty) block.
    assert_eq!(
        messages[3]["content"],
        json!([{"type": "text", "text": EMPTY_TEXT}])
    );
    assert_eq!(messages.len(), 5);
}

#[test]
fn cache_breakpoints_sit_on_the_stable_prefix() {
    let body = body_json(&sample(ResponseMode::Streaming));
    // Last tool, last system block, last block of the last message, last block of the user
    // message before it.
    assert_eq!(
        breakpoints(&body),
        [
            "/tools/1",
            "/system/0",
            "/messages/0/content/0",
            "/messages/2/content/2"
        ]
    );
    assert_eq!(
        body["messages"][2]["content"][2]["cache_control"],
        json!({"type": "ephemeral"})
    );
}

#[test]
fn previous_breakpoint_is_still_marked_on_the_next_request() {
    // Request n ends with the tool results; request n+1 adds the answer and its results. The
    // block marked last in request n must be marked (and identical) in request n+1.
    let mut first = sample(ResponseMode::Streaming);
    first.messages.truncate(5);
    let mut second = first.clone();
    second.messages.extend([
        Message::Assistant(AssistantMessage {
            content: None,
            tool_calls: vec![call("toolu_3", "shell", r#"{"command":"cargo test"}"#)],
            ..Default::default()
        }),
        tool_result("toolu_3", "shell", "ok"),
    ]);
    let first = body_json(&first);
    let second = body_json(&second);
    let last_of_first = breakpoints(&first).pop().unwrap();
    assert_eq!(last_of_first, "/messages/2/content/1");
    assert!(breakpoints(&second).contains(&last_of_first));
    assert_eq!(
        first.pointer(&last_of_first),
        second.pointer(&last_of_first)
    );
    assert_eq!(breakpoints(&second).len(), 4);
}

#[test]
fn never_more_than_four_breakpoints_and_none_without_content() {
    let mut request = sample(ResponseMode::Whole);
    for n in 0..30 {
        request.messages.push(Message::Assistant(AssistantMessage {
            content: Some(format!("step {n}")),
            tool_calls: vec![call(&format!("c{n}"), "ls", "{}")],
            ..Default::default()
        }));
        request
            .messages
            .push(tool_result(&format!("c{n}"), "ls", ""));
        assert!(breakpoints(&body_json(&request)).len() <= 4);
    }
    request.tools.clear();
    request.messages = vec![Message::User {
        content: "only".into(),
    }];
    assert_eq!(breakpoints(&body_json(&request)), ["/messages/0/content/0"]);
    request.messages.clear();
    assert!(breakpoints(&body_json(&request)).is_empty());
}

#[test]
fn tool_arguments_become_input_objects_and_nothing_is_lost() {
    let mut request = sample(ResponseMode::Whole);
    request.messages = vec![Message::Assistant(AssistantMessage {
        content: None,
        tool_calls: vec![
            call("a", "t", r#"{"b": 1, "a": {"d": 2, "c": 3}}"#),
            call("b", "t", ""),
            call("c", "t", "  "),
            call("d", "t", r#"{"path": "unterminated"#),
            call("e", "t", "[1, 2]"),
            call("f", "t", "\"text\""),
        ],
        ..Default::default()
    })];
    let text = body_text(&request);
    // Keys sorted at every depth, whatever order the model wrote them in.
    assert!(
        text.contains(r#""input":{"a":{"c":3,"d":2},"b":1}"#),
        "{text}"
    );
    let body: Value = serde_json::from_str(&text).unwrap();
    let inputs: Vec<&Value> = body["messages"][0]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| &b["input"])
        .collect();
    assert_eq!(inputs[1], &json!({}));
    assert_eq!(inputs[2], &json!({}));
    assert_eq!(
        inputs[3],
        &json!({UNPARSED_ARGUMENTS_KEY: r#"{"path": "unterminated"#})
    );
    assert_eq!(inputs[4], &json!({UNPARSED_ARGUMENTS_KEY: "[1, 2]"}));
    assert_eq!(inputs[5], &json!({UNPARSED_ARGUMENTS_KEY: "\"text\""}));
}

#[test]
fn blank_text_is_never_sent() {
    let request = ModelRequest {
        messages: vec![
            Message::System {
                content: "  ".into(),
            },
            Message::User {
                content: "\n".into(),
            },
            Message::Assistant(AssistantMessage {
                content: Some(" ".into()),
                tool_calls: vec![call("t", "ls", "{}")],
                ..Default::default()
            }),
            tool_result("t", "ls", ""),
        ],
        ..sample(ResponseMode::Whole)
    };
    let body = body_json(&request);
    assert!(body.get("system").is_none(), "{body}");
    assert_eq!(body["messages"][0]["content"][0]["text"], EMPTY_TEXT);
    // The blank text before the call is dropped; the call stands alone.
    assert_eq!(
        body["messages"][1]["content"],
        json!([{"type": "tool_use", "id": "t", "name": "ls", "input": {}}])
    );
    // An empty result omits `content` (optional) rather than sending an empty text.
    assert_eq!(
        body["messages"][2]["content"],
        json!([{"type": "tool_result", "tool_use_id": "t", "cache_control": {"type": "ephemeral"}}])
    );
}

#[test]
fn tool_choice_and_tools_omitted_when_not_needed() {
    let choice = |choice: ToolChoice, with_tools: bool| {
        let mut request = sample(ResponseMode::Whole);
        request.tool_choice = choice;
        if !with_tools {
            request.tools.clear();
        }
        body_json(&request)["tool_choice"].clone()
    };
    assert_eq!(choice(ToolChoice::Auto, true), Value::Null);
    assert_eq!(choice(ToolChoice::Required, true), json!({"type": "any"}));
    assert_eq!(choice(ToolChoice::None, true), json!({"type": "none"}));
    assert_eq!(
        choice(ToolChoice::Function("shell".into()), true),
        json!({"type": "tool", "name": "shell"})
    );
    assert_eq!(choice(ToolChoice::Required, false), Value::Null);

    let mut request = sample(ResponseMode::Whole);
    request.tools.clear();
    request.messages.truncate(2);
    assert_eq!(
        String::from_utf8(request_body(&request, 1024).unwrap()).unwrap(),
        r#"{"model":"claude-test","max_tokens":1024,"system":[{"type":"text","text":"You are baton.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"Goal:\nFix the build.","cache_control":{"type":"ephemeral"}}]}],"stream":false}"#
    );
}

#[test]
fn effect_is_not_sent() {
    let text = body_text(&sample(ResponseMode::Streaming));
    assert!(!text.contains("effect"));
    assert!(!text.contains("read_only"));
    assert!(!text.contains("mutating"));
}

#[test]
fn provider_compaction_is_compact_where_the_model_has_it_and_tool_clearing_elsewhere() {
    let edit = |model: &str, at: u64| {
        let mut request = sample(ResponseMode::Whole);
        request.model = model.into();
        request.provider_compaction_at = Some(at);
        body_json(&request)["context_management"]["edits"][0].clone()
    };
    assert_eq!(
        edit("claude-opus-4-6", 160_000),
        json!({"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 160000}})
    );
    // Anthropic's smallest trigger is 50,000 input tokens.
    assert_eq!(
        edit("claude-sonnet-4-6-20260301", 20_000)["trigger"]["value"],
        50_000
    );
    assert_eq!(
        edit("claude-sonnet-4-5", 20_000),
        json!({"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 20000}})
    );
    assert!(server_compaction("anthropic/claude-opus-4-7"));
    assert!(!server_compaction("claude-opus-4-5"));
}

#[test]
fn a_compaction_block_goes_back_first_and_exactly() {
    let mut request = sample(ResponseMode::Whole);
    if let Message::Assistant(assistant) = &mut request.messages[2] {
        assistant.reasoning = vec![Reasoning::Compaction {
            content: Some("Summary: \"quoted\"\nnext".into()),
            encrypted_content: Some("opaque==".into()),
        }];
    }
    let body = body_json(&request);
    assert_eq!(
        body["messages"][1]["content"][0],
        json!({"type": "compaction", "content": "Summary: \"quoted\"\nnext", "encrypted_content": "opaque=="})
    );
    assert_eq!(body["messages"][1]["content"][1]["type"], "text");
}
