use super::*;
use crate::NoObserver;
use bytes::Bytes;
use futures::Stream;
use futures::StreamExt;
use std::time::Duration;

struct Recorder(Vec<StreamDelta>);

impl StreamObserver for Recorder {
    fn on_delta(&mut self, delta: &StreamDelta) {
        self.0.push(delta.clone());
    }
}

fn sse(chunks: &[Value]) -> String {
    chunks.iter().map(|c| format!("data: {c}\n\n")).collect()
}

/// The body split into pieces of `size` bytes, to exercise events spanning network chunks.
fn body_in_pieces(
    body: &[u8],
    size: usize,
) -> impl Stream<Item = Result<Bytes, ModelError>> + Unpin {
    let pieces: Vec<_> = body
        .chunks(size)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    futures::stream::iter(pieces)
}

async fn read(
    body: &[u8],
    size: usize,
    observer: &mut dyn StreamObserver,
) -> Result<ModelReply, ModelError> {
    read_stream(
        body_in_pieces(body, size),
        Duration::from_secs(5),
        1 << 20,
        observer,
    )
    .await
}

fn delta(value: Value) -> Value {
    serde_json::json!({"model": "m-1", "choices": [{"index": 0, "delta": value, "finish_reason": null}]})
}

fn tool_piece(index: u32, id: Option<&str>, name: Option<&str>, args: &str) -> Value {
    let mut function = serde_json::json!({"arguments": args});
    if let Some(name) = name {
        function["name"] = name.into();
    }
    let mut call = serde_json::json!({"index": index, "type": "function", "function": function});
    if let Some(id) = id {
        call["id"] = id.into();
    }
    delta(serde_json::json!({"tool_calls": [call]}))
}

fn full_stream() -> String {
    let mut chunks = vec![
        delta(serde_json::json!({"role": "assistant", "content": ""})),
        delta(serde_json::json!({"content": "Let me "})),
        delta(serde_json::json!({"content": "look. ✓"})),
        tool_piece(0, Some("call_a"), Some("read_file"), ""),
        tool_piece(0, None, None, "{\"pa"),
        tool_piece(1, Some("call_b"), Some("shell"), "{\"command\""),
        tool_piece(0, None, None, "th\":\"a.rs\"}"),
        tool_piece(1, None, None, ":\"ls\"}"),
    ];
    chunks.push(serde_json::json!({"model": "m-1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}));
    chunks.push(serde_json::json!({"model": "m-1", "choices": [], "usage": {
        "prompt_tokens": 50, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 32}}}));
    let mut body = String::from(": keepalive comment\n\n");
    body.push_str(&sse(&chunks));
    body.push_str("data: [DONE]\n\n");
    body
}

#[tokio::test]
async fn accumulates_text_tool_calls_and_usage_whatever_the_chunking() {
    let body = full_stream();
    for size in [1, 2, 3, 7, 64, body.len()] {
        let mut rec = Recorder(Vec::new());
        let reply = read(body.as_bytes(), size, &mut rec).await.unwrap();
        assert_eq!(
            reply.message.content.as_deref(),
            Some("Let me look. ✓"),
            "size {size}"
        );
        assert_eq!(
            reply.message.tool_calls,
            vec![
                ToolCall {
                    id: "call_a".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"a.rs"}"#.into()
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "shell".into(),
                    arguments: r#"{"command":"ls"}"#.into()
                },
            ]
        );
        assert_eq!(
            reply.usage,
            Some(Usage {
                prompt_tokens: 50,
                completion_tokens: 9,
                cached_prompt_tokens: Some(32),
                ..Default::default()
            })
        );
        assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(reply.served_model.as_deref(), Some("m-1"));
        assert_eq!(
            rec.0,
            vec![
                StreamDelta::Text("Let me ".into()),
                StreamDelta::Text("look. ✓".into()),
                StreamDelta::ToolCall {
                    index: 0,
                    name: Some("read_file".into()),
                    arguments: String::new()
                },
                StreamDelta::ToolCall {
                    index: 0,
                    name: None,
                    arguments: "{\"pa".into()
                },
                StreamDelta::ToolCall {
                    index: 1,
                    name: Some("shell".into()),
                    arguments: "{\"command\"".into()
                },
                StreamDelta::ToolCall {
                    index: 0,
                    name: None,
                    arguments: "th\":\"a.rs\"}".into()
                },
                StreamDelta::ToolCall {
                    index: 1,
                    name: None,
                    arguments: ":\"ls\"}".into()
                },
            ]
        );
    }
}

#[tokio::test]
async fn stops_at_done_and_ignores_what_follows() {
    let mut body = sse(&[delta(serde_json::json!({"content": "hi"}))]);
    body.push_str("data: [DONE]\n\ndata: {not json\n\n");
    let reply = read(body.as_bytes(), 5, &mut NoObserver).await.unwrap();
    assert_eq!(reply.message.content.as_deref(), Some("hi"));
    assert_eq!(reply.finish_reason, None);
}

#[tokio::test]
async fn finish_reason_without_done_is_complete_but_neither_is_a_cut() {
    let finished = sse(&[
        delta(serde_json::json!({"content": "hi"})),
        serde_json::json!({"choices": [{"delta": {}, "finish_reason": "stop"}]}),
    ]);
    let reply = read(finished.as_bytes(), 4, &mut NoObserver).await.unwrap();
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    assert_eq!(reply.usage, None, "no usage chunk: unreported, not zero");

    let cut = sse(&[
        delta(serde_json::json!({"content": "hi"})),
        tool_piece(0, Some("c"), Some("shell"), "{\"co"),
    ]);
    let err = read(cut.as_bytes(), 4, &mut NoObserver).await.unwrap_err();
    assert_eq!(err.class, ErrorClass::Transient);
    assert!(err.message.contains("stream cut"), "{err}");
    assert!(err.message.contains("1 tool calls"), "{err}");

    let err = read(b"", 4, &mut NoObserver).await.unwrap_err();
    assert_eq!(err.class, ErrorClass::Transient);
}

#[tokio::test]
async fn done_without_any_choice_is_a_bad_response() {
    let err = read(b"data: [DONE]\n\n", 100, &mut NoObserver)
        .await
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::BadResponse);
}

#[tokio::test]
async fn malformed_chunk_is_a_bad_response() {
    let mut body = sse(&[delta(serde_json::json!({"content": "hi"}))]);
    body.push_str("data: {\"choices\": [{\"delta\": \n\ndata: [DONE]\n\n");
    let err = read(body.as_bytes(), 100, &mut NoObserver)
        .await
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::BadResponse);
    assert!(err.message.contains("unparseable stream chunk"), "{err}");
}

#[tokio::test]
async fn invalid_utf8_is_an_error_not_a_panic() {
    let mut body = b"data: {\"choices\":[{\"delta\":{\"content\":\"a".to_vec();
    body.extend_from_slice(b"\xff\xfe");
    body.extend_from_slice(b"\"}}]}\n\ndata: [DONE]\n\n");
    for size in [1, 3, body.len()] {
        let err = read(&body, size, &mut NoObserver).await.unwrap_err();
        assert_eq!(err.class, ErrorClass::BadResponse, "size {size}: {err}");
    }
}

#[tokio::test]
async fn in_band_errors_are_classified() {
    let body = sse(&[
        delta(serde_json::json!({"content": "hi"})),
        serde_json::json!({"error": {"code": 429, "message": "rate limited upstream"}}),
    ]);
    let err = read(body.as_bytes(), 100, &mut NoObserver)
        .await
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::RateLimited);
    assert_eq!(err.status, Some(429));

    let body =
        "event: error\ndata: {\"error\":{\"type\":\"overloaded_error\",\"message\":\"busy\"}}\n\n";
    let err = read(body.as_bytes(), 100, &mut NoObserver)
        .await
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::Overloaded);

    let body = "event: error\ndata: plain words\n\n";
    let err = read(body.as_bytes(), 100, &mut NoObserver)
        .await
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::Transient);
    assert!(err.message.contains("plain words"));
}

#[tokio::test]
async fn lenient_tool_call_shapes() {
    let body = sse(&[
        // No index: each call arrives whole with its own id.
        delta(
            serde_json::json!({"tool_calls": [{"id": "x1", "function": {"name": "a", "arguments": {"k": 1}}}]}),
        ),
        delta(
            serde_json::json!({"tool_calls": [{"id": "x2", "function": {"name": "b", "arguments": "{}"}}]}),
        ),
        // No index and no id: continues the latest call.
        delta(serde_json::json!({"tool_calls": [{"function": {"arguments": " "}}]})),
        // No id at all for a new indexed call.
        delta(
            serde_json::json!({"tool_calls": [{"index": 7, "function": {"name": "c", "arguments": null}}]}),
        ),
        // A repeated name does not duplicate it.
        delta(
            serde_json::json!({"tool_calls": [{"index": 7, "function": {"name": "c", "arguments": "[]"}}]}),
        ),
        serde_json::json!({"choices": [{"delta": {"content": null}, "finish_reason": "tool_calls"}]}),
    ]);
    let reply = read(body.as_bytes(), 9, &mut NoObserver).await.unwrap();
    assert_eq!(
        reply.message.tool_calls,
        vec![
            ToolCall {
                id: "x1".into(),
                name: "a".into(),
                arguments: r#"{"k":1}"#.into()
            },
            ToolCall {
                id: "x2".into(),
                name: "b".into(),
                arguments: "{} ".into()
            },
            ToolCall {
                id: String::new(),
                name: "c".into(),
                arguments: "[]".into()
            },
        ]
    );
    assert_eq!(reply.message.content, None);
}

#[tokio::test]
async fn other_choices_and_multiline_data_are_handled() {
    let body = "data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"other\"}},\ndata: {\"index\":0,\"delta\":{\"content\":\"mine\"}}]}\n\ndata: [DONE]\n\n";
    let reply = read(body.as_bytes(), 10, &mut NoObserver).await.unwrap();
    assert_eq!(reply.message.content.as_deref(), Some("mine"));
}

#[tokio::test(start_paused = true)]
async fn stall_mid_stream_is_transient() {
    let first = sse(&[delta(serde_json::json!({"content": "hi"}))]);
    let body =
        futures::stream::iter(vec![Ok(Bytes::from(first))]).chain(futures::stream::pending());
    let err = read_stream(body, Duration::from_millis(300), 1 << 20, &mut NoObserver)
        .await
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::Transient);
    assert!(err.message.contains("stalled"));
}

#[tokio::test]
async fn oversized_stream_is_cut_off() {
    let body = sse(&vec![
        delta(serde_json::json!({"content": "x".repeat(100)}));
        50
    ]);
    let err = read_stream(
        body_in_pieces(body.as_bytes(), 64),
        Duration::from_secs(1),
        1000,
        &mut NoObserver,
    )
    .await
    .unwrap_err();
    assert_eq!(err.class, ErrorClass::BadResponse);
    assert!(err.message.contains("limit"));
}

#[tokio::test]
async fn parallel_calls_that_all_claim_index_zero_stay_separate() {
    let body = sse(&[
        tool_piece(0, Some("a"), Some("read_file"), "{\"path\":\"x\"}"),
        tool_piece(0, Some("b"), Some("read_file"), "{\"path\":\"y\"}"),
        serde_json::json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
    ]);
    let reply = read(body.as_bytes(), 7, &mut NoObserver).await.unwrap();
    let calls = &reply.message.tool_calls;
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(
        (calls[0].id.as_str(), calls[0].arguments.as_str()),
        ("a", "{\"path\":\"x\"}")
    );
    assert_eq!(
        (calls[1].id.as_str(), calls[1].arguments.as_str()),
        ("b", "{\"path\":\"y\"}")
    );
}

#[tokio::test]
async fn done_without_a_finish_reason_does_not_commit_a_tool_call() {
    let body = format!(
        "{}data: [DONE]\n\n",
        sse(&[tool_piece(0, Some("c"), Some("shell"), "{\"comm")])
    );
    let err = read(body.as_bytes(), 5, &mut NoObserver).await.unwrap_err();
    assert_eq!(err.class, ErrorClass::Transient);
    assert!(err.message.contains("1 tool calls"), "{err}");
}
