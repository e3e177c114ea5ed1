#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `baton run --provider anthropic` speaks the Messages API natively: tool_use / tool_result,
//! prompt-cache breakpoints, cache-aware usage and cost.

mod support;

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use support::*;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Each request's body and its `x-api-key` header.
type Log = Arc<Mutex<Vec<(Value, Option<String>)>>>;

struct Messages {
    answers: Vec<Value>,
    received: Log,
}

impl Respond for Messages {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let key = request
            .headers
            .get("x-api-key")
            .map(|v| v.to_str().unwrap().to_string());
        let turn = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .count();
        self.received.lock().unwrap().push((body, key));
        let usage = json!({"input_tokens": 100, "cache_read_input_tokens": 1000,
                           "cache_creation_input_tokens": 200, "output_tokens": 50});
        ResponseTemplate::new(200).set_body_json(json!({
            "id": format!("msg_{turn}"), "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-20250514", "content": self.answers[turn],
            "stop_reason": "tool_use", "usage": usage
        }))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_against_the_messages_api() {
    let server = MockServer::start().await;
    let received = Arc::new(Mutex::new(Vec::new()));
    let answers = vec![
        json!([{"type": "text", "text": "Writing it."},
               {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {"path": "hi.txt", "content": "hi\n"}}]),
        json!([{"type": "tool_use", "id": "toolu_2", "name": "finish", "input": {"summary": "wrote hi.txt"}}]),
    ];
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(Messages {
            answers,
            received: received.clone(),
        })
        .mount(&server)
        .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.env("ANTHROPIC_API_KEY", "sk-ant-test-key-0123456789")
        .args([
            "run",
            "--provider",
            "anthropic",
            "--base-url",
            &server.uri(),
            "--model",
            "claude-sonnet-4",
            "--no-stream",
            "--json",
            "Write hi.txt",
        ]);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("hi.txt")).unwrap(),
        "hi\n"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("sk-ant-test-key"));

    let received = received.lock().unwrap().clone();
    assert_eq!(received.len(), 2);
    assert!(
        received
            .iter()
            .all(|(_, key)| key.as_deref() == Some("sk-ant-test-key-0123456789"))
    );
    let (second, _) = &received[1];
    // The tool result went back as a tool_result block in a user message, and the stable prefix
    // carries cache breakpoints.
    let last = second["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"][0]["type"], "tool_result");
    assert_eq!(last["content"][0]["tool_use_id"], "toolu_1");
    let text = second.to_string();
    assert!(
        text.contains("\"cache_control\":{\"type\":\"ephemeral\"}"),
        "{text}"
    );
    assert!(
        second["system"][0]["text"]
            .as_str()
            .unwrap()
            .contains("You are baton")
    );

    // Usage normalized (all input tokens counted, reads and writes split out) and priced at the
    // built-in claude-sonnet-4 rates: 100*3 + 1000*0.30 + 200*3.75 + 50*15 per million.
    let journal = journal(ws.path(), home.path());
    let finished = of_type(&journal, "model_call_finished");
    assert_eq!(
        finished[0]["usage"],
        json!({"prompt_tokens": 1300, "completion_tokens": 50, "cached_prompt_tokens": 1000, "cache_write_tokens": 200})
    );
    let cost = finished[0]["cost_usd"].as_f64().unwrap();
    assert!((cost - 0.0021).abs() < 1e-12, "{cost}");
    assert_eq!(
        of_type(&journal, "run_started")[0]["settings"]["model"]["provider"],
        "anthropic"
    );
}
