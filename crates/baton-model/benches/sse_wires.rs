//! Stream bodies of the other two wires for the SSE parse benchmark, shaped like the Chat one:
//! many short text deltas, then tool calls whose arguments arrive a few characters at a time.

use bytes::Bytes;
use serde_json::{Value, json};

const WORDS: &str = "Let |me |look |at |the |failing |test |first|. |The |error |says |`expected \
                     |3, |got |4`| — |an |off-by-one |✓\n";
const ARGS: &str =
    r#"{"path":"crates/baton-model/src/openai/stream.rs","start_line":120,"end_line":260}"#;

fn event(kind: &str, data: Value) -> String {
    format!("event: {kind}\ndata: {data}\n\n")
}

/// Text of about `target` bytes of deltas in `text_event`s, then tool calls until the body is
/// `target` long; returns the body, the event count and the text.
struct Builder {
    body: String,
    events: usize,
    text: String,
}

impl Builder {
    fn push(&mut self, kind: &str, data: Value) {
        self.body.push_str(&event(kind, data));
        self.events += 1;
    }
}

/// An Anthropic Messages stream: one text block, then `tool_use` blocks.
pub fn anthropic_body(target: usize) -> (Bytes, usize, String) {
    let mut b = Builder {
        body: String::with_capacity(target + 4096),
        events: 0,
        text: String::new(),
    };
    b.push(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
               "role": "assistant", "model": "claude-sonnet-4-5", "content": [],
               "usage": {"input_tokens": 100, "output_tokens": 1}}}),
    );
    b.push(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    );
    while b.body.len() < target / 2 {
        for word in WORDS.split('|') {
            b.push(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": word}}),
            );
            b.text.push_str(word);
        }
    }
    b.push(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    );
    let mut index = 1;
    let chars: Vec<char> = ARGS.chars().collect();
    while b.body.len() < target {
        b.push(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block":
                   {"type": "tool_use", "id": format!("toolu_{index}"), "name": "read_file", "input": {}}}),
        );
        for piece in chars.chunks(4) {
            b.push(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": index, "delta":
                       {"type": "input_json_delta", "partial_json": piece.iter().collect::<String>()}}),
            );
        }
        b.push(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
        index += 1;
    }
    b.push(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 100}}),
    );
    b.push("message_stop", json!({"type": "message_stop"}));
    (Bytes::from(b.body), b.events, b.text)
}

/// A Responses stream: a reasoning item, one message item, then function calls; each item
/// finished by `response.output_item.done`, the whole by `response.completed`.
pub fn responses_body(target: usize) -> (Bytes, usize, String) {
    let mut b = Builder {
        body: String::with_capacity(target + 4096),
        events: 0,
        text: String::new(),
    };
    b.push(
        "response.created",
        json!({"type": "response.created", "response": {"id": "resp_1", "status": "in_progress", "output": []}}),
    );
    let reasoning = json!({"id": "rs_1", "type": "reasoning", "summary": [],
                           "encrypted_content": "gAAAAABpencryptedreasoningblob=="});
    b.push(
        "response.output_item.done",
        json!({"type": "response.output_item.done", "output_index": 0, "item": reasoning}),
    );
    while b.body.len() < target / 2 {
        for word in WORDS.split('|') {
            b.push(
                "response.output_text.delta",
                json!({"type": "response.output_text.delta", "output_index": 1, "item_id": "msg_1",
                       "content_index": 0, "delta": word}),
            );
            b.text.push_str(word);
        }
    }
    let message = json!({"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
                         "content": [{"type": "output_text", "text": b.text, "annotations": []}]});
    b.push(
        "response.output_item.done",
        json!({"type": "response.output_item.done", "output_index": 1, "item": message}),
    );
    let mut index = 2;
    let chars: Vec<char> = ARGS.chars().collect();
    while b.body.len() < target {
        let call = json!({"id": format!("fc_{index}"), "type": "function_call", "status": "completed",
                          "call_id": format!("call_{index}"), "name": "read_file", "arguments": ARGS});
        let mut added = call.clone();
        added["arguments"] = json!("");
        b.push(
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": index, "item": added}),
        );
        for piece in chars.chunks(4) {
            b.push(
                "response.function_call_arguments.delta",
                json!({"type": "response.function_call_arguments.delta", "output_index": index,
                       "item_id": format!("fc_{index}"), "delta": piece.iter().collect::<String>()}),
            );
        }
        b.push(
            "response.output_item.done",
            json!({"type": "response.output_item.done", "output_index": index, "item": call}),
        );
        index += 1;
    }
    b.push(
        "response.completed",
        json!({"type": "response.completed", "response": {"id": "resp_1", "status": "completed",
               "model": "gpt-5.1-codex", "output": [],
               "usage": {"input_tokens": 100, "output_tokens": 100}}}),
    );
    (Bytes::from(b.body), b.events, b.text)
}
