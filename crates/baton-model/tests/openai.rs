//! The OpenAI-compatible provider against local HTTP servers: wiremock for canned responses and
//! a raw TCP server for a stream that stalls.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use baton_core::{
    AssistantMessage, ErrorClass, Message, ModelRequest, ResponseMode, ToolCall, ToolEffect,
    ToolSpec, Usage,
};
use baton_model::openai::{OpenAiConfig, OpenAiProvider, request_body};
use baton_model::{ModelError, ModelProvider, NoObserver, StreamDelta, StreamObserver};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-test-SECRET-0123456789";

struct Recorder(Vec<StreamDelta>);

impl StreamObserver for Recorder {
    fn on_delta(&mut self, delta: &StreamDelta) {
        self.0.push(delta.clone());
    }
}

fn request(mode: ResponseMode) -> ModelRequest {
    ModelRequest {
        model: "test-model".into(),
        messages: vec![
            Message::System {
                content: "You are terse.".into(),
            },
            Message::User {
                content: "List files, then read one.".into(),
            },
            Message::Assistant(AssistantMessage {
                content: None,
                tool_calls: vec![ToolCall {
                    id: "c0".into(),
                    name: "ls".into(),
                    arguments: "{}".into(),
                }],
                ..Default::default()
            }),
            Message::Tool {
                call_id: "c0".into(),
                name: "ls".into(),
                content: "a.rs b.rs".into(),
            },
        ],
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            effect: ToolEffect::ReadOnly,
        }],
        response_mode: mode,
        tool_choice: Default::default(),
        reasoning: Default::default(),
        provider_compaction_at: Default::default(),
    }
}

fn provider(server: &MockServer) -> OpenAiProvider {
    let config = OpenAiConfig::new(format!("{}/v1/", server.uri())).with_api_key(KEY);
    OpenAiProvider::new(config).unwrap()
}

async fn server_answering(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

fn sse(chunks: &[Value], done: bool) -> String {
    let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    if done {
        body.push_str("data: [DONE]\n\n");
    }
    body
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "x", "object": "chat.completion.chunk", "model": "served-model",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

fn call_piece(index: u32, id: Option<&str>, name: Option<&str>, args: &str) -> Value {
    let mut call = json!({"index": index, "function": {"arguments": args}});
    if let Some(id) = id {
        call["id"] = json!(id);
        call["type"] = json!("function");
    }
    if let Some(name) = name {
        call["function"]["name"] = json!(name);
    }
    chunk(json!({"tool_calls": [call]}), None)
}

async fn fail_with(response: ResponseTemplate, mode: ResponseMode) -> ModelError {
    let server = server_answering(response).await;
    provider(&server)
        .complete(&request(mode), &mut NoObserver)
        .await
        .unwrap_err()
}

#[tokio::test]
async fn streaming_reply_with_text_and_two_split_tool_calls() {
    let chunks = vec![
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": "Reading "}), None),
        chunk(json!({"content": "both."}), None),
        call_piece(0, Some("call_1"), Some("read_file"), ""),
        call_piece(0, None, None, "{\"pa"),
        call_piece(0, None, None, "th\": \"a"),
        call_piece(1, Some("call_2"), Some("read_file"), "{"),
        call_piece(0, None, None, ".rs\"}"),
        call_piece(1, None, None, "\"path\": "),
        call_piece(1, None, None, "\"b.rs\"}"),
        chunk(json!({}), Some("tool_calls")),
        json!({"id": "x", "model": "served-model", "choices": [],
               "usage": {"prompt_tokens": 321, "completion_tokens": 45,
                         "prompt_tokens_details": {"cached_tokens": 256}}}),
    ];
    let mut body = String::from(": ping\n\n");
    body.push_str(&sse(&chunks, true));
    let server =
        server_answering(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")).await;

    let mut recorder = Recorder(Vec::new());
    let reply = provider(&server)
        .complete(&request(ResponseMode::Streaming), &mut recorder)
        .await
        .unwrap();

    assert_eq!(reply.message.content.as_deref(), Some("Reading both."));
    assert_eq!(
        reply.message.tool_calls,
        vec![
            ToolCall {
                id: "call_1".into(),
                name: "read_file".into(),
                arguments: r#"{"path": "a.rs"}"#.into()
            },
            ToolCall {
                id: "call_2".into(),
                name: "read_file".into(),
                arguments: r#"{"path": "b.rs"}"#.into()
            },
        ]
    );
    assert_eq!(
        reply.usage,
        Some(Usage {
            prompt_tokens: 321,
            completion_tokens: 45,
            cached_prompt_tokens: Some(256),
            ..Default::default()
        })
    );
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(reply.served_model.as_deref(), Some("served-model"));
    let text: String = recorder
        .0
        .iter()
        .filter_map(|d| match d {
            StreamDelta::Text(t) => Some(t.as_str()),
            StreamDelta::Reasoning(_) => None,
            StreamDelta::ToolCall { .. } => None,
        })
        .collect();
    assert_eq!(text, "Reading both.");
    assert_eq!(
        recorder
            .0
            .iter()
            .filter(|d| matches!(d, StreamDelta::ToolCall { .. }))
            .count(),
        7
    );
}

#[tokio::test]
async fn the_server_receives_the_exact_body_bytes_and_the_bearer_key() {
    for mode in [ResponseMode::Streaming, ResponseMode::Whole] {
        let body = json!({"model": "m", "choices": [{"index": 0, "message": {"content": "ok"}, "finish_reason": "stop"}]});
        let server = server_answering(ResponseTemplate::new(200).set_body_json(body)).await;
        let req = request(mode);
        provider(&server)
            .complete(&req, &mut NoObserver)
            .await
            .unwrap();

        let received = server.received_requests().await.unwrap();
        assert_eq!(received.len(), 1);
        assert_eq!(received[0].body, request_body(&req).unwrap());
        let auth = received[0]
            .headers
            .get("authorization")
            .unwrap()
            .to_str()
            .unwrap();
        assert_eq!(auth, format!("Bearer {KEY}"));
        assert_eq!(
            received[0].headers.get("content-type").unwrap(),
            "application/json"
        );
        let sent: Value = serde_json::from_slice(&received[0].body).unwrap();
        assert_eq!(sent["stream"], json!(mode == ResponseMode::Streaming));
    }
}

#[tokio::test]
async fn no_authorization_header_without_a_key() {
    let body = json!({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]});
    let server = server_answering(ResponseTemplate::new(200).set_body_json(body)).await;
    let provider = OpenAiProvider::new(OpenAiConfig::new(format!("{}/v1", server.uri()))).unwrap();
    provider
        .complete(&request(ResponseMode::Whole), &mut NoObserver)
        .await
        .unwrap();
    let received = server.received_requests().await.unwrap();
    assert!(received[0].headers.get("authorization").is_none());
}

#[tokio::test]
async fn whole_reply_with_tool_calls_and_usage() {
    let body = json!({
        "id": "chatcmpl-9", "object": "chat.completion", "model": "served-model",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Reading.",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.rs\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": {"path": "b.rs"}}}
            ]}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
                  "prompt_tokens_details": {"cached_tokens": 64}}
    });
    let server = server_answering(ResponseTemplate::new(200).set_body_json(body)).await;
    let mut recorder = Recorder(Vec::new());
    let reply = provider(&server)
        .complete(&request(ResponseMode::Whole), &mut recorder)
        .await
        .unwrap();
    assert_eq!(reply.message.content.as_deref(), Some("Reading."));
    assert_eq!(
        reply.message.tool_calls,
        vec![
            ToolCall {
                id: "call_1".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"a.rs"}"#.into()
            },
            ToolCall {
                id: "call_2".into(),
                name: "read_file".into(),
                arguments: r#"{"path":"b.rs"}"#.into()
            },
        ]
    );
    assert_eq!(
        reply.usage,
        Some(Usage {
            prompt_tokens: 100,
            completion_tokens: 20,
            cached_prompt_tokens: Some(64),
            ..Default::default()
        })
    );
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(reply.served_model.as_deref(), Some("served-model"));
    assert_eq!(recorder.0.len(), 3);
}

#[tokio::test]
async fn streaming_request_answered_with_plain_json_is_read_whole() {
    let body = json!({"model": "m", "choices": [{"message": {"content": "not streamed"}, "finish_reason": "stop"}]});
    let server = server_answering(ResponseTemplate::new(200).set_body_json(body)).await;
    let reply = provider(&server)
        .complete(&request(ResponseMode::Streaming), &mut NoObserver)
        .await
        .unwrap();
    assert_eq!(reply.message.content.as_deref(), Some("not streamed"));
}

#[tokio::test]
async fn rate_limit_with_retry_after() {
    let err = fail_with(
        ResponseTemplate::new(429)
            .insert_header("retry-after", "7")
            .set_body_json(json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}})),
        ResponseMode::Streaming,
    )
    .await;
    assert_eq!(err.class, ErrorClass::RateLimited);
    assert_eq!(err.status, Some(429));
    assert_eq!(err.retry_after, Some(Duration::from_secs(7)));
    assert!(err.to_string().contains("Rate limit reached"), "{err}");
}

#[tokio::test]
async fn insufficient_quota_is_permanent() {
    let err = fail_with(
        ResponseTemplate::new(429).insert_header("retry-after", "7").set_body_json(json!({"error": {
            "message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}})),
        ResponseMode::Whole,
    )
    .await;
    assert_eq!(err.class, ErrorClass::QuotaExhausted);
    assert!(!err.is_retryable());
    assert_eq!(err.retry_after, None);
}

#[tokio::test]
async fn server_errors_are_transient_or_overloaded() {
    let err = fail_with(
        ResponseTemplate::new(500).set_body_string("internal error"),
        ResponseMode::Streaming,
    )
    .await;
    assert_eq!((err.class, err.status), (ErrorClass::Transient, Some(500)));
    assert!(err.message.contains("internal error"));

    let err = fail_with(
        ResponseTemplate::new(529).set_body_json(json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
        ResponseMode::Streaming,
    )
    .await;
    assert_eq!((err.class, err.status), (ErrorClass::Overloaded, Some(529)));
}

#[tokio::test]
async fn auth_failure_never_shows_the_key() {
    // A careless server that echoes the key back must not leak it through us.
    let body = json!({"error": {"message": format!("Incorrect API key provided: {KEY}"), "type": "invalid_request_error", "code": "invalid_api_key"}});
    let err = fail_with(
        ResponseTemplate::new(401).set_body_json(body),
        ResponseMode::Streaming,
    )
    .await;
    assert_eq!(err.class, ErrorClass::Auth);
    let shown = format!("{err} / {err:?}");
    assert!(!shown.contains(KEY), "{shown}");
    assert!(
        shown.contains("Incorrect API key provided: [REDACTED]"),
        "{shown}"
    );
}

#[tokio::test]
async fn context_overflow() {
    let err = fail_with(
        ResponseTemplate::new(400).set_body_json(json!({"error": {
            "message": "This model's maximum context length is 8192 tokens.", "type": "invalid_request_error",
            "code": "context_length_exceeded"}})),
        ResponseMode::Streaming,
    )
    .await;
    assert_eq!(err.class, ErrorClass::ContextOverflow);
}

#[tokio::test]
async fn stream_cut_mid_message_is_transient() {
    let chunks = vec![
        chunk(json!({"content": "Half an ans"}), None),
        call_piece(0, Some("call_1"), Some("read_file"), "{\"pa"),
    ];
    let err = fail_with(
        ResponseTemplate::new(200).set_body_raw(sse(&chunks, false), "text/event-stream"),
        ResponseMode::Streaming,
    )
    .await;
    assert_eq!(err.class, ErrorClass::Transient);
    assert!(err.message.contains("stream cut"), "{err}");
}

#[tokio::test]
async fn malformed_chunk_is_a_bad_response() {
    let mut body = sse(&[chunk(json!({"content": "ok"}), None)], false);
    body.push_str("data: {\"choices\": [oops]}\n\ndata: [DONE]\n\n");
    let err = fail_with(
        ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"),
        ResponseMode::Streaming,
    )
    .await;
    assert_eq!(err.class, ErrorClass::BadResponse);
}

#[tokio::test]
async fn error_object_inside_a_2xx_is_classified() {
    let body = sse(
        &[json!({"error": {"code": 502, "message": "upstream provider failed"}})],
        false,
    );
    let err = fail_with(
        ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"),
        ResponseMode::Streaming,
    )
    .await;
    assert_eq!((err.class, err.status), (ErrorClass::Transient, Some(502)));

    let whole =
        json!({"error": {"message": "prompt is too long", "type": "invalid_request_error"}});
    let err = fail_with(
        ResponseTemplate::new(200).set_body_json(whole),
        ResponseMode::Whole,
    )
    .await;
    assert_eq!(err.class, ErrorClass::ContextOverflow);
}

/// A server that answers with SSE headers and one chunk, then goes silent without closing.
async fn stalling_server() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let _ = socket.read(&mut buf).await;
        let first = format!("data: {}\n\n", chunk(json!({"content": "thinking"}), None));
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        socket.write_all(head.as_bytes()).await.unwrap();
        socket.write_all(first.as_bytes()).await.unwrap();
        socket.flush().await.unwrap();
        // Hold the connection open and say nothing more.
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(socket);
    });
    (format!("http://{address}/v1"), task)
}

#[tokio::test]
async fn stalled_stream_times_out_as_transient() {
    let (base_url, server) = stalling_server().await;
    let config = OpenAiConfig {
        idle_timeout: Duration::from_millis(300),
        ..OpenAiConfig::new(base_url)
    };
    let provider = OpenAiProvider::new(config).unwrap();
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
    // What arrived before the stall was still shown live.
    assert_eq!(recorder.0, vec![StreamDelta::Text("thinking".into())]);
}

#[tokio::test]
async fn connection_refused_is_unreachable_and_retryable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    let provider =
        OpenAiProvider::new(OpenAiConfig::new(format!("http://{address}/v1")).with_api_key(KEY))
            .unwrap();
    let err = provider
        .complete(&request(ResponseMode::Streaming), &mut NoObserver)
        .await
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::Unreachable);
    assert!(err.is_retryable());
    assert_eq!(err.status, None);
    assert!(err.is_retryable());
    assert!(!format!("{err} {err:?}").contains(KEY));
}
