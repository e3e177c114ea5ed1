//! The Anthropic provider against local HTTP servers: wiremock for canned responses (recorded
//! in the documented SSE / JSON wire format under `tests/fixtures/anthropic_*`) and a raw TCP
//! server for a stream that stalls.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime};

use baton_core::{
    AssistantMessage, ErrorClass, Message, ModelRequest, ResponseMode, ToolCall, ToolEffect,
    ToolSpec, Usage,
};
use baton_model::anthropic::{ANTHROPIC_VERSION, AnthropicConfig, AnthropicProvider, request_body};
use baton_model::{ModelError, ModelProvider, NoObserver, StreamDelta, StreamObserver};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-ant-test-SECRET-0123456789";
const MAX_TOKENS: u32 = 1234;

const STREAM_TOOLS: &str = include_str!("fixtures/anthropic_stream_tools.sse");
const STREAM_OVERLOADED: &str = include_str!("fixtures/anthropic_stream_overloaded.sse");
const STREAM_CUT: &str = include_str!("fixtures/anthropic_stream_cut.sse");
const WHOLE_TOOL_USE: &str = include_str!("fixtures/anthropic_whole_tool_use.json");

struct Recorder(Vec<StreamDelta>);

impl StreamObserver for Recorder {
    fn on_delta(&mut self, delta: &StreamDelta) {
        self.0.push(delta.clone());
    }
}

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

/// A history as baton builds it: system, goal, an answer with two parallel calls, their
/// results, and a note the engine added after them.
fn request(mode: ResponseMode) -> ModelRequest {
    ModelRequest {
        model: "claude-test".into(),
        messages: vec![
            Message::System {
                content: "You are terse.".into(),
            },
            Message::User {
                content: "Goal:\nFind main and read it.".into(),
            },
            Message::Assistant(AssistantMessage {
                content: Some("Looking around.".into()),
                tool_calls: vec![
                    call("toolu_a", "ls", "{}"),
                    call("toolu_b", "grep", r#"{"pattern": "fn main"}"#),
                ],
                ..Default::default()
            }),
            tool_result("toolu_a", "ls", "src/"),
            tool_result("toolu_b", "grep", "src/main.rs:1:fn main() {"),
            Message::User {
                content: "Note: 5 turns left.".into(),
            },
        ],
        tools: vec![
            ToolSpec {
                name: "read_file".into(),
                description: "Read a file".into(),
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
                effect: ToolEffect::ReadOnly,
            },
            ToolSpec {
                name: "grep".into(),
                description: "Search files".into(),
                parameters: json!({"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}}}),
                effect: ToolEffect::ReadOnly,
            },
        ],
        response_mode: mode,
        tool_choice: Default::default(),
        reasoning: Default::default(),
        provider_compaction_at: Default::default(),
    }
}

fn config(server: &MockServer) -> AnthropicConfig {
    AnthropicConfig {
        max_tokens: MAX_TOKENS,
        ..AnthropicConfig::new(server.uri()).with_api_key(KEY)
    }
}

fn provider(server: &MockServer) -> AnthropicProvider {
    AnthropicProvider::new(config(server)).unwrap()
}

async fn server_answering(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

fn sse(body: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body.to_string(), "text/event-stream")
}

fn error_body(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message},
           "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"})
}

async fn fail_with(response: ResponseTemplate, mode: ResponseMode) -> ModelError {
    let server = server_answering(response).await;
    provider(&server)
        .complete(&request(mode), &mut NoObserver)
        .await
        .unwrap_err()
}

/// Every block of a request body that carries `cache_control`, as (where, block).
fn breakpoints(body: &Value) -> Vec<(String, Value)> {
    let mut found = Vec::new();
    let mut look = |at: String, block: &Value| {
        if block.get("cache_control").is_some() {
            assert_eq!(block["cache_control"], json!({"type": "ephemeral"}));
            found.push((at, block.clone()));
        }
    };
    for (i, tool) in body["tools"].as_array().into_iter().flatten().enumerate() {
        look(format!("tools[{i}]"), tool);
    }
    for (i, block) in body["system"].as_array().into_iter().flatten().enumerate() {
        look(format!("system[{i}]"), block);
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
            look(format!("messages[{m}][{b}]"), block);
        }
    }
    found
}

#[tokio::test]
async fn streamed_text_and_two_parallel_tool_calls_with_cache_usage() {
    let server = server_answering(sse(STREAM_TOOLS)).await;
    let mut recorder = Recorder(Vec::new());
    let reply = provider(&server)
        .complete(&request(ResponseMode::Streaming), &mut recorder)
        .await
        .unwrap();

    assert_eq!(
        reply.message.content.as_deref(),
        Some("Reading both files.")
    );
    assert_eq!(
        reply.message.tool_calls,
        vec![
            call(
                "toolu_01A09q90qw90lq917835lq9",
                "read_file",
                r#"{"path": "src/main.rs"}"#
            ),
            call(
                "toolu_01B19r01rx01mr028946mr0",
                "grep",
                r#"{"pattern": "fn main", "path": "src"}"#
            ),
        ]
    );
    // input_tokens + cache writes + cache reads; output from the final message_delta.
    assert_eq!(
        reply.usage,
        Some(Usage {
            prompt_tokens: 25 + 1500 + 3000,
            completion_tokens: 89,
            cached_prompt_tokens: Some(3000),
            cache_write_tokens: Some(1500),
            reasoning_tokens: None,
        })
    );
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_use"));
    assert_eq!(
        reply.served_model.as_deref(),
        Some("claude-sonnet-4-5-20250929")
    );

    let text: String = recorder
        .0
        .iter()
        .filter_map(|d| match d {
            StreamDelta::Text(t) => Some(t.as_str()),
            StreamDelta::Reasoning(_) => None,
            StreamDelta::ToolCall { .. } => None,
        })
        .collect();
    assert_eq!(text, "Reading both files.");
    // Per call: the name first, then each non-empty piece of its input, in order.
    for (index, name, pieces) in [
        (0, "read_file", r#"{"path": "src/main.rs"}"#),
        (1, "grep", r#"{"pattern": "fn main", "path": "src"}"#),
    ] {
        let of_call: Vec<&StreamDelta> = recorder
            .0
            .iter()
            .filter(|d| matches!(d, StreamDelta::ToolCall { index: i, .. } if *i == index))
            .collect();
        assert_eq!(of_call.len(), 5, "{of_call:?}");
        let StreamDelta::ToolCall { name: first, .. } = of_call[0] else {
            unreachable!()
        };
        assert_eq!(first.as_deref(), Some(name));
        let joined: String = of_call
            .iter()
            .map(|d| match d {
                StreamDelta::ToolCall { arguments, .. } => arguments.as_str(),
                StreamDelta::Text(_) | StreamDelta::Reasoning(_) => "",
            })
            .collect();
        assert_eq!(joined, pieces);
    }
}

#[tokio::test]
async fn whole_reply_with_tool_use() {
    let server = server_answering(
        ResponseTemplate::new(200).set_body_raw(WHOLE_TOOL_USE, "application/json"),
    )
    .await;
    let mut recorder = Recorder(Vec::new());
    let reply = provider(&server)
        .complete(&request(ResponseMode::Whole), &mut recorder)
        .await
        .unwrap();
    assert_eq!(
        reply.message.content.as_deref(),
        Some("I'll read the manifest.")
    );
    assert_eq!(
        reply.message.tool_calls,
        vec![call(
            "toolu_01D7FLrfh4GYq7yT1ULFeyMV",
            "read_file",
            r#"{"path":"Cargo.toml"}"#
        )]
    );
    assert_eq!(
        reply.usage,
        Some(Usage {
            prompt_tokens: 40 + 2048,
            completion_tokens: 31,
            cached_prompt_tokens: Some(2048),
            cache_write_tokens: Some(0),
            reasoning_tokens: None,
        })
    );
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_use"));
    // A whole reply is shown to the observer in one piece per part.
    assert_eq!(recorder.0.len(), 2);
}

#[tokio::test]
async fn streaming_request_answered_with_plain_json_is_read_whole() {
    let server = server_answering(
        ResponseTemplate::new(200).set_body_raw(WHOLE_TOOL_USE, "application/json"),
    )
    .await;
    let reply = provider(&server)
        .complete(&request(ResponseMode::Streaming), &mut NoObserver)
        .await
        .unwrap();
    assert_eq!(reply.message.tool_calls.len(), 1);
}

#[tokio::test]
async fn the_server_receives_the_exact_body_bytes_key_and_version() {
    for (mode, answer) in [
        (ResponseMode::Streaming, sse(STREAM_TOOLS)),
        (
            ResponseMode::Whole,
            ResponseTemplate::new(200).set_body_raw(WHOLE_TOOL_USE, "application/json"),
        ),
    ] {
        let server = server_answering(answer).await;
        let req = request(mode);
        provider(&server)
            .complete(&req, &mut NoObserver)
            .await
            .unwrap();

        let received = server.received_requests().await.unwrap();
        assert_eq!(received.len(), 1);
        assert_eq!(received[0].url.path(), "/v1/messages");
        assert_eq!(received[0].body, request_body(&req, MAX_TOKENS).unwrap());
        let header = |name: &str| received[0].headers.get(name).unwrap().to_str().unwrap();
        assert_eq!(header("x-api-key"), KEY);
        assert_eq!(header("anthropic-version"), ANTHROPIC_VERSION);
        assert_eq!(header("anthropic-version"), "2023-06-01");
        assert_eq!(header("content-type"), "application/json");
        assert!(received[0].headers.get("authorization").is_none());
        let sent: Value = serde_json::from_slice(&received[0].body).unwrap();
        assert_eq!(sent["stream"], json!(mode == ResponseMode::Streaming));
        assert_eq!(sent["max_tokens"], json!(MAX_TOKENS));
    }
}

#[tokio::test]
async fn base_url_ending_in_v1_posts_to_the_same_path() {
    let server = server_answering(sse(STREAM_TOOLS)).await;
    let config = AnthropicConfig::new(format!("{}/v1/", server.uri()));
    let provider = AnthropicProvider::new(config).unwrap();
    provider
        .complete(&request(ResponseMode::Streaming), &mut NoObserver)
        .await
        .unwrap();
    let received = server.received_requests().await.unwrap();
    assert_eq!(received[0].url.path(), "/v1/messages");
    // No key configured: no key header at all.
    assert!(received[0].headers.get("x-api-key").is_none());
}

#[test]
fn tool_results_and_note_are_merged_and_roles_alternate() {
    let body: Value = serde_json::from_slice(
        &request_body(&request(ResponseMode::Streaming), MAX_TOKENS).unwrap(),
    )
    .unwrap();
    assert_eq!(body["system"][0]["text"], "You are terse.");
    let messages = body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    for pair in messages.windows(2) {
        assert_ne!(pair[0]["role"], pair[1]["role"]);
    }
    let assistant = messages[1]["content"].as_array().unwrap();
    assert_eq!(
        assistant[0],
        json!({"type": "text", "text": "Looking around."})
    );
    assert_eq!(
        assistant[2],
        json!({"type": "tool_use", "id": "toolu_b", "name": "grep", "input": {"pattern": "fn main"}})
    );
    let last = messages[2]["content"].as_array().unwrap();
    assert_eq!(last.len(), 3);
    assert_eq!(last[0]["type"], "tool_result");
    assert_eq!(last[0]["tool_use_id"], "toolu_a");
    assert_eq!(last[0]["content"], "src/");
    assert_eq!(last[1]["tool_use_id"], "toolu_b");
    assert_eq!(last[2]["type"], "text");
    assert_eq!(last[2]["text"], "Note: 5 turns left.");
}

#[test]
fn cache_breakpoints_are_at_most_four_and_on_the_stable_prefix() {
    let body: Value = serde_json::from_slice(
        &request_body(&request(ResponseMode::Streaming), MAX_TOKENS).unwrap(),
    )
    .unwrap();
    let found: Vec<String> = breakpoints(&body).into_iter().map(|(at, _)| at).collect();
    assert_eq!(
        found,
        ["tools[1]", "system[0]", "messages[0][0]", "messages[2][2]"]
    );

    // As the run goes on, the count stays at four and the previous request's last breakpoint
    // stays marked, byte for byte, so the cache entry it wrote is read.
    let mut req = request(ResponseMode::Streaming);
    let mut previous_last: Option<(String, Value)> = None;
    for turn in 0..12 {
        req.messages.push(Message::Assistant(AssistantMessage {
            content: None,
            tool_calls: vec![call(&format!("t{turn}"), "read_file", r#"{"path":"a"}"#)],
            ..Default::default()
        }));
        req.messages
            .push(tool_result(&format!("t{turn}"), "read_file", "contents"));
        let body: Value = serde_json::from_slice(&request_body(&req, MAX_TOKENS).unwrap()).unwrap();
        let found = breakpoints(&body);
        assert_eq!(found.len(), 4, "{found:?}");
        if let Some(previous) = &previous_last {
            assert!(found.contains(previous), "{previous:?} not in {found:?}");
        }
        previous_last = found.last().cloned();
    }
}

#[tokio::test]
async fn rate_limit_with_retry_after() {
    let err = fail_with(
        ResponseTemplate::new(429)
            .insert_header("retry-after", "7")
            .insert_header("anthropic-ratelimit-requests-remaining", "0")
            .insert_header("anthropic-ratelimit-requests-reset", "2999-01-01T00:00:00Z")
            .set_body_json(error_body(
                "rate_limit_error",
                "Number of requests has exceeded your per-minute rate limit",
            )),
        ResponseMode::Streaming,
    )
    .await;
    assert_eq!(err.class, ErrorClass::RateLimited);
    assert_eq!(err.status, Some(429));
    assert_eq!(err.retry_after, Some(Duration::from_secs(7)));
    assert!(err.to_string().contains("per-minute rate limit"), "{err}");
}

/// `at` as an RFC 3339 UTC timestamp with whole seconds.
fn rfc3339(at: SystemTime) -> String {
    let secs = at.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[tokio::test]
async fn rate_limit_with_only_anthropic_reset_headers() {
    let reset = rfc3339(SystemTime::now() + Duration::from_secs(30));
    let err = fail_with(
        ResponseTemplate::new(429)
            .insert_header("anthropic-ratelimit-requests-remaining", "40")
            .insert_header("anthropic-ratelimit-requests-reset", "2999-01-01T00:00:00Z")
            .insert_header("anthropic-ratelimit-input-tokens-remaining", "0")
            .insert_header("anthropic-ratelimit-input-tokens-reset", reset.as_str())
            .set_body_json(error_body(
                "rate_limit_error",
                "input tokens per minute exceeded",
            )),
        ResponseMode::Whole,
    )
    .await;
    assert_eq!(err.class, ErrorClass::RateLimited);
    let wait = err.retry_after.unwrap();
    assert!(
        wait > Duration::from_secs(20) && wait <= Duration::from_secs(30),
        "{wait:?} for reset {reset}"
    );
}

#[tokio::test]
async fn overloaded_529() {
    let err = fail_with(
        ResponseTemplate::new(529).set_body_json(error_body("overloaded_error", "Overloaded")),
        ResponseMode::Streaming,
    )
    .await;
    assert_eq!((err.class, err.status), (ErrorClass::Overloaded, Some(529)));
    assert!(err.is_retryable());
}

#[tokio::test]
async fn error_event_mid_stream_is_overloaded() {
    let server = server_answering(sse(STREAM_OVERLOADED)).await;
    let mut recorder = Recorder(Vec::new());
    let err = provider(&server)
        .complete(&request(ResponseMode::Streaming), &mut recorder)
        .await
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::Overloaded);
    assert_eq!(err.status, None);
    assert!(err.message.contains("overloaded_error"), "{err}");
    // What arrived before the error was still shown live.
    assert_eq!(recorder.0, vec![StreamDelta::Text("Half an ans".into())]);
}

#[tokio::test]
async fn auth_failure_never_shows_the_key() {
    // A careless proxy that echoes the key back must not leak it through us.
    let err = fail_with(
        ResponseTemplate::new(401).set_body_json(error_body(
            "authentication_error",
            &format!("invalid x-api-key: {KEY}"),
        )),
        ResponseMode::Streaming,
    )
    .await;
    assert_eq!(err.class, ErrorClass::Auth);
    assert_eq!(err.retry_after, None);
    let shown = format!("{err} / {err:?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(shown.contains("invalid x-api-key: [REDACTED]"), "{shown}");
}

#[tokio::test]
async fn prompt_too_long_is_a_context_overflow() {
    let err = fail_with(
        ResponseTemplate::new(400).set_body_json(error_body(
            "invalid_request_error",
            "prompt is too long: 210345 tokens > 200000 maximum",
        )),
        ResponseMode::Streaming,
    )
    .await;
    assert_eq!(err.class, ErrorClass::ContextOverflow);
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn cut_stream_is_transient() {
    let err = fail_with(sse(STREAM_CUT), ResponseMode::Streaming).await;
    assert_eq!(err.class, ErrorClass::Transient);
    assert!(err.message.contains("stream cut"), "{err}");
}

#[tokio::test]
async fn malformed_event_is_a_bad_response() {
    let mut body = STREAM_TOOLS.replace(
        r#"{"type":"content_block_stop","index":1}"#,
        r#"{"type":"content_block_stop","index":1"#,
    );
    assert_ne!(body, STREAM_TOOLS);
    body.push('\n');
    let err = fail_with(sse(&body), ResponseMode::Streaming).await;
    assert_eq!(err.class, ErrorClass::BadResponse);
}

/// A server that answers with SSE headers and the first events, then goes silent without
/// closing.
async fn stalling_server() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let _ = socket.read(&mut buf).await;
        // Everything up to and including the first text delta.
        let end = STREAM_TOOLS.find("text\":\"Reading \"}}\n\n").unwrap() + 20;
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        socket.write_all(head.as_bytes()).await.unwrap();
        socket
            .write_all(&STREAM_TOOLS.as_bytes()[..end])
            .await
            .unwrap();
        socket.flush().await.unwrap();
        // Hold the connection open and say nothing more.
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(socket);
    });
    (format!("http://{address}"), task)
}

#[tokio::test]
async fn stalled_stream_times_out_as_transient() {
    let (base_url, server) = stalling_server().await;
    let config = AnthropicConfig {
        idle_timeout: Duration::from_millis(300),
        ..AnthropicConfig::new(base_url)
    };
    let provider = AnthropicProvider::new(config).unwrap();
    let mut recorder = Recorder(Vec::new());
    let started = std::time::Instant::now();
    let err = provider
        .complete(&request(ResponseMode::Streaming), &mut recorder)
        .await
        .unwrap_err();
    let elapsed = started.elapsed();
    server.abort();
    assert_eq!(err.class, ErrorClass::Transient);
    assert!(err.message.contains("stalled"), "{err}");
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(10),
        "{elapsed:?}"
    );
    assert_eq!(recorder.0, vec![StreamDelta::Text("Reading ".into())]);
}

#[tokio::test]
async fn connection_refused_is_unreachable_retryable_and_keyless() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let provider =
        AnthropicProvider::new(AnthropicConfig::new(format!("http://{address}")).with_api_key(KEY))
            .unwrap();
    let err = provider
        .complete(&request(ResponseMode::Streaming), &mut NoObserver)
        .await
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::Unreachable);
    assert!(err.is_retryable());
    assert_eq!(err.status, None);
    assert!(!format!("{err} {err:?} {provider:?}").contains(KEY));
}
