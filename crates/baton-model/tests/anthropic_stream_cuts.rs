//! A streamed Messages API response cut anywhere, in any chunking, or with garbage inserted:
//! the reader must return the complete reply or a classified error — never a panic, and never a
//! reply with half a text or half a tool call. The Anthropic twin of `stream_cuts.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use baton_core::{ErrorClass, ModelReply, ToolCall, Usage};
use baton_model::anthropic::read_stream;
use baton_model::{ModelError, StreamDelta, StreamObserver};
use bytes::Bytes;
use proptest::prelude::*;
use serde_json::{Value, json};

const MODEL: &str = "claude-sonnet-4-5-20250929";
const TEXT: &str = "I'll read the file first — then list the directory. ✓ Ünïcödé 🦀 done";
const ARGS_A: &str = r#"{"path": "src/main.rs", "start_line": 1, "end_line": 200}"#;
const ARGS_B: &str = r#"{"command": "grep -rn \"fn main\" src — ünï 🦀 && cargo test -p baton-model -- --nocapture", "timeout_secs": 120}"#;

/// A complete SSE body and the byte offsets that matter for a cut.
struct Body {
    bytes: Vec<u8>,
    /// Start of the `message_delta` event (stop reason, final usage).
    delta_start: usize,
    /// End of the `message_stop` event: from here on the reply is complete.
    stop_end: usize,
    /// Every offset at which an event ends.
    boundaries: Vec<usize>,
}

fn text_delta(text: &str) -> Value {
    json!({"type": "content_block_delta", "index": 0,
           "delta": {"type": "text_delta", "text": text}})
}

fn json_delta(index: u32, piece: &str) -> Value {
    json!({"type": "content_block_delta", "index": index,
           "delta": {"type": "input_json_delta", "partial_json": piece}})
}

fn block_stop(index: u32) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

fn ping() -> Value {
    json!({"type": "ping"})
}

/// `text` in pieces of `size` characters (never splitting a character: the server sends JSON
/// strings, which are whole characters).
fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// A `tool_use` block as the API streams it: the start with an empty `input`, an empty first
/// `partial_json`, the JSON in pieces of `size` characters, the stop.
fn tool_block(index: u32, id: &str, name: &str, args: &str, size: usize) -> Vec<Value> {
    let mut out = vec![
        json!({"type": "content_block_start", "index": index,
               "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        json_delta(index, ""),
    ];
    out.extend(pieces(args, size).iter().map(|p| json_delta(index, p)));
    out.push(block_stop(index));
    out
}

/// The body as the Messages API streams it: `message_start` with cache usage, a ping, a text
/// block in pieces, two tool calls whose input arrives in many pieces (a ping between them),
/// `message_delta` with the stop reason and output tokens, `message_stop`.
fn body(newline: &str) -> Body {
    let start = json!({"type": "message_start", "message": {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant",
        "model": MODEL, "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 412, "cache_creation_input_tokens": 1500,
                  "cache_read_input_tokens": 3000,
                  "cache_creation": {"ephemeral_5m_input_tokens": 1500,
                                     "ephemeral_1h_input_tokens": 0},
                  "output_tokens": 1, "service_tier": "standard"}}});
    let mut events = vec![start, ping()];
    events.push(json!({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "text", "text": ""}}));
    events.extend(pieces(TEXT, 4).iter().map(|t| text_delta(t)));
    events.push(block_stop(0));
    events.extend(tool_block(
        1,
        "toolu_01A09q90qw90lq917835lq9",
        "read_file",
        ARGS_A,
        3,
    ));
    events.push(ping());
    events.extend(tool_block(
        2,
        "toolu_01B19r01rx01mr028946mr0",
        "shell",
        ARGS_B,
        5,
    ));
    let message_delta = json!({"type": "message_delta",
        "delta": {"stop_reason": "tool_use", "stop_sequence": null},
        "usage": {"output_tokens": 87}});
    let message_stop = json!({"type": "message_stop"});

    let mut bytes = Vec::new();
    let mut boundaries = Vec::new();
    let mut push = |bytes: &mut Vec<u8>, event: &Value| {
        let kind = event["type"].as_str().unwrap();
        let text = format!("event: {kind}{newline}data: {event}{newline}{newline}");
        bytes.extend_from_slice(text.as_bytes());
        boundaries.push(bytes.len());
        bytes.len()
    };
    for event in &events {
        push(&mut bytes, event);
    }
    let delta_start = bytes.len();
    push(&mut bytes, &message_delta);
    let stop_end = push(&mut bytes, &message_stop);
    Body {
        bytes,
        delta_start,
        stop_end,
        boundaries,
    }
}

fn expected_calls() -> Vec<ToolCall> {
    vec![
        ToolCall {
            id: "toolu_01A09q90qw90lq917835lq9".into(),
            name: "read_file".into(),
            arguments: ARGS_A.into(),
        },
        ToolCall {
            id: "toolu_01B19r01rx01mr028946mr0".into(),
            name: "shell".into(),
            arguments: ARGS_B.into(),
        },
    ]
}

/// `message_start` counts with the output tokens of `message_delta`; the prompt is all input,
/// cached or not.
fn expected_usage() -> Usage {
    Usage {
        prompt_tokens: 412 + 1500 + 3000,
        completion_tokens: 87,
        cached_prompt_tokens: Some(3000),
        cache_write_tokens: Some(1500),
        reasoning_tokens: None,
    }
}

/// What the observer saw: all text, and the arguments and name of each call index.
#[derive(Default)]
struct Seen {
    text: String,
    args: BTreeMap<u32, String>,
    names: BTreeMap<u32, String>,
}

impl StreamObserver for Seen {
    fn on_delta(&mut self, delta: &StreamDelta) {
        match delta {
            StreamDelta::Text(text) => self.text.push_str(text),
            StreamDelta::Reasoning(_) => {}
            StreamDelta::ToolCall {
                index,
                name,
                arguments,
            } => {
                if let Some(name) = name {
                    self.names.insert(*index, name.clone());
                }
                self.args.entry(*index).or_default().push_str(arguments);
            }
        }
    }
}

thread_local! {
    /// One runtime per test thread: thousands of reads share it.
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
}

/// Feeds `bytes` to the reader in pieces of the given sizes (cycled; 0 counts as 1).
fn read(bytes: &[u8], sizes: &[usize]) -> (Result<ModelReply, ModelError>, Seen) {
    let mut parts = Vec::new();
    let mut rest = bytes;
    let mut sizes = sizes.iter().copied().cycle();
    while !rest.is_empty() {
        let size = sizes.next().unwrap_or(rest.len()).clamp(1, rest.len());
        let (head, tail) = rest.split_at(size);
        parts.push(Ok::<_, ModelError>(Bytes::copy_from_slice(head)));
        rest = tail;
    }
    let mut seen = Seen::default();
    let result = RUNTIME.with(|runtime| {
        runtime.block_on(read_stream(
            futures::stream::iter(parts),
            Duration::from_secs(30),
            1 << 20,
            &mut seen,
        ))
    });
    (result, seen)
}

/// The whole contract for a body cut after `cut` bytes.
fn check_cut(body: &Body, cut: usize, sizes: &[usize]) -> Result<(), TestCaseError> {
    let (result, seen) = read(&body.bytes[..cut], sizes);
    // Whatever happened, what was shown live is a prefix of the real answer.
    prop_assert!(TEXT.starts_with(&seen.text), "shown text {:?}", seen.text);
    for (index, args) in &seen.args {
        let full = [ARGS_A, ARGS_B][*index as usize];
        prop_assert!(full.starts_with(args.as_str()), "shown args {args:?}");
    }
    for (index, name) in &seen.names {
        prop_assert_eq!(name, &expected_calls()[*index as usize].name);
    }
    match result {
        Ok(reply) => {
            prop_assert!(
                cut >= body.stop_end,
                "a reply from a stream cut at {cut}, before message_stop ended at {}",
                body.stop_end
            );
            prop_assert_eq!(reply.message.content.as_deref(), Some(TEXT));
            prop_assert_eq!(&reply.message.tool_calls, &expected_calls());
            prop_assert_eq!(reply.finish_reason.as_deref(), Some("tool_use"));
            prop_assert_eq!(reply.served_model.as_deref(), Some(MODEL));
            prop_assert_eq!(reply.usage, Some(expected_usage()));
            prop_assert_eq!(seen.text.as_str(), TEXT);
            prop_assert_eq!(seen.args.get(&0).map(String::as_str), Some(ARGS_A));
            prop_assert_eq!(seen.args.get(&1).map(String::as_str), Some(ARGS_B));
        }
        Err(err) => {
            prop_assert!(
                cut < body.stop_end,
                "a stream cut at {cut}, after message_stop, failed: {err}"
            );
            match err.class {
                ErrorClass::Transient => {
                    prop_assert!(err.message.contains("stream cut"), "{}", err.message);
                }
                // Only a cut inside a multi-byte character makes the body invalid.
                ErrorClass::BadResponse => {
                    prop_assert!(
                        std::str::from_utf8(&body.bytes[..cut]).is_err(),
                        "{}",
                        err.message
                    );
                }
                other => prop_assert!(false, "unexpected class {other:?}: {err}"),
            }
        }
    }
    Ok(())
}

#[test]
fn the_uncut_body_is_read_completely() {
    for newline in ["\n", "\r\n"] {
        let body = body(newline);
        assert_eq!(body.stop_end, body.bytes.len());
        let (reply, seen) = read(&body.bytes, &[body.bytes.len()]);
        let reply = reply.unwrap();
        assert_eq!(reply.message.content.as_deref(), Some(TEXT));
        assert_eq!(reply.message.tool_calls, expected_calls());
        assert_eq!(reply.usage, Some(expected_usage()));
        assert_eq!(reply.finish_reason.as_deref(), Some("tool_use"));
        assert_eq!(seen.text, TEXT);
        // The fixture is what the test claims: many pieces per call.
        assert!(body.boundaries.len() > 50, "{}", body.boundaries.len());
    }
}

/// Offsets where a cut is most likely to go wrong: around every event boundary, every byte of
/// the events that decide completeness (`message_delta`, `message_stop`), inside every
/// multi-byte character, and a stride through the rest.
fn risky_offsets(body: &Body) -> Vec<usize> {
    let len = body.bytes.len();
    let mut offsets: Vec<usize> = body
        .boundaries
        .iter()
        .flat_map(|&b| b.saturating_sub(2)..=(b + 2).min(len))
        .collect();
    offsets.extend(body.delta_start..=len);
    // Inside and right after every byte of a multi-byte character.
    offsets.extend(
        (0..len)
            .filter(|&i| body.bytes[i] >= 0x80)
            .flat_map(|i| [i, i + 1]),
    );
    offsets.extend((0..=len).step_by(37));
    offsets.sort_unstable();
    offsets.dedup();
    offsets
}

#[test]
fn risky_cut_offsets_are_a_reply_or_a_classified_error() {
    let body = body("\n");
    let offsets = risky_offsets(&body);
    assert!(offsets.len() > 500, "{}", offsets.len());
    for &cut in &offsets {
        check_cut(&body, cut, &[usize::MAX]).unwrap();
    }
    for &cut in &body.boundaries {
        check_cut(&body, cut, &[64, 3, 17, 1]).unwrap();
    }
}

#[test]
fn crlf_cuts_around_the_end_are_a_reply_or_a_classified_error() {
    // CRLF line ends put the decisive blank line one byte later: every offset of the last
    // events, where that byte decides between a reply and an error.
    let body = body("\r\n");
    let last_events = body.boundaries[body.boundaries.len() - 4];
    for cut in last_events..=body.bytes.len() {
        check_cut(&body, cut, &[usize::MAX]).unwrap();
    }
}

#[test]
fn a_cut_at_an_event_boundary_before_message_stop_is_a_transient_stream_cut() {
    let body = body("\n");
    for &cut in body.boundaries.iter().filter(|&&b| b < body.stop_end) {
        let (result, _) = read(&body.bytes[..cut], &[64]);
        let err = result.unwrap_err();
        assert_eq!(err.class, ErrorClass::Transient, "cut at {cut}");
        assert!(err.message.contains("stream cut"), "{}", err.message);
    }
}

/// Bytes that matter to the SSE and JSON parsers and to the Messages event grammar, mixed with
/// arbitrary ones.
fn garbage() -> impl Strategy<Value = Vec<u8>> {
    let fragment = prop_oneof![
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\n\n".to_vec()),
        Just(b":".to_vec()),
        Just(b"data: ".to_vec()),
        Just(b"event: ".to_vec()),
        Just(b"event: error\n".to_vec()),
        Just(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".to_vec()),
        Just(b"data: {\"type\":\"ping\"}\n\n".to_vec()),
        Just(
            b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
                .to_vec()
        ),
        Just(
            b"data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"x\",\"name\":\"y\",\"input\":{}}}\n\n"
                .to_vec()
        ),
        Just(
            b"data: {\"type\":\"content_block_delta\",\"index\":9,\"delta\":{\"type\":\"text_delta\",\"text\":\"z\"}}\n\n"
                .to_vec()
        ),
        Just(b"\"index\":4294967295".to_vec()),
        Just(b"{".to_vec()),
        Just(b"}".to_vec()),
        Just(b"\"".to_vec()),
        Just(b"\\".to_vec()),
        Just(vec![0xff]),
        Just(vec![0xe2, 0x9c]),
        Just(vec![0]),
        prop::collection::vec(any::<u8>(), 1..8),
    ];
    prop::collection::vec(fragment, 1..6).prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_cuts_in_random_chunkings(
        crlf in any::<bool>(),
        cut_fraction in 0.0..=1.0f64,
        sizes in prop::collection::vec(1usize..80, 1..12),
    ) {
        let body = body(if crlf { "\r\n" } else { "\n" });
        let cut = ((body.bytes.len() as f64) * cut_fraction).round() as usize;
        check_cut(&body, cut.min(body.bytes.len()), &sizes)?;
    }

    #[test]
    fn cuts_near_the_end_of_the_answer(
        crlf in any::<bool>(),
        back in 0usize..400,
        sizes in prop::collection::vec(1usize..300, 1..8),
    ) {
        // Dense around the last tool delta, message_delta and message_stop, where completeness
        // is decided.
        let body = body(if crlf { "\r\n" } else { "\n" });
        check_cut(&body, body.bytes.len().saturating_sub(back), &sizes)?;
    }

    #[test]
    fn garbage_anywhere_never_panics(
        at_fraction in 0.0..=1.0f64,
        junk in garbage(),
        sizes in prop::collection::vec(1usize..80, 1..12),
    ) {
        let body = body("\n");
        let at = ((body.bytes.len() as f64) * at_fraction).round() as usize;
        let at = at.min(body.bytes.len());
        let mut bytes = body.bytes[..at].to_vec();
        bytes.extend_from_slice(&junk);
        bytes.extend_from_slice(&body.bytes[at..]);
        // Garbage may be harmless (inside a string, after message_stop) or may change the
        // answer; either way the reader returns, and a failure is classified and explained.
        let (result, _) = read(&bytes, &sizes);
        if let Err(err) = result {
            prop_assert!(!err.message.is_empty());
        }
    }
}
