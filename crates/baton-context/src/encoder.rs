//! A request's digest and its prompt's prefix stability, computed once per request in time
//! proportional to what changed since the previous request — not to the whole context.
//!
//! A long run's context is tens to hundreds of kilobytes, and each turn changes only its end:
//! serializing, hashing and comparing it all again every turn made the harness's time per turn
//! grow with the context (`cargo bench -p baton-engine --bench overhead`: JSON escaping was the
//! largest item of a 1,000-turn run's profile). [`PromptEncoder`] keeps the previous request's
//! messages, their serialized bytes and the hash state after each, so a request that repeats
//! the previous one's first messages serializes and hashes only the rest.
//!
//! The digest is SHA-256 over each message's JSON followed by `\n`, then the JSON of everything
//! else in the request (model, tools, response mode, tool choice, reasoning, compaction
//! threshold). Compact JSON never holds a raw newline, so the framing is unambiguous. It depends
//! on the request alone: [`crate::request_digest`] computes it from scratch with the same code.

use baton_core::{Message, ModelRequest, ReasoningSettings, ResponseMode, ToolChoice, ToolSpec};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// What [`PromptEncoder::encode`] computed for one request.
#[derive(Clone, Debug, PartialEq)]
pub struct Encoded {
    /// Hex SHA-256 of the request (see the module's doc).
    pub digest: String,
    /// Share of this prompt (tools, then messages, as JSON) identical to the start of the
    /// previous request's; `None` for the first request this encoder sees.
    pub prefix_stability: Option<f64>,
}

/// The previous request's encoding, reused for the messages the next one repeats.
#[derive(Default)]
pub struct PromptEncoder {
    /// The previous request's messages: the next request's are compared with these.
    messages: Vec<Message>,
    /// Their JSON, one after another (no separators: the prompt bytes of prefix stability).
    bytes: Vec<u8>,
    /// Where each message's JSON ends in `bytes`.
    ends: Vec<usize>,
    /// The digest's hash state after each message (and its `\n`).
    hashes: Vec<Sha256>,
    /// The previous request's tools as JSON; `None` before the first request.
    tools: Option<Vec<u8>>,
}

/// Everything in a request but its messages, as it is hashed after them.
#[derive(Debug, Serialize)]
struct Rest<'a> {
    model: &'a str,
    tools: &'a [ToolSpec],
    response_mode: &'a ResponseMode,
    #[serde(skip_serializing_if = "is_auto")]
    tool_choice: &'a ToolChoice,
    #[serde(skip_serializing_if = "is_default_reasoning")]
    reasoning: &'a ReasoningSettings,
    #[serde(skip_serializing_if = "Option::is_none")]
    provider_compaction_at: Option<u64>,
}

fn is_auto(choice: &&ToolChoice) -> bool {
    choice.is_auto()
}

fn is_default_reasoning(reasoning: &&ReasoningSettings) -> bool {
    reasoning.is_default()
}

impl PromptEncoder {
    /// The digest and prefix stability of `request`, which becomes the previous request.
    pub fn encode(&mut self, request: &ModelRequest) -> Encoded {
        let kept = self
            .messages
            .iter()
            .zip(&request.messages)
            .take_while(|(a, b)| a == b)
            .count();
        let kept_bytes = if kept == 0 { 0 } else { self.ends[kept - 1] };

        let mut tools = Vec::new();
        for tool in &request.tools {
            write_json(&mut tools, tool);
        }
        // The kept messages' bytes, ends and hash states stay where they are (copying them every
        // turn made the time per turn grow with the context); of the previous prompt only the
        // bytes after the kept ones are set aside, for the prefix stability.
        let previous_tail = self.bytes.split_off(kept_bytes);
        self.ends.truncate(kept);
        self.hashes.truncate(kept);
        self.messages.truncate(kept);
        let mut hasher = self.hashes.last().cloned().unwrap_or_default();
        for message in &request.messages[kept..] {
            let start = self.bytes.len();
            write_json(&mut self.bytes, message);
            hasher.update(&self.bytes[start..]);
            hasher.update(b"\n");
            self.ends.push(self.bytes.len());
            self.hashes.push(hasher.clone());
        }
        self.messages
            .extend(request.messages[kept..].iter().cloned());

        let rest = Rest {
            model: &request.model,
            tools: &request.tools,
            response_mode: &request.response_mode,
            tool_choice: &request.tool_choice,
            reasoning: &request.reasoning,
            provider_compaction_at: request.provider_compaction_at,
        };
        let mut rest_bytes = Vec::new();
        write_json(&mut rest_bytes, &rest);
        hasher.update(&rest_bytes);
        let digest = hex(&hasher.finalize());

        let prefix_stability = self.tools.as_ref().map(|previous_tools| {
            stability(
                previous_tools,
                &previous_tail,
                &tools,
                &self.bytes,
                kept_bytes,
            )
        });
        self.tools = Some(tools);
        Encoded {
            digest,
            prefix_stability,
        }
    }
}

/// Share of the prompt `tools ‖ messages` that the previous prompt starts with. The previous
/// prompt is `previous_tools ‖ messages[..known] ‖ previous_tail`: the two agree on the first
/// `known` bytes of their messages.
fn stability(
    previous_tools: &[u8],
    previous_tail: &[u8],
    tools: &[u8],
    messages: &[u8],
    known: usize,
) -> f64 {
    let total = tools.len() + messages.len();
    if total == 0 {
        return 1.0;
    }
    let common = if previous_tools == tools {
        tools.len() + known + common_prefix(previous_tail, &messages[known..])
    } else {
        // The tool list changed (rare): compare the whole prompts.
        let previous = [previous_tools, &messages[..known], previous_tail].concat();
        let current = [tools, messages].concat();
        common_prefix(&previous, &current)
    };
    common as f64 / total as f64
}

/// Length of the longest common prefix, compared a block at a time (memcmp speed).
pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    const BLOCK: usize = 128;
    let len = a.len().min(b.len());
    let mut at = 0;
    while at + BLOCK <= len && a[at..at + BLOCK] == b[at..at + BLOCK] {
        at += BLOCK;
    }
    at + a[at..len]
        .iter()
        .zip(&b[at..len])
        .take_while(|(x, y)| x == y)
        .count()
}

fn write_json<T: Serialize + std::fmt::Debug>(out: &mut Vec<u8>, value: &T) {
    // Serializing plain structs and enums of strings cannot fail; fall back to Debug just in
    // case, so that the digest is still deterministic.
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.extend_from_slice(format!("{value:?}").as_bytes());
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use baton_core::{AssistantMessage, ToolCall, ToolEffect};
    use proptest::prelude::*;

    use super::*;
    use crate::metrics::{prefix_stability, prompt_bytes};

    /// The digest as the module's doc defines it, from scratch and without the encoder.
    fn reference_digest(request: &ModelRequest) -> String {
        let mut stream = Vec::new();
        for message in &request.messages {
            stream.extend(serde_json::to_vec(message).unwrap());
            stream.push(b'\n');
        }
        let mut whole = serde_json::to_value(request).unwrap();
        whole.as_object_mut().unwrap().remove("messages");
        // serde_json's map keeps keys sorted, the struct keeps field order: compare as values.
        let rest = Rest {
            model: &request.model,
            tools: &request.tools,
            response_mode: &request.response_mode,
            tool_choice: &request.tool_choice,
            reasoning: &request.reasoning,
            provider_compaction_at: request.provider_compaction_at,
        };
        assert_eq!(
            serde_json::to_value(&rest).unwrap(),
            whole,
            "the digest covers every field but the messages"
        );
        stream.extend(serde_json::to_vec(&rest).unwrap());
        hex(&Sha256::digest(&stream))
    }

    fn message(kind: u8, text: String) -> Message {
        match kind % 4 {
            0 => Message::User { content: text },
            1 => Message::Assistant(AssistantMessage {
                content: None,
                tool_calls: vec![ToolCall {
                    id: format!("call_{}", text.len()),
                    name: "echo".into(),
                    arguments: serde_json::json!({ "text": text }).to_string(),
                }],
                ..Default::default()
            }),
            2 => Message::Tool {
                call_id: "c".into(),
                name: "echo".into(),
                content: text,
            },
            _ => Message::System { content: text },
        }
    }

    fn tool(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: format!("the {name} tool"),
            parameters: serde_json::json!({"type": "object"}),
            effect: ToolEffect::ReadOnly,
        }
    }

    /// How the next request's messages come from the previous ones, as a run's do: new messages
    /// at the end, an earlier one rewritten (masking, a compaction's summary), some dropped.
    #[derive(Clone, Debug)]
    enum Step {
        Append(Vec<(u8, String)>),
        Rewrite(usize, String),
        Truncate(usize),
        Tools(Vec<&'static str>),
        Model(&'static str),
    }

    fn step() -> impl Strategy<Value = Step> {
        let text = "[a-c\"\\\\\n é]{0,12}";
        prop_oneof![
            4 => prop::collection::vec((any::<u8>(), text), 1..4).prop_map(Step::Append),
            2 => (any::<usize>(), text).prop_map(|(i, t)| Step::Rewrite(i, t)),
            1 => any::<usize>().prop_map(Step::Truncate),
            1 => prop::sample::subsequence(vec!["read", "echo", "shell"], 0..=3).prop_map(Step::Tools),
            1 => prop::sample::select(vec!["m1", "m2"]).prop_map(Step::Model),
        ]
    }

    proptest! {
        /// Whatever the sequence of requests, the encoder's digest is the request's own and its
        /// stability is the byte-level common prefix of the two whole prompts.
        #[test]
        fn the_encoder_agrees_with_encoding_from_scratch(steps in prop::collection::vec(step(), 1..24)) {
            let mut request = ModelRequest {
                model: "m1".into(),
                messages: vec![Message::System { content: "sys".into() }],
                tools: vec![tool("echo")],
                response_mode: ResponseMode::default(),
                tool_choice: ToolChoice::default(),
                reasoning: ReasoningSettings::default(),
                provider_compaction_at: None,
            };
            let mut encoder = PromptEncoder::default();
            let mut previous: Option<Vec<u8>> = None;
            for step in steps {
                match step {
                    Step::Append(new) => request
                        .messages
                        .extend(new.into_iter().map(|(kind, text)| message(kind, text))),
                    Step::Rewrite(i, text) => {
                        let i = i % request.messages.len();
                        request.messages[i] = Message::User { content: text };
                    }
                    Step::Truncate(n) => request.messages.truncate(1 + n % request.messages.len()),
                    Step::Tools(names) => request.tools = names.into_iter().map(tool).collect(),
                    Step::Model(model) => request.model = model.into(),
                }
                let encoded = encoder.encode(&request);
                prop_assert_eq!(&encoded.digest, &reference_digest(&request));
                prop_assert_eq!(&encoded.digest, &crate::request_digest(&request));
                let prompt = prompt_bytes(&request);
                let expected = previous.as_deref().map(|p| prefix_stability(p, &prompt));
                prop_assert_eq!(encoded.prefix_stability, expected);
                previous = Some(prompt);
            }
        }
    }

    #[test]
    fn a_changed_message_changes_the_digest_and_a_repeated_request_keeps_it() {
        let mut request = ModelRequest {
            model: "m".into(),
            messages: vec![message(0, "hello".into()), message(2, "out".into())],
            tools: vec![tool("echo")],
            response_mode: ResponseMode::default(),
            tool_choice: ToolChoice::default(),
            reasoning: ReasoningSettings::default(),
            provider_compaction_at: None,
        };
        let mut encoder = PromptEncoder::default();
        let first = encoder.encode(&request);
        assert_eq!(first.prefix_stability, None);
        let again = encoder.encode(&request);
        assert_eq!(
            (again.digest.as_str(), again.prefix_stability),
            (first.digest.as_str(), Some(1.0))
        );
        request.messages[1] = message(2, "masked".into());
        let changed = encoder.encode(&request);
        assert_ne!(changed.digest, first.digest);
        assert!(changed.prefix_stability.unwrap() < 1.0);
        request.provider_compaction_at = Some(1000);
        assert_ne!(encoder.encode(&request).digest, changed.digest);
    }

    #[test]
    fn common_prefix_crosses_block_boundaries() {
        let a = vec![7u8; 1000];
        for at in [0, 1, 127, 128, 129, 255, 256, 999] {
            let mut b = a.clone();
            b[at] = 8;
            assert_eq!(common_prefix(&a, &b), at);
        }
        assert_eq!(common_prefix(&a, &a[..300]), 300);
        assert_eq!(common_prefix(&[], &a), 0);
    }
}
