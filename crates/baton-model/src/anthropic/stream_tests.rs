use super::*;
use crate::NoObserver;
use baton_core::Usage;
use bytes::Bytes;
use futures::Stream;
use futures::StreamExt;
use serde_json::json;
use std::time::Duration;

struct Recorder(Vec<StreamDelta>);

impl StreamObserver for Recorder {
    fn on_delta(&mut self, delta: &StreamDelta) {
        self.0.push(delta.clone());
    }
}

/// Feeds `(event, data)` pairs to a fresh accumulator, stopping at the first error or at
/// `message_stop`, and finishes it.
fn run(events: &[(&str, Value)]) -> (Result<ModelReply, ModelError>, Vec<StreamDelta>) {
    let mut recorder = Recorder(Vec::new());
    let mut acc = StreamAccumulator::default();
    for (name, data) in events {
        match acc.on_event(name, &data.to_string(), &mut recorder) {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => return (Err(e), recorder.0),
        }
    }
    (acc.finish(), recorder.0)
}

fn start(model: &str) -> (&'static str, Value) {
    (
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null,
            "usage": {"input_tokens": 7, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 300, "output_tokens": 1}}}),
    )
}

fn block_start(index: u32, block: Value) -> (&'static str, Value) {
    (
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": block}),
    )
}

fn delta(index: u32, delta: Value) -> (&'static str, Value) {
    (
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index, "delta": delta}),
    )
}

fn text(index: u32, text: &str) -> (&'static str, Value) {
    delta(index, json!({"type": "text_delta", "text": text}))
}

fn json_piece(index: u32, piece: &str) -> (&'static str, Value) {
    delta(
        index,
        json!({"type": "input_json_delta", "partial_json": piece}),
    )
}

fn stop(index: u32) -> (&'static str, Value) {
    (
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    )
}

fn message_delta(stop_reason: &str, output_tokens: u64) -> (&'static str, Value) {
    (
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
               "usage": {"output_tokens": output_tokens}}),
    )
}

fn message_stop() -> (&'static str, Value) {
    ("message_stop", json!({"type": "message_stop"}))
}

#[test]
fn thinking_is_kept_with_its_signature_and_pings_and_unknown_events_do_not_disturb() {
    let (reply, deltas) = run(&[
        start("claude-served"),
        ("ping", json!({"type": "ping"})),
        block_start(0, json!({"type": "thinking", "thinking": ""})),
        delta(
            0,
            json!({"type": "thinking_delta", "thinking": "Let me see"}),
        ),
        delta(0, json!({"type": "signature_delta", "signature": "EqQB"})),
        stop(0),
        block_start(1, json!({"type": "redacted_thinking", "data": "xyz"})),
        stop(1),
        (
            "future_event",
            json!({"type": "future_event", "whatever": [1]}),
        ),
        block_start(2, json!({"type": "text", "text": ""})),
        text(2, "Hello"),
        delta(2, json!({"type": "citations_delta", "citation": {}})),
        text(2, " world"),
        stop(2),
        message_delta("end_turn", 9),
        message_stop(),
    ]);
    let reply = reply.unwrap();
    assert_eq!(reply.message.content.as_deref(), Some("Hello world"));
    assert!(reply.message.tool_calls.is_empty());
    assert_eq!(reply.finish_reason.as_deref(), Some("end_turn"));
    assert_eq!(reply.served_model.as_deref(), Some("claude-served"));
    assert_eq!(
        reply.usage,
        Some(Usage {
            prompt_tokens: 307,
            completion_tokens: 9,
            cached_prompt_tokens: Some(300),
            cache_write_tokens: Some(0),
            reasoning_tokens: None,
        })
    );
    // Both thinking blocks, in order, verbatim: they go back in the next request.
    assert_eq!(
        reply.message.reasoning,
        vec![
            baton_core::Reasoning::Thinking {
                thinking: "Let me see".into(),
                signature: "EqQB".into()
            },
            baton_core::Reasoning::RedactedThinking { data: "xyz".into() },
        ]
    );
    assert_eq!(
        deltas,
        vec![
            StreamDelta::Reasoning("Let me see".into()),
            StreamDelta::Text("Hello".into()),
            StreamDelta::Text(" world".into())
        ]
    );
}

#[test]
fn text_blocks_are_separated_and_tool_input_is_passed_through_raw() {
    let (reply, deltas) = run(&[
        start("m"),
        block_start(0, json!({"type": "text", "text": ""})),
        text(0, "First."),
        stop(0),
        block_start(
            1,
            json!({"type": "tool_use", "id": "toolu_a", "name": "ls", "input": {}}),
        ),
        stop(1),
        block_start(2, json!({"type": "text", "text": ""})),
        text(2, "Second."),
        stop(2),
        block_start(
            3,
            json!({"type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {}}),
        ),
        json_piece(3, ""),
        json_piece(3, "{\"path\": "),
        json_piece(3, "\"a.rs\"}"),
        stop(3),
        message_delta("tool_use", 20),
        message_stop(),
    ]);
    let reply = reply.unwrap();
    assert_eq!(reply.message.content.as_deref(), Some("First.\n\nSecond."));
    assert_eq!(
        reply.message.tool_calls,
        vec![
            ToolCall {
                id: "toolu_a".into(),
                name: "ls".into(),
                arguments: "{}".into()
            },
            ToolCall {
                id: "toolu_b".into(),
                name: "read_file".into(),
                arguments: "{\"path\": \"a.rs\"}".into()
            },
        ]
    );
    assert_eq!(
        deltas,
        vec![
            StreamDelta::Text("First.".into()),
            StreamDelta::ToolCall {
                index: 0,
                name: Some("ls".into()),
                arguments: String::new()
            },
            StreamDelta::Text("\n\nSecond.".into()),
            StreamDelta::ToolCall {
                index: 1,
                name: Some("read_file".into()),
                arguments: String::new()
            },
            StreamDelta::ToolCall {
                index: 1,
                name: None,
                arguments: "{\"path\": ".into()
            },
            StreamDelta::ToolCall {
                index: 1,
                name: None,
                arguments: "\"a.rs\"}".into()
            },
        ]
    );
}

#[test]
fn input_sent_whole_in_the_start_block_is_kept() {
    let (reply, _) = run(&[
        start("m"),
        block_start(
            0,
            json!({"type": "tool_use", "id": "t", "name": "ls", "input": {"dir": "src"}}),
        ),
        stop(0),
        message_delta("tool_use", 3),
        message_stop(),
    ]);
    assert_eq!(
        reply.unwrap().message.tool_calls[0].arguments,
        r#"{"dir":"src"}"#
    );
}

#[test]
fn message_delta_usage_replaces_what_it_reports() {
    let (reply, _) = run(&[
        start("m"),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"},
                   "usage": {"input_tokens": 8, "cache_read_input_tokens": 310, "output_tokens": 50}}),
        ),
        message_stop(),
    ]);
    let reply = reply.unwrap();
    assert_eq!(
        reply.usage,
        Some(Usage {
            prompt_tokens: 318,
            completion_tokens: 50,
            cached_prompt_tokens: Some(310),
            cache_write_tokens: Some(0),
            reasoning_tokens: None,
        })
    );
    assert_eq!(reply.finish_reason.as_deref(), Some("max_tokens"));
    assert_eq!(reply.message, AssistantMessage::default());
}

#[test]
fn cut_stream_is_transient() {
    let (reply, _) = run(&[
        start("m"),
        block_start(
            0,
            json!({"type": "tool_use", "id": "t", "name": "ls", "input": {}}),
        ),
        json_piece(0, "{\"di"),
    ]);
    let err = reply.unwrap_err();
    assert_eq!(err.class, ErrorClass::Transient);
    assert!(err.message.contains("stream cut"), "{err}");
    assert!(err.message.contains("1 tool calls"), "{err}");

    // A stop reason is not enough: only message_stop says the answer is complete.
    let (reply, _) = run(&[start("m"), message_delta("end_turn", 1)]);
    assert_eq!(reply.unwrap_err().class, ErrorClass::Transient);
}

#[test]
fn malformed_streams_are_bad_responses() {
    let cases: Vec<Vec<(&str, Value)>> = vec![
        // A delta for a block that never started.
        vec![start("m"), text(4, "x")],
        // A delta of the wrong kind.
        vec![
            start("m"),
            block_start(0, json!({"type": "text", "text": ""})),
            json_piece(0, "{}"),
        ],
        vec![
            start("m"),
            block_start(
                0,
                json!({"type": "tool_use", "id": "t", "name": "n", "input": {}}),
            ),
            text(0, "x"),
        ],
        // One index started twice.
        vec![
            start("m"),
            block_start(0, json!({"type": "text", "text": ""})),
            block_start(0, json!({"type": "text", "text": ""})),
        ],
        // Required fields missing.
        vec![
            start("m"),
            block_start(0, json!({"type": "tool_use", "id": "t"})),
        ],
        vec![
            start("m"),
            (
                "content_block_delta",
                json!({"type": "content_block_delta"}),
            ),
        ],
        // Complete but never started.
        vec![message_stop()],
    ];
    for events in cases {
        let (reply, _) = run(&events);
        let err = reply.unwrap_err();
        assert_eq!(err.class, ErrorClass::BadResponse, "{events:?}: {err}");
    }
    let mut acc = StreamAccumulator::default();
    let err = acc
        .on_event(
            "message_start",
            "{\"type\": \"message_start\", oops",
            &mut NoObserver,
        )
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::BadResponse);
    assert!(err.message.contains("oops"), "{err}");
}

#[test]
fn error_events_are_classified() {
    let (reply, _) = run(&[
        start("m"),
        block_start(0, json!({"type": "text", "text": ""})),
        text(0, "Half"),
        (
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
        message_stop(),
    ]);
    let err = reply.unwrap_err();
    assert_eq!(err.class, ErrorClass::Overloaded);
    assert!(err.message.contains("Overloaded"), "{err}");

    let mut acc = StreamAccumulator::default();
    let err = acc
        .on_event("error", "upstream connect error", &mut NoObserver)
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::Transient);
    assert!(err.message.contains("upstream connect error"));
}

#[test]
fn blank_data_is_skipped() {
    let mut acc = StreamAccumulator::default();
    assert!(!acc.on_event("ping", "  ", &mut NoObserver).unwrap());
}

fn chunks(parts: Vec<String>) -> impl Stream<Item = Result<Bytes, ModelError>> + Unpin {
    futures::stream::iter(
        parts
            .into_iter()
            .map(|p| Ok(Bytes::from(p)))
            .collect::<Vec<_>>(),
    )
}

fn sse(events: &[(&str, Value)]) -> String {
    events
        .iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect()
}

#[tokio::test]
async fn reads_an_sse_body_split_anywhere_and_stops_at_message_stop() {
    let mut body = sse(&[
        start("m"),
        block_start(0, json!({"type": "text", "text": ""})),
        text(0, "Hi"),
        stop(0),
        message_delta("end_turn", 2),
        message_stop(),
    ]);
    body.push_str("event: text\ndata: not json, and never read\n\n");
    // Split mid-line and mid-UTF-8-free text, as a network would.
    let parts: Vec<String> = body
        .as_bytes()
        .chunks(7)
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .collect();
    let reply = read_stream(
        chunks(parts),
        Duration::from_secs(1),
        1 << 20,
        &mut NoObserver,
    )
    .await
    .unwrap();
    assert_eq!(reply.message.content.as_deref(), Some("Hi"));
}

#[tokio::test(start_paused = true)]
async fn a_silent_server_is_a_stall() {
    let body = sse(&[start("m")]);
    let stalling = chunks(vec![body]).chain(futures::stream::pending());
    let err = read_stream(
        stalling,
        Duration::from_millis(250),
        1 << 20,
        &mut NoObserver,
    )
    .await
    .unwrap_err();
    assert_eq!(err.class, ErrorClass::Transient);
    assert!(err.message.contains("stalled"), "{err}");
}

#[tokio::test]
async fn an_oversized_stream_is_cut_off() {
    let body = sse(&[
        start("m"),
        block_start(0, json!({"type": "text", "text": ""})),
    ]);
    let err = read_stream(
        chunks(vec![body]),
        Duration::from_secs(1),
        64,
        &mut NoObserver,
    )
    .await
    .unwrap_err();
    assert_eq!(err.class, ErrorClass::BadResponse);
    assert!(err.message.contains("64-byte limit"), "{err}");
}
