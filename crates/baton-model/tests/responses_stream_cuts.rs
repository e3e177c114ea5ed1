//! A streamed Responses answer cut anywhere, in any chunking: the reader returns the complete
//! reply — reasoning item verbatim, both parallel calls whole — or a classified error; never a
//! panic, never half an item.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use baton_core::{ErrorClass, ModelReply, Reasoning, ToolCall};
use baton_model::responses::read_stream;
use baton_model::{ModelError, NoObserver};
use bytes::Bytes;
use proptest::prelude::*;
use serde_json::{Value, json};

const ARGS_A: &str =
    r#"{"path":"src/main.rs","content":"fn main() { println!(\"✓ Ünïcödé 🦀\"); }\n"}"#;
const ARGS_B: &str = r#"{"command":"cargo test -p baton-model -- --nocapture","timeout_secs":120}"#;
const TEXT: &str = "Writing main.rs and testing — ✓ 思考 done";

fn reasoning() -> Value {
    json!({"id": "rs_1", "type": "reasoning", "status": "completed",
           "summary": [{"type": "summary_text", "text": "**Plan** write, then test ✓"}],
           "encrypted_content": "gAAAAABp+/encrypted==/blob"})
}

fn items() -> Vec<Value> {
    vec![
        reasoning(),
        json!({"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
               "content": [{"type": "output_text", "text": TEXT, "annotations": []}]}),
        json!({"id": "fc_a", "type": "function_call", "status": "completed", "call_id": "call_a",
               "name": "write_file", "arguments": ARGS_A}),
        json!({"id": "fc_b", "type": "function_call", "status": "completed", "call_id": "call_b",
               "name": "shell", "arguments": ARGS_B}),
    ]
}

/// The SSE body, and where the `response.completed` event ends.
struct Body {
    bytes: Vec<u8>,
    completed_end: usize,
    boundaries: Vec<usize>,
}

fn body() -> Body {
    let mut events = vec![json!({"type": "response.created",
        "response": {"id": "resp_1", "status": "in_progress", "output": []}})];
    for (index, item) in items().iter().enumerate() {
        events.push(
            json!({"type": "response.output_item.added", "output_index": index, "item": item}),
        );
        if item["type"] == "function_call" {
            let args = item["arguments"].as_str().unwrap();
            let chars: Vec<char> = args.chars().collect();
            for piece in chars.chunks(7) {
                events.push(json!({"type": "response.function_call_arguments.delta",
                    "output_index": index, "delta": piece.iter().collect::<String>()}));
            }
        }
        if item["type"] == "message" {
            let chars: Vec<char> = TEXT.chars().collect();
            for piece in chars.chunks(5) {
                events.push(
                    json!({"type": "response.output_text.delta", "output_index": index,
                    "content_index": 0, "delta": piece.iter().collect::<String>()}),
                );
            }
        }
        events.push(
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        );
    }
    let completed = json!({"type": "response.completed", "response": {
        "id": "resp_1", "status": "completed", "model": "gpt-5.1-codex", "output": items(),
        "usage": {"input_tokens": 900, "input_tokens_details": {"cached_tokens": 512},
                  "output_tokens": 300, "output_tokens_details": {"reasoning_tokens": 120}}}});
    let mut bytes = Vec::new();
    let mut boundaries = Vec::new();
    for event in events {
        bytes.extend_from_slice(
            format!(
                "event: {}\ndata: {event}\n\n",
                event["type"].as_str().unwrap()
            )
            .as_bytes(),
        );
        boundaries.push(bytes.len());
    }
    bytes.extend_from_slice(format!("event: response.completed\ndata: {completed}\n\n").as_bytes());
    let completed_end = bytes.len();
    boundaries.push(completed_end);
    Body {
        bytes,
        completed_end,
        boundaries,
    }
}

thread_local! {
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
}

fn read(bytes: &[u8], sizes: &[usize]) -> Result<ModelReply, ModelError> {
    let mut parts = Vec::new();
    let mut rest = bytes;
    let mut sizes = sizes.iter().copied().cycle();
    while !rest.is_empty() {
        let size = sizes.next().unwrap_or(rest.len()).clamp(1, rest.len());
        let (head, tail) = rest.split_at(size);
        parts.push(Ok::<_, ModelError>(Bytes::copy_from_slice(head)));
        rest = tail;
    }
    RUNTIME.with(|runtime| {
        runtime.block_on(read_stream(
            futures::stream::iter(parts),
            Duration::from_secs(30),
            1 << 20,
            &mut NoObserver,
        ))
    })
}

fn check_cut(body: &Body, cut: usize, sizes: &[usize]) -> Result<(), TestCaseError> {
    match read(&body.bytes[..cut], sizes) {
        Ok(reply) => {
            prop_assert!(
                cut >= body.completed_end,
                "a reply from a stream cut at {cut}"
            );
            prop_assert_eq!(reply.message.content.as_deref(), Some(TEXT));
            prop_assert_eq!(
                &reply.message.tool_calls,
                &vec![
                    ToolCall {
                        id: "call_a".into(),
                        name: "write_file".into(),
                        arguments: ARGS_A.into()
                    },
                    ToolCall {
                        id: "call_b".into(),
                        name: "shell".into(),
                        arguments: ARGS_B.into()
                    },
                ]
            );
            let [Reasoning::Item { json, summary }] = reply.message.reasoning.as_slice() else {
                return Err(TestCaseError::fail(format!(
                    "{:?}",
                    reply.message.reasoning
                )));
            };
            prop_assert_eq!(serde_json::from_str::<Value>(json).unwrap(), reasoning());
            prop_assert_eq!(summary.as_str(), "**Plan** write, then test ✓");
            let usage = reply.usage.unwrap();
            prop_assert_eq!(
                (usage.prompt_tokens, usage.cached_prompt_tokens),
                (900, Some(512))
            );
            prop_assert_eq!(usage.reasoning_tokens, Some(120));
        }
        Err(err) => {
            prop_assert!(cut < body.completed_end, "the whole stream failed: {err}");
            match err.class {
                ErrorClass::Transient => {
                    prop_assert!(err.message.contains("stream cut"), "{}", err.message)
                }
                // Only a cut inside a multi-byte character makes the body invalid.
                ErrorClass::BadResponse => prop_assert!(
                    std::str::from_utf8(&body.bytes[..cut]).is_err(),
                    "{}",
                    err.message
                ),
                other => prop_assert!(false, "unexpected class {other:?}: {err}"),
            }
        }
    }
    Ok(())
}

#[test]
fn every_event_boundary_and_the_final_event_byte_by_byte() {
    let body = body();
    let last = body.boundaries[body.boundaries.len() - 2];
    let mut cuts: Vec<usize> = body.boundaries.clone();
    cuts.extend(last..=body.bytes.len());
    for cut in cuts {
        check_cut(&body, cut, &[usize::MAX]).unwrap();
    }
    // The uncut stream is the whole reply.
    assert!(read(&body.bytes, &[13]).is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_cuts_in_random_chunkings(
        cut_fraction in 0.0..=1.0f64,
        sizes in prop::collection::vec(1usize..80, 1..12),
    ) {
        let body = body();
        let cut = ((body.bytes.len() as f64) * cut_fraction).round() as usize;
        check_cut(&body, cut.min(body.bytes.len()), &sizes)?;
    }
}
