#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 17: Anthropic's server-side compaction (`compact_20260112`), chosen by the profile of
//! the models Anthropic lists for it (here `claude-opus-4-6`) with no configuration at all. As
//! the compaction page documents: the request asks for the edit with the `compact-2026-01-12`
//! beta; the answer starts with a `compaction` block (streamed as `content_block_start` with
//! empty fields, then one `compaction_delta`), which must go back verbatim in the assistant
//! turn; usage lists each sampling step in `usage.iterations`, and the call is billed for all
//! of them. The server here answers 400 when the block does not come back exactly.

mod support;

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use support::*;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const SUMMARY: &str =
    "The user wants a.txt holding \"1\".\nNothing written yet — 下一步: write it.";
const ENCRYPTED: &str = "EqQBCkgIARABGAIiQ+opaque/metadata==";

/// Each request's body and its `anthropic-beta` header.
type Received = Arc<Mutex<Vec<(Value, Option<String>)>>>;

struct CompactingClaude {
    received: Received,
}

fn compaction_block() -> Value {
    json!({"type": "compaction", "content": SUMMARY, "encrypted_content": ENCRYPTED})
}

fn tool(turn: usize) -> Value {
    match turn {
        0 => json!({"type": "tool_use", "id": "toolu_0", "name": "write_file",
                    "input": {"path": "a.txt", "content": "1\n"}}),
        _ => json!({"type": "tool_use", "id": "toolu_1", "name": "finish",
                    "input": {"summary": "a.txt written"}}),
    }
}

/// The first answer compacts: two iterations, the compaction's and the message's.
fn usage(turn: usize) -> Value {
    match turn {
        0 => json!({"input_tokens": 40, "output_tokens": 20,
            "iterations": [
                {"type": "compaction", "input_tokens": 1000, "output_tokens": 300,
                 "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
                {"type": "message", "input_tokens": 40, "output_tokens": 20,
                 "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}]}),
        _ => json!({"input_tokens": 60, "output_tokens": 10}),
    }
}

fn sse(turn: usize) -> String {
    let event = |kind: &str, data: Value| format!("event: {kind}\ndata: {data}\n\n");
    let mut sse = event(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg", "type": "message",
            "role": "assistant", "model": "claude-opus-4-6", "content": [],
            "usage": {"input_tokens": 40, "output_tokens": 1}}}),
    );
    let mut index = 0;
    if turn == 0 {
        sse += &event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block":
                {"type": "compaction", "content": null, "encrypted_content": null}}),
        );
        sse += &event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta":
                {"type": "compaction_delta", "content": SUMMARY, "encrypted_content": ENCRYPTED}}),
        );
        sse += &event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        );
        index = 1;
    }
    let mut call = tool(turn);
    let input = call["input"].to_string();
    call["input"] = json!({});
    sse += &event(
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": call}),
    );
    sse += &event(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index,
               "delta": {"type": "input_json_delta", "partial_json": input}}),
    );
    sse += &event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    );
    sse += &event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
               "usage": usage(turn)}),
    );
    sse + &event("message_stop", json!({"type": "message_stop"}))
}

impl Respond for CompactingClaude {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let beta = request
            .headers
            .get("anthropic-beta")
            .map(|v| v.to_str().unwrap().to_string());
        self.received.lock().unwrap().push((body.clone(), beta));
        let assistants: Vec<&Value> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .collect();
        if let Some(first) = assistants.first()
            && first["content"][0] != compaction_block()
        {
            return ResponseTemplate::new(400)
                .insert_header("content-type", "application/json")
                .set_body_string(
                    r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0: the compaction block was not returned as it was sent"}}"#,
                );
        }
        let turn = assistants.len();
        if body["stream"] == true {
            return ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(sse(turn));
        }
        let mut content = vec![tool(turn)];
        if turn == 0 {
            content.insert(0, compaction_block());
        }
        ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg", "type": "message", "role": "assistant", "model": "claude-opus-4-6",
            "content": content, "stop_reason": "tool_use", "usage": usage(turn),
        }))
    }
}

async fn compacting_loop(streamed: bool) {
    let server = MockServer::start().await;
    let received: Received = Arc::default();
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(CompactingClaude {
            received: received.clone(),
        })
        .mount(&server)
        .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let uri = server.uri();
    let mut args = vec![
        "run",
        "--provider",
        "anthropic",
        "--base-url",
        &uri,
        "--model",
        "claude-opus-4-6",
    ];
    if !streamed {
        args.push("--no-stream");
    }
    args.push("Write a.txt");
    let out = baton_blocking(ws.path(), home.path(), &args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "1\n"
    );
    let received = received.lock().unwrap().clone();
    assert_eq!(received.len(), 2, "no request was refused");
    for (body, beta) in &received {
        // The profile's choices, with nothing configured: compaction by the provider at 80% of
        // the 200k window, adaptive thinking, a 32k output limit.
        assert_eq!(
            body["context_management"],
            json!({"edits": [{"type": "compact_20260112",
                              "trigger": {"type": "input_tokens", "value": 160000}}]})
        );
        assert_eq!(beta.as_deref(), Some("compact-2026-01-12"));
        assert_eq!(body["thinking"], json!({"type": "adaptive"}));
        assert_eq!(body["max_tokens"], 32000);
    }
    // The compaction block went back verbatim, first in its assistant turn, with nothing
    // baton-side dropped (the API ignores what precedes it).
    let messages = received[1].0["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "user");
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["content"][0], compaction_block());
    assert_eq!(assistant["content"][1]["type"], "tool_use");

    let events = journal(ws.path(), home.path());
    let finished = of_type(&events, "model_call_finished");
    assert_eq!(
        finished[0]["message"]["reasoning"],
        json!([{"type": "compaction", "content": SUMMARY, "encrypted_content": ENCRYPTED}])
    );
    // Billed for both iterations: 1,040 input and 320 output tokens, not the message's 40/20.
    assert_eq!(
        finished[0]["usage"]["prompt_tokens"], 1040,
        "{}",
        finished[0]
    );
    assert_eq!(finished[0]["usage"]["completion_tokens"], 320);
    let settings = &of_type(&events, "run_started")[0]["settings"];
    assert_eq!(settings["context"]["compaction"]["mode"], "provider");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_compaction_round_trips_streamed() {
    compacting_loop(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_compaction_round_trips_whole() {
    compacting_loop(false).await;
}
