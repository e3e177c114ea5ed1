#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 17: reasoning that survives a tool loop on Chat Completions. DeepSeek's thinking mode
//! (Kimi's and GLM's too) answers 400 — "The `reasoning_content` in the thinking mode must be
//! passed back to the API." — when an assistant message of a tool-calling stretch comes back
//! without the `reasoning_content` it was answered with. The server here enforces exactly that
//! rule, byte for byte, and the real binary drives a tool loop against it, streamed and whole.

mod support;

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use support::*;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Reasoning with what a careless round trip would change: quotes, a newline, non-ASCII, an
/// escaped-looking sequence and trailing spaces.
const REASONING: [&str; 2] = [
    "The goal wants \"a.txt\" with 1.\nWrite it — then check.  \\n stays literal ",
    "Written. Nothing left but to finish: 完成.",
];

const MISSING: &str = r#"{"error":{"message":"The `reasoning_content` in the thinking mode must be passed back to the API.","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}"#;

struct DeepSeekLike {
    received: Arc<Mutex<Vec<Value>>>,
}

impl DeepSeekLike {
    fn call(turn: usize) -> Value {
        match turn {
            0 => json!({"id": "call_0", "type": "function", "function": {"name": "write_file",
                  "arguments": "{\"path\":\"a.txt\",\"content\":\"1\\n\"}"}}),
            _ => json!({"id": "call_1", "type": "function", "function": {"name": "finish",
                  "arguments": "{\"summary\":\"a.txt written\"}"}}),
        }
    }
}

impl Respond for DeepSeekLike {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        self.received.lock().unwrap().push(body.clone());
        let assistants: Vec<&Value> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .collect();
        // Every earlier answer made a tool call: each must carry its reasoning back, exactly.
        for (i, message) in assistants.iter().enumerate() {
            if message["reasoning_content"].as_str() != Some(REASONING[i]) {
                return ResponseTemplate::new(400)
                    .insert_header("content-type", "application/json")
                    .set_body_string(MISSING);
            }
        }
        let turn = assistants.len();
        let usage = json!({"prompt_tokens": 200, "completion_tokens": 90, "total_tokens": 290,
            "completion_tokens_details": {"reasoning_tokens": 60}});
        if body["stream"] == true {
            // Reasoning first, in pieces split inside words, then the call.
            let text = REASONING[turn];
            let cut = text.char_indices().nth(9).map_or(text.len(), |(i, _)| i);
            let mut sse = String::new();
            for piece in [&text[..cut], &text[cut..]] {
                let chunk = json!({"model": "deepseek-v4-flash", "choices": [{"index": 0,
                    "delta": {"role": "assistant", "content": null, "reasoning_content": piece}}]});
                sse.push_str(&format!("data: {chunk}\n\n"));
            }
            let mut call = Self::call(turn);
            call["index"] = json!(0);
            let chunk = json!({"model": "deepseek-v4-flash", "choices": [{"index": 0,
                "delta": {"tool_calls": [call]}, "finish_reason": "tool_calls"}]});
            sse.push_str(&format!("data: {chunk}\n\n"));
            let chunk = json!({"model": "deepseek-v4-flash", "choices": [], "usage": usage});
            sse.push_str(&format!("data: {chunk}\n\ndata: [DONE]\n\n"));
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(sse)
        } else {
            ResponseTemplate::new(200).set_body_json(json!({
                "model": "deepseek-v4-flash",
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                    "role": "assistant", "content": "", "reasoning_content": REASONING[turn],
                    "tool_calls": [Self::call(turn)]}}],
                "usage": usage,
            }))
        }
    }
}

async fn deepseek_like() -> (MockServer, Arc<Mutex<Vec<Value>>>) {
    let server = MockServer::start().await;
    let received = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(DeepSeekLike {
            received: received.clone(),
        })
        .mount(&server)
        .await;
    (server, received)
}

async fn tool_loop(streamed: bool) {
    let (server, received) = deepseek_like().await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.uri());
    let mut args = vec!["run", "--base-url", &base, "--model", "deepseek-v4-flash"];
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

    // The second request carried the first answer's reasoning, byte for byte.
    let received = received.lock().unwrap().clone();
    assert_eq!(received.len(), 2, "no request was refused and retried");
    let assistant = received[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap()
        .clone();
    assert_eq!(assistant["reasoning_content"], REASONING[0]);
    assert_eq!(assistant["tool_calls"][0]["id"], "call_0");
    assert!(assistant.get("reasoning").is_none(), "{assistant}");

    // Journaled verbatim with the answer; shown abridged; reasoning tokens counted.
    let events = journal(ws.path(), home.path());
    let finished = of_type(&events, "model_call_finished");
    assert_eq!(
        finished[0]["message"]["reasoning"],
        json!([{"type": "text", "text": REASONING[0], "field": "reasoning_content"}])
    );
    assert!(stderr.contains("thinks: The goal wants"), "{stderr}");
    let logs = baton_blocking(ws.path(), home.path(), &["logs", "--full"]).await;
    let logs = String::from_utf8_lossy(&logs.stdout);
    assert!(
        logs.contains("reasoning:") && logs.contains("完成"),
        "{logs}"
    );
    let status = baton_blocking(ws.path(), home.path(), &["status", "--json"]).await;
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(status["run"]["tokens"]["reasoning"], 120);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_reasoning_content_goes_back_in_the_tool_loop() {
    tool_loop(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_reasoning_content_goes_back_in_the_tool_loop() {
    tool_loop(false).await;
}

/// `reasoning_history = "drop"` is for servers that reject the field: against this server the
/// second request is refused, so the rule is really what decides what is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drop_rule_sends_no_reasoning_back() {
    let (server, received) = deepseek_like().await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".baton")).unwrap();
    std::fs::write(
        ws.path().join(".baton/config.toml"),
        "reasoning_history = \"drop\"\nreasoning_effort = \"high\"\nthinking = \"enabled\"\n",
    )
    .unwrap();
    trust_workspace(ws.path(), home.path());
    let base = format!("{}/v1", server.uri());
    let out = baton_blocking(
        ws.path(),
        home.path(),
        &[
            "run",
            "--base-url",
            &base,
            "--model",
            "deepseek-v4-flash",
            "--no-stream",
            "x",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(3), "paused: the server refused");
    let received = received.lock().unwrap().clone();
    assert_eq!(received[0]["reasoning_effort"], "high");
    assert_eq!(received[0]["thinking"], json!({"type": "enabled"}));
    let second = &received[1]["messages"];
    assert!(
        !second.to_string().contains("reasoning_content"),
        "{second}"
    );
    let events = journal(ws.path(), home.path());
    let paused = of_type(&events, "run_paused");
    assert_eq!(paused[0]["reason"], "model_rejected");
    assert!(
        paused[0]["detail"]
            .as_str()
            .unwrap()
            .contains("must be passed back"),
        "{}",
        paused[0]["detail"]
    );
}

/// Thinking blocks as Anthropic signs them: the signature is opaque and checked by the API.
const THINKING: [(&str, &str); 2] = [
    (
        "I should write \"a.txt\" first.\n",
        "EqQBCkgIARABGAIiQL2Tk+0/sig==",
    ),
    ("Done; finish now.", "ErUBCkYIBxgCIkD/second+sig=="),
];

const THINKING_MISSING: &str = r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `tool_use`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns."}}"#;

/// An Anthropic-style server that refuses a request whose assistant turns do not start with
/// the thinking block (text and signature) they were answered with.
/// Each request's body and its `anthropic-beta` header.
type Received = Arc<Mutex<Vec<(Value, Option<String>)>>>;

struct ClaudeLike {
    received: Received,
}

impl ClaudeLike {
    fn tool(turn: usize) -> Value {
        match turn {
            0 => json!({"type": "tool_use", "id": "toolu_0", "name": "write_file",
                        "input": {"path": "a.txt", "content": "1\n"}}),
            _ => json!({"type": "tool_use", "id": "toolu_1", "name": "finish",
                        "input": {"summary": "a.txt written"}}),
        }
    }
}

impl Respond for ClaudeLike {
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
        for (i, message) in assistants.iter().enumerate() {
            let first = &message["content"][0];
            let (thinking, signature) = THINKING[i];
            if first["type"] != "thinking"
                || first["thinking"] != thinking
                || first["signature"] != signature
            {
                return ResponseTemplate::new(400)
                    .insert_header("content-type", "application/json")
                    .set_body_string(THINKING_MISSING);
            }
        }
        let turn = assistants.len();
        let (thinking, signature) = THINKING[turn];
        let usage = json!({"input_tokens": 100, "output_tokens": 70});
        if body["stream"] == true {
            let event = |kind: &str, data: Value| format!("event: {kind}\ndata: {data}\n\n");
            let mut sse = event(
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg", "type": "message",
                    "role": "assistant", "model": "claude-sonnet-4-5", "content": [],
                    "usage": {"input_tokens": 100, "output_tokens": 1}}}),
            );
            sse += &event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            );
            let cut = thinking.char_indices().nth(7).map_or(0, |(i, _)| i);
            for piece in [&thinking[..cut], &thinking[cut..]] {
                sse += &event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "thinking_delta", "thinking": piece}}),
                );
            }
            sse += &event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "signature_delta", "signature": signature}}),
            );
            sse += &event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            );
            let mut tool = Self::tool(turn);
            let input = tool["input"].to_string();
            tool["input"] = json!({});
            sse += &event(
                "content_block_start",
                json!({"type": "content_block_start", "index": 1, "content_block": tool}),
            );
            sse += &event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1,
                       "delta": {"type": "input_json_delta", "partial_json": input}}),
            );
            sse += &event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 1}),
            );
            sse += &event(
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                       "usage": {"output_tokens": 70}}),
            );
            sse += &event("message_stop", json!({"type": "message_stop"}));
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(sse)
        } else {
            ResponseTemplate::new(200).set_body_json(json!({
                "id": "msg", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                "content": [{"type": "thinking", "thinking": thinking, "signature": signature},
                            Self::tool(turn)],
                "stop_reason": "tool_use", "usage": usage,
            }))
        }
    }
}

async fn claude_loop(streamed: bool, config: &str) -> Vec<(Value, Option<String>)> {
    let server = MockServer::start().await;
    let received = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ClaudeLike {
            received: received.clone(),
        })
        .mount(&server)
        .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    write_user_config(home.path(), config);
    let uri = server.uri();
    let mut args = vec![
        "run",
        "--provider",
        "anthropic",
        "--base-url",
        &uri,
        "--model",
        "claude-sonnet-4-5",
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
    let events = journal(ws.path(), home.path());
    let finished = of_type(&events, "model_call_finished");
    assert_eq!(
        finished[0]["message"]["reasoning"],
        json!([{"type": "thinking", "thinking": THINKING[0].0, "signature": THINKING[0].1}])
    );
    assert!(stderr.contains("thinks: I should write"), "{stderr}");
    let received = received.lock().unwrap().clone();
    assert_eq!(received.len(), 2, "no request was refused");
    // The second request returned the thinking block verbatim, before the tool_use.
    let assistant = received[1].0["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap()
        .clone();
    assert_eq!(
        assistant["content"][0],
        json!({"type": "thinking", "thinking": THINKING[0].0, "signature": THINKING[0].1})
    );
    assert_eq!(assistant["content"][1]["type"], "tool_use");
    received
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_thinking_blocks_go_back_verbatim_streamed() {
    let received = claude_loop(true, "thinking = \"enabled\"\nthinking_budget = 16000\n").await;
    let body = &received[0].0;
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 16000})
    );
    // The budget must stay below max_tokens: room for the answer is added on top.
    assert!(body["max_tokens"].as_u64().unwrap() > 16000, "{body}");
    // Budgeted thinking between tool calls needs the interleaved-thinking beta.
    assert_eq!(
        received[0].1.as_deref(),
        Some("interleaved-thinking-2025-05-14")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_adaptive_thinking_with_effort_whole() {
    let received = claude_loop(false, "thinking = \"adaptive\"\neffort = \"high\"\n").await;
    let body = &received[0].0;
    assert_eq!(body["thinking"], json!({"type": "adaptive"}));
    assert_eq!(body["output_config"], json!({"effort": "high"}));
    assert_eq!(received[0].1, None, "adaptive thinking needs no beta");
    // The cache breakpoints still sit on the stable prefix.
    assert_eq!(
        body["system"].as_array().unwrap().last().unwrap()["cache_control"],
        json!({"type": "ephemeral"})
    );
}

#[test]
fn a_thinking_budget_below_the_minimum_is_refused_before_anything_starts() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    write_user_config(
        home.path(),
        "thinking = \"enabled\"\nthinking_budget = 500\n",
    );
    let out = baton(ws.path(), home.path())
        .args([
            "run",
            "--provider",
            "anthropic",
            "--model",
            "claude-sonnet-4-5",
            "x",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("thinking_budget = 500 is too small"),
        "{stderr}"
    );
    assert!(!journal_path(ws.path(), home.path()).exists());
}

/// The reasoning flags do what the config keys do, and a supervised run's agent process gets
/// them too (the run here is supervised: the default).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_flags_reach_the_request() {
    let (server, received) = deepseek_like().await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.uri());
    let out = baton_blocking(
        ws.path(),
        home.path(),
        &[
            "run",
            "--base-url",
            &base,
            "--model",
            "deepseek-v4-flash",
            "--no-stream",
            "--thinking",
            "off",
            "--reasoning-effort",
            "max",
            "Write a.txt",
        ],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = &received.lock().unwrap()[0];
    assert_eq!(first["thinking"], json!({"type": "disabled"}));
    assert_eq!(first["reasoning_effort"], "max");
    let bad = baton(ws.path(), home.path())
        .args(["run", "--thinking", "maybe", "x"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("expected `adaptive`, `enabled` or `off`")
    );
}

/// `[context] compaction = "provider"` on Anthropic: server-side context editing
/// (`clear_tool_uses_20250919` at the profile's threshold, with its beta header); the request
/// still carries the whole history, and the thinking blocks still go back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_context_editing_is_asked_for_with_provider_compaction() {
    let received = claude_loop(
        false,
        "thinking = \"adaptive\"\n[context]\ncompaction = \"provider\"\n",
    )
    .await;
    for (body, beta) in &received {
        assert_eq!(
            body["context_management"],
            json!({"edits": [{"type": "clear_tool_uses_20250919",
                              "trigger": {"type": "input_tokens", "value": 160000}}]})
        );
        assert_eq!(beta.as_deref(), Some("context-management-2025-06-27"));
    }
}
