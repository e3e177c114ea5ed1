//! A streamed Chat Completions response cut anywhere, in any chunking, or with garbage inserted:
//! the reader must return the complete reply or a classified error — never a panic, and never a
//! reply with half a tool call.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use baton_core::{ErrorClass, ModelReply, Reasoning, ReasoningField, ToolCall, Usage};
use baton_model::openai::read_stream;
use baton_model::{ModelError, StreamDelta, StreamObserver};
use bytes::Bytes;
use proptest::prelude::*;
use serde_json::{Value, json};

const MODEL: &str = "gpt-4o-2024-08-06";
const TEXT: &str = "I'll read the file first — then list the directory. ✓ Ünïcödé 🦀 done";
/// Reasoning as DeepSeek streams it (`reasoning_content` deltas before the answer).
const REASONING: &str = "The user wants the file; \"main.rs\" first.\nThen ls — 思考 done.";
const ARGS_A: &str = r#"{"path":"src/main.rs","start_line":1,"end_line":200}"#;
const ARGS_B: &str =
    r#"{"command":"ls -la && cargo test -p baton-model -- --nocapture","timeout_secs":120}"#;

/// A complete SSE body and the byte offsets that matter for a cut.
struct Body {
    bytes: Vec<u8>,
    /// End of the event carrying `finish_reason`: from here on the reply is complete.
    finish_end: usize,
    /// End of the usage event: from here on usage is known.
    usage_end: usize,
    /// Every offset at which an event (or comment) ends.
    boundaries: Vec<usize>,
}

fn chunk(choices: Value, usage: Value) -> Value {
    json!({
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion.chunk",
        "created": 1_741_569_952,
        "model": MODEL,
        "system_fingerprint": "fp_eb9dce56a8",
        "choices": choices,
        "usage": usage,
    })
}

fn delta(delta: Value) -> Value {
    chunk(
        json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]),
        Value::Null,
    )
}

/// `text` in pieces of `size` characters (never splitting a character: the server sends JSON
/// strings, which are whole characters).
fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn tool_pieces(index: u32, id: &str, name: &str, args: &str, size: usize) -> Vec<Value> {
    let mut out = vec![delta(json!({"tool_calls": [{
        "index": index, "id": id, "type": "function",
        "function": {"name": name, "arguments": ""}}]}))];
    for piece in pieces(args, size) {
        out.push(delta(json!({"tool_calls": [{
            "index": index, "function": {"arguments": piece}}]})));
    }
    out
}

/// The body as OpenAI streams it: role, text in pieces, two tool calls whose arguments arrive in
/// many pieces, the finish chunk, the usage chunk (`stream_options.include_usage`), `[DONE]`.
fn body(newline: &str) -> Body {
    let mut events = vec![delta(
        json!({"role": "assistant", "content": "", "refusal": null}),
    )];
    events.extend(
        pieces(REASONING, 3)
            .into_iter()
            .map(|t| delta(json!({"content": null, "reasoning_content": t}))),
    );
    events.extend(
        pieces(TEXT, 4)
            .into_iter()
            .map(|t| delta(json!({"content": t}))),
    );
    events.extend(tool_pieces(0, "call_a1", "read_file", ARGS_A, 3));
    events.extend(tool_pieces(1, "call_b2", "shell", ARGS_B, 5));
    let finish = chunk(
        json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": "tool_calls"}]),
        Value::Null,
    );
    let usage = chunk(
        json!([]),
        json!({"prompt_tokens": 1234, "completion_tokens": 87, "total_tokens": 1321,
               "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
               "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}}),
    );

    let mut bytes = Vec::new();
    let mut boundaries = Vec::new();
    let mut push = |bytes: &mut Vec<u8>, text: String| {
        bytes.extend_from_slice(text.as_bytes());
        boundaries.push(bytes.len());
        bytes.len()
    };
    push(
        &mut bytes,
        format!(": OPENROUTER PROCESSING{newline}{newline}"),
    );
    for event in events {
        push(&mut bytes, format!("data: {event}{newline}{newline}"));
    }
    let finish_end = push(&mut bytes, format!("data: {finish}{newline}{newline}"));
    let usage_end = push(&mut bytes, format!("data: {usage}{newline}{newline}"));
    push(&mut bytes, format!("data: [DONE]{newline}{newline}"));
    Body {
        bytes,
        finish_end,
        usage_end,
        boundaries,
    }
}

fn expected_calls() -> Vec<ToolCall> {
    vec![
        ToolCall {
            id: "call_a1".into(),
            name: "read_file".into(),
            arguments: ARGS_A.into(),
        },
        ToolCall {
            id: "call_b2".into(),
            name: "shell".into(),
            arguments: ARGS_B.into(),
        },
    ]
}

fn expected_usage() -> Usage {
    Usage {
        prompt_tokens: 1234,
        completion_tokens: 87,
        cached_prompt_tokens: Some(1024),
        cache_write_tokens: None,
        reasoning_tokens: None,
    }
}

/// What the observer saw: all text, and the arguments of each call index.
#[derive(Default)]
struct Seen {
    text: String,
    reasoning: String,
    args: BTreeMap<u32, String>,
}

impl StreamObserver for Seen {
    fn on_delta(&mut self, delta: &StreamDelta) {
        match delta {
            StreamDelta::Text(text) => self.text.push_str(text),
            StreamDelta::Reasoning(text) => self.reasoning.push_str(text),
            StreamDelta::ToolCall {
                index, arguments, ..
            } => self.args.entry(*index).or_default().push_str(arguments),
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
    prop_assert!(
        REASONING.starts_with(&seen.reasoning),
        "shown reasoning {:?}",
        seen.reasoning
    );
    for (index, args) in &seen.args {
        let full = [ARGS_A, ARGS_B][*index as usize];
        prop_assert!(full.starts_with(args.as_str()), "shown args {args:?}");
    }
    match result {
        Ok(reply) => {
            prop_assert!(
                cut >= body.finish_end,
                "a reply from a stream cut at {cut}, before the finish chunk ended at {}",
                body.finish_end
            );
            prop_assert_eq!(reply.message.content.as_deref(), Some(TEXT));
            // The reasoning whole, verbatim, never a part of it.
            prop_assert_eq!(
                &reply.message.reasoning,
                &vec![Reasoning::Text {
                    text: REASONING.into(),
                    field: ReasoningField::ReasoningContent
                }]
            );
            prop_assert_eq!(&reply.message.tool_calls, &expected_calls());
            prop_assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
            prop_assert_eq!(reply.served_model.as_deref(), Some(MODEL));
            if cut >= body.usage_end {
                prop_assert_eq!(reply.usage, Some(expected_usage()));
            } else {
                // Cut between the finish and the usage chunk: complete, usage unreported.
                prop_assert_eq!(reply.usage, None);
            }
            prop_assert_eq!(seen.text.as_str(), TEXT);
        }
        Err(err) => {
            prop_assert!(
                cut < body.finish_end,
                "a stream cut at {cut}, after the finish chunk, failed: {err}"
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
        let (reply, _) = read(&body.bytes, &[body.bytes.len()]);
        let reply = reply.unwrap();
        assert_eq!(reply.message.tool_calls, expected_calls());
        assert_eq!(reply.usage, Some(expected_usage()));
        // The fixture is what the test claims: many pieces per call.
        assert!(body.boundaries.len() > 50, "{}", body.boundaries.len());
    }
}

/// Offsets where a cut is most likely to go wrong: around every event boundary, every byte of
/// the events that decide completeness (finish, usage, `[DONE]`), inside every multi-byte
/// character, and a stride through the rest. (Every offset of the 17 kB body would take
/// minutes in a debug build; the property tests below sample the rest.)
fn risky_offsets(body: &Body) -> Vec<usize> {
    let len = body.bytes.len();
    let mut offsets: Vec<usize> = body
        .boundaries
        .iter()
        .flat_map(|&b| b.saturating_sub(2)..=(b + 2).min(len))
        .collect();
    let finish_start = body
        .boundaries
        .iter()
        .copied()
        .filter(|&b| b < body.finish_end)
        .max()
        .unwrap_or(0);
    offsets.extend(finish_start..=len);
    // Inside and right after every byte of a multi-byte character.
    offsets.extend(
        (0..len)
            .filter(|&i| body.bytes[i] >= 0x80)
            .flat_map(|i| [i, i + 1]),
    );
    offsets.extend((0..=len).step_by(41));
    offsets.sort_unstable();
    offsets.dedup();
    offsets
}

#[test]
fn risky_cut_offsets_are_a_reply_or_a_classified_error() {
    let body = body("\n");
    let offsets = risky_offsets(&body);
    assert!(offsets.len() > 1_000, "{}", offsets.len());
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
fn a_cut_at_an_event_boundary_before_the_finish_is_a_transient_stream_cut() {
    let body = body("\n");
    for &cut in body.boundaries.iter().filter(|&&b| b < body.finish_end) {
        let (result, _) = read(&body.bytes[..cut], &[64]);
        let err = result.unwrap_err();
        assert_eq!(err.class, ErrorClass::Transient, "cut at {cut}");
        assert!(err.message.contains("stream cut"), "{}", err.message);
    }
}

/// Bytes that matter to the SSE and JSON parsers, mixed with arbitrary ones.
fn garbage() -> impl Strategy<Value = Vec<u8>> {
    let fragment = prop_oneof![
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\n\n".to_vec()),
        Just(b":".to_vec()),
        Just(b"data: ".to_vec()),
        Just(b"data: [DONE]\n\n".to_vec()),
        Just(b"event: error\n".to_vec()),
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
        back in 0usize..600,
        sizes in prop::collection::vec(1usize..300, 1..8),
    ) {
        // Dense around the finish, usage and [DONE] events, where completeness is decided.
        let body = body("\n");
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
        // Garbage may be harmless (inside a comment, after [DONE]) or may change the answer;
        // either way the reader returns, and a failure is classified.
        let (result, _) = read(&bytes, &sizes);
        if let Err(err) = result {
            prop_assert!(!err.message.is_empty());
        }
    }
}
