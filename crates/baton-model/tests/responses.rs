//! The Responses provider against local servers: the request body (snapshot), errors classified
//! like the other wires' (HTTP statuses, in-stream `error` and `response.failed`), malformed
//! call arguments kept as sent, an incomplete response, and a stream that stalls.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use baton_core::{
    AssistantMessage, ErrorClass, Message, ModelRequest, Reasoning, ResponseMode, ToolCall,
    ToolEffect, ToolSpec,
};
use baton_model::responses::{ResponsesProvider, request_body};
use baton_model::{Endpoint, ModelProvider, NoObserver};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn request(mode: ResponseMode) -> ModelRequest {
    ModelRequest {
        model: "gpt-5.1-codex".into(),
        messages: vec![
            Message::System {
                content: "You are baton.".into(),
            },
            Message::User {
                content: "Fix the build.".into(),
            },
            Message::Assistant(AssistantMessage {
                content: Some("Reading it.".into()),
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"Cargo.toml"}"#.into(),
                }],
                reasoning: vec![Reasoning::Item {
                    json: r#"{"id":"rs_1","type":"reasoning","status":"completed","summary":[],"encrypted_content":"gAAA+/=="}"#.into(),
                    summary: String::new(),
                }],
            }),
            Message::Tool {
                call_id: "call_1".into(),
                name: "read_file".into(),
                content: "[package]".into(),
            },
        ],
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            effect: ToolEffect::ReadOnly,
        }],
        response_mode: mode,
        tool_choice: Default::default(),
        reasoning: Default::default(),
        provider_compaction_at: None,
    }
}

#[test]
fn the_request_body() {
    let body = String::from_utf8(request_body(&request(ResponseMode::Streaming)).unwrap()).unwrap();
    insta::assert_snapshot!(body);
    // The same request, the same bytes.
    assert_eq!(
        request_body(&request(ResponseMode::Streaming)).unwrap(),
        body.into_bytes()
    );
}

#[test]
fn effort_and_verbosity_go_where_the_responses_api_reads_them() {
    let plain: serde_json::Value =
        serde_json::from_slice(&request_body(&request(ResponseMode::Whole)).unwrap()).unwrap();
    assert!(
        plain.get("text").is_none(),
        "not sent unless configured: {plain}"
    );
    assert!(plain["reasoning"].get("effort").is_none());
    let mut configured = request(ResponseMode::Whole);
    configured.reasoning.effort = Some("high".into());
    configured.reasoning.verbosity = Some(baton_core::Verbosity::Low);
    let body: serde_json::Value =
        serde_json::from_slice(&request_body(&configured).unwrap()).unwrap();
    assert_eq!(body["text"], json!({"verbosity": "low"}));
    assert_eq!(body["reasoning"]["effort"], "high");
}

async fn provider_answering(template: ResponseTemplate) -> (MockServer, ResponsesProvider) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .and(header("authorization", "Bearer sk-test-key"))
        .respond_with(template)
        .mount(&server)
        .await;
    let endpoint = Endpoint::new(format!("{}/v1", server.uri())).with_api_key("sk-test-key");
    (server, ResponsesProvider::new(endpoint).unwrap())
}

#[tokio::test]
async fn errors_are_classified_like_the_other_wires() {
    let json_error = |status: u16, body: serde_json::Value| {
        ResponseTemplate::new(status)
            .insert_header("content-type", "application/json")
            .set_body_json(body)
    };
    let cases = [
        (
            json_error(429, json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}))
                .insert_header("retry-after", "7"),
            ErrorClass::RateLimited,
        ),
        (
            json_error(429, json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}})),
            ErrorClass::QuotaExhausted,
        ),
        (
            json_error(400, json!({"error": {"message": "Your input exceeds the context window of this model.", "type": "invalid_request_error", "code": "context_length_exceeded"}})),
            ErrorClass::ContextOverflow,
        ),
        (
            json_error(401, json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}})),
            ErrorClass::Auth,
        ),
        (
            json_error(500, json!({"error": {"message": "The server had an error", "type": "server_error"}})),
            ErrorClass::Transient,
        ),
    ];
    for (template, class) in cases {
        let (_server, provider) = provider_answering(template).await;
        let err = provider
            .complete(&request(ResponseMode::Whole), &mut NoObserver)
            .await
            .unwrap_err();
        assert_eq!(err.class, class, "{err}");
        if class == ErrorClass::RateLimited {
            assert_eq!(err.retry_after, Some(Duration::from_secs(7)));
        }
        assert!(!err.message.contains("sk-test-key"));
    }
}

#[tokio::test]
async fn in_stream_errors_are_classified() {
    let sse = |data: serde_json::Value| {
        ResponseTemplate::new(200)
            .insert_header("content-type", "text/event-stream")
            .set_body_string(format!(
                "event: {}\ndata: {data}\n\n",
                data["type"].as_str().unwrap()
            ))
    };
    let cases = [
        (
            sse(
                json!({"type": "error", "code": "rate_limit_exceeded", "message": "Rate limit reached", "param": null}),
            ),
            ErrorClass::RateLimited,
        ),
        (
            sse(
                json!({"type": "response.failed", "response": {"id": "r", "status": "failed", "output": [],
                "error": {"code": "context_length_exceeded", "message": "Your input exceeds the context window"}}}),
            ),
            ErrorClass::ContextOverflow,
        ),
        (
            sse(
                json!({"type": "response.failed", "response": {"id": "r", "status": "failed", "output": [],
                "error": {"code": "server_error", "message": "The server had an error"}}}),
            ),
            ErrorClass::Transient,
        ),
    ];
    for (template, class) in cases {
        let (_server, provider) = provider_answering(template).await;
        let err = provider
            .complete(&request(ResponseMode::Streaming), &mut NoObserver)
            .await
            .unwrap_err();
        assert_eq!(err.class, class, "{err}");
    }
}

#[tokio::test]
async fn malformed_arguments_are_kept_as_sent_and_incomplete_is_the_finish_reason() {
    let body = json!({"id": "r", "object": "response", "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"}, "model": "gpt-5.1-codex",
        "output": [{"id": "fc", "type": "function_call", "status": "incomplete", "call_id": "c",
                    "name": "shell", "arguments": "{\"command\": \"cargo te"}],
        "usage": {"input_tokens": 10, "output_tokens": 5}});
    let (_server, provider) =
        provider_answering(ResponseTemplate::new(200).set_body_json(body)).await;
    let reply = provider
        .complete(&request(ResponseMode::Whole), &mut NoObserver)
        .await
        .unwrap();
    // The tool reports the broken JSON to the model; the wire does not repair or drop it.
    assert_eq!(
        reply.message.tool_calls[0].arguments,
        "{\"command\": \"cargo te"
    );
    assert_eq!(
        reply.finish_reason.as_deref(),
        Some("incomplete: max_output_tokens")
    );
}

#[tokio::test]
async fn a_stalled_stream_times_out_as_transient() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 64 * 1024];
        let _ = socket.read(&mut buf).await;
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        let first = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r\",\"status\":\"in_progress\",\"output\":[]}}\n\n";
        socket.write_all(head.as_bytes()).await.unwrap();
        socket.write_all(first.as_bytes()).await.unwrap();
        socket.flush().await.unwrap();
        tokio::time::sleep(Duration::from_secs(30)).await;
    });
    let endpoint = Endpoint {
        idle_timeout: Duration::from_millis(300),
        ..Endpoint::new(format!("http://{address}/v1"))
    };
    let provider = ResponsesProvider::new(endpoint).unwrap();
    let err = provider
        .complete(&request(ResponseMode::Streaming), &mut NoObserver)
        .await
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::Transient, "{err}");
    assert!(err.message.contains("stalled"), "{err}");
    server.abort();
}
