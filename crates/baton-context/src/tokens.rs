//! Token accounting: how big a request is before it is sent.
//!
//! OpenAI-family models are counted with their own BPE (tiktoken, compiled in). Other models
//! are estimated at four bytes a token and calibrated: the previous call's reported
//! `prompt_tokens` plus the estimate of what changed since, so the estimate tracks the
//! server's tokenizer wherever it has reported usage. (A BPE table as proxy would not be more
//! right for another family's tokenizer, and loading one costs every process start a
//! noticeable pause.)

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};

use baton_core::{Message, ModelRequest, ProviderKind, RunState};
use tiktoken_rs::CoreBPE;

/// Tokens a chat format adds around each message (role markers, separators): OpenAI's
/// published rule of thumb.
const PER_MESSAGE_OVERHEAD: u64 = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    O200k,
    Cl100k,
    /// Four bytes a token: the usual ratio for English and code.
    Bytes,
}

impl Encoding {
    /// The encoding of an OpenAI model, `None` for models of other families.
    pub fn for_openai_model(model: &str) -> Option<Encoding> {
        let name = model
            .rsplit('/')
            .next()
            .unwrap_or(model)
            .to_ascii_lowercase();
        let o200k = [
            "gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-", "gpt-oss",
        ];
        if o200k.iter().any(|p| name.starts_with(p)) {
            Some(Encoding::O200k)
        } else if name.starts_with("gpt-4") || name.starts_with("gpt-3.5") {
            Some(Encoding::Cl100k)
        } else {
            None
        }
    }

    fn bpe(self) -> Option<&'static CoreBPE> {
        static O200K: OnceLock<Option<CoreBPE>> = OnceLock::new();
        static CL100K: OnceLock<Option<CoreBPE>> = OnceLock::new();
        // Building the tables cannot fail for the compiled-in data; if it ever did, counting
        // falls back to bytes / 4 rather than stopping the run.
        match self {
            Encoding::O200k => O200K.get_or_init(|| tiktoken_rs::o200k_base().ok()),
            Encoding::Cl100k => CL100K.get_or_init(|| tiktoken_rs::cl100k_base().ok()),
            Encoding::Bytes => return None,
        }
        .as_ref()
    }

    pub fn count(self, text: &str) -> u64 {
        match self.bpe() {
            Some(bpe) => bpe.encode_ordinary(text).len() as u64,
            None => text.len().div_ceil(4) as u64,
        }
    }
}

/// Counts requests, remembering each message's count: history only grows, so most of a
/// request was counted before.
pub struct TokenCounter {
    cache: Mutex<HashMap<(Encoding, u64), u64>>,
}

/// A request's size: the local count and the estimate the context policy uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    pub counted: u64,
    pub estimated: u64,
}

impl Default for TokenCounter {
    fn default() -> Self {
        TokenCounter {
            cache: Mutex::new(HashMap::new()),
        }
    }
}

impl TokenCounter {
    /// Counts `request` in `encoding`: message texts, tool-call arguments, tool definitions and
    /// a per-message overhead.
    pub fn count(&self, encoding: Encoding, request: &ModelRequest) -> u64 {
        // One lock for the whole request: it holds hundreds of texts.
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let messages: u64 = request
            .messages
            .iter()
            .map(|message| message_tokens(&mut cache, encoding, message))
            .sum();
        REPLY_PRIMING + messages + tools_tokens(&mut cache, encoding, request)
    }

    /// [`TokenCounter::count`] of `request`, whose first `unchanged` messages are those of the
    /// request `running` counted last (see [`crate::Assembled::unchanged`]): only the rest are
    /// looked at, and the tool definitions only if they changed. The same number as `count`.
    pub fn count_since(
        &self,
        encoding: Encoding,
        request: &ModelRequest,
        unchanged: usize,
        running: &mut RunningCount,
    ) -> u64 {
        if running.encoding != Some(encoding) {
            *running = RunningCount {
                encoding: Some(encoding),
                ..RunningCount::default()
            };
        }
        let keep = unchanged
            .min(running.totals.len())
            .min(request.messages.len());
        running.totals.truncate(keep);
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let mut total = running.totals.last().copied().unwrap_or(0);
        for message in &request.messages[keep..] {
            total += message_tokens(&mut cache, encoding, message);
            running.totals.push(total);
        }
        let tools = match &running.tools {
            Some((tools, n)) if *tools == request.tools => *n,
            _ => {
                let n = tools_tokens(&mut cache, encoding, request);
                running.tools = Some((request.tools.clone(), n));
                n
            }
        };
        REPLY_PRIMING + total + tools
    }

    /// The estimate for the next request of `state`'s run.
    pub fn estimate(&self, state: &RunState, request: &ModelRequest) -> Estimate {
        let (exact, encoding) = encoding_of(state);
        estimated(state, exact, self.count(encoding, request))
    }

    /// [`TokenCounter::estimate`] counted with [`TokenCounter::count_since`].
    pub fn estimate_since(
        &self,
        state: &RunState,
        request: &ModelRequest,
        unchanged: usize,
        running: &mut RunningCount,
    ) -> Estimate {
        let (exact, encoding) = encoding_of(state);
        let counted = self.count_since(encoding, request, unchanged, running);
        estimated(state, exact, counted)
    }
}

/// What [`TokenCounter::count_since`] keeps of the request it counted last, per run.
#[derive(Default)]
pub struct RunningCount {
    encoding: Option<Encoding>,
    /// The messages' tokens summed up to and including each message.
    totals: Vec<u64>,
    /// The tool definitions and their tokens.
    tools: Option<(Vec<baton_core::ToolSpec>, u64)>,
}

/// The reply's priming tokens.
const REPLY_PRIMING: u64 = 3;

/// One message's tokens: its texts and the per-message overhead.
fn message_tokens(
    cache: &mut HashMap<(Encoding, u64), u64>,
    encoding: Encoding,
    message: &Message,
) -> u64 {
    let mut text = |text: &str| count_text(cache, encoding, text);
    let mut total = PER_MESSAGE_OVERHEAD;
    match message {
        Message::System { content } | Message::User { content } => {
            total += text(content);
        }
        Message::Tool { name, content, .. } => {
            total += text(name) + text(content);
        }
        Message::Assistant(reply) => {
            if let Some(content) = &reply.content {
                total += text(content);
            }
            // Chat reasoning goes back as text (`reasoning_history = "preserve"`) and can be
            // longer than the answer. Anthropic drops earlier turns' thinking from the context,
            // and Responses items are opaque: those the calibration against reported usage
            // accounts for, where there is one.
            for part in &reply.reasoning {
                if let baton_core::Reasoning::Text { text: thought, .. } = part {
                    total += text(thought);
                }
            }
            for call in &reply.tool_calls {
                total += text(&call.name) + text(&call.arguments) + PER_MESSAGE_OVERHEAD;
            }
        }
    }
    total
}

/// The tool definitions' tokens, each as the JSON a wire sends.
fn tools_tokens(
    cache: &mut HashMap<(Encoding, u64), u64>,
    encoding: Encoding,
    request: &ModelRequest,
) -> u64 {
    request
        .tools
        .iter()
        .map(|tool| {
            let definition = serde_json::json!({
                "name": tool.name, "description": tool.description, "parameters": tool.parameters,
            });
            count_text(cache, encoding, &definition.to_string())
        })
        .sum()
}

/// The encoding `state`'s model is counted in: its own (exact) for OpenAI models, bytes / 4
/// (`None`: to be calibrated) for the others.
fn encoding_of(state: &RunState) -> (Option<Encoding>, Encoding) {
    let exact = state
        .settings
        .as_ref()
        .and_then(|s| match s.model.provider {
            ProviderKind::OpenAiCompatible => Encoding::for_openai_model(&s.model.model),
            ProviderKind::Anthropic => None,
        });
    (exact, exact.unwrap_or(Encoding::Bytes))
}

/// The estimate from a local count: the count itself for an exact encoding, else calibrated
/// against the run's last reported usage.
fn estimated(state: &RunState, exact: Option<Encoding>, counted: u64) -> Estimate {
    let estimated = match (exact, state.calibration) {
        (Some(_), _) | (None, None) => counted,
        (None, Some((then_counted, then_reported))) => {
            calibrate(counted, then_counted, then_reported)
        }
    };
    Estimate { counted, estimated }
}

/// Every text is remembered, short ones too: a request repeats hundreds of short texts (tool
/// names, masked outputs' placeholders) whose encoding costs far more than a lookup.
fn count_text(cache: &mut HashMap<(Encoding, u64), u64>, encoding: Encoding, text: &str) -> u64 {
    let key = (encoding, fingerprint(text));
    if let Some(&n) = cache.get(&key) {
        return n;
    }
    let n = encoding.count(text);
    // Bounded: a pathological run must not grow this without end.
    if cache.len() > 100_000 {
        cache.clear();
    }
    cache.insert(key, n);
    n
}

/// The previous call's reported size plus the local count of what changed since. Clamped so
/// that a wild report (a server counting differently, or a tiny previous prompt) can neither
/// halve nor multiply the local count by more than 2×.
pub fn calibrate(counted: u64, then_counted: u64, then_reported: u64) -> u64 {
    let shifted = then_reported as i128 + (counted as i128 - then_counted as i128);
    let shifted = shifted.clamp(0, u64::MAX as i128) as u64;
    shifted.clamp(counted / 2, counted.saturating_mul(2))
}

/// A 64-bit hash of `text` with a fixed seed, so that every process counts alike. foldhash reads
/// eight bytes at a step: a request's whole history is hashed before each call, and a
/// byte-at-a-time hash was a measurable part of a turn.
fn fingerprint(text: &str) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0x9e37_79b9_7f4a_7c15).hash_one(text) ^ text.len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_models_get_their_encoding() {
        assert_eq!(
            Encoding::for_openai_model("gpt-4o-mini"),
            Some(Encoding::O200k)
        );
        assert_eq!(
            Encoding::for_openai_model("openai/gpt-5"),
            Some(Encoding::O200k)
        );
        assert_eq!(Encoding::for_openai_model("o3-mini"), Some(Encoding::O200k));
        assert_eq!(
            Encoding::for_openai_model("gpt-4-turbo"),
            Some(Encoding::Cl100k)
        );
        assert_eq!(
            Encoding::for_openai_model("gpt-3.5-turbo"),
            Some(Encoding::Cl100k)
        );
        assert_eq!(Encoding::for_openai_model("claude-sonnet-4"), None);
        assert_eq!(Encoding::for_openai_model("smollm2-135m"), None);
    }

    #[test]
    fn counts_real_tokens() {
        assert_eq!(Encoding::O200k.count("hello world"), 2);
        assert_eq!(Encoding::Cl100k.count("hello world"), 2);
        assert_eq!(Encoding::Bytes.count("hello world"), 3);
        let text = "fn main() { println!(\"hi\"); }\n".repeat(50);
        let n = Encoding::O200k.count(&text);
        assert!(n > 200 && n < 1000, "{n}");
    }

    #[test]
    fn cached_counts_equal_fresh_counts() {
        let mut cache = HashMap::new();
        let text = "a sentence of ordinary words repeated to pass the cache threshold. ".repeat(5);
        let first = count_text(&mut cache, Encoding::Cl100k, &text);
        assert_eq!(first, Encoding::Cl100k.count(&text));
        assert_eq!(cache.len(), 1);
        assert_eq!(count_text(&mut cache, Encoding::Cl100k, &text), first);
        assert_eq!(
            count_text(&mut cache, Encoding::O200k, &text),
            Encoding::O200k.count(&text)
        );
        assert_eq!(cache.len(), 2, "each encoding has counts of its own");
    }

    #[test]
    fn reasoning_sent_back_as_text_is_counted_and_opaque_reasoning_is_not() {
        use baton_core::{AssistantMessage, Message, ModelRequest, Reasoning, ReasoningField};
        let request = |reasoning: Vec<Reasoning>| ModelRequest {
            model: "gpt-4o".into(),
            messages: vec![Message::Assistant(AssistantMessage {
                content: Some("done".into()),
                tool_calls: vec![],
                reasoning,
            })],
            tools: vec![],
            response_mode: Default::default(),
            tool_choice: Default::default(),
            reasoning: Default::default(),
            provider_compaction_at: None,
        };
        let counter = TokenCounter::default();
        let plain = counter.count(Encoding::O200k, &request(vec![]));
        let thought = "First read the failing test, then the function it calls. ".repeat(20);
        let with_text = counter.count(
            Encoding::O200k,
            &request(vec![Reasoning::Text {
                text: thought.clone(),
                field: ReasoningField::ReasoningContent,
            }]),
        );
        assert_eq!(with_text - plain, Encoding::O200k.count(&thought));
        let with_item = counter.count(
            Encoding::O200k,
            &request(vec![Reasoning::Item {
                json: format!("{{\"encrypted_content\":\"{thought}\"}}"),
                summary: String::new(),
            }]),
        );
        assert_eq!(with_item, plain);
    }

    #[test]
    fn calibration_follows_the_server_within_bounds() {
        // The server counted 1,200 where we counted 1,000; 300 more since.
        assert_eq!(calibrate(1_300, 1_000, 1_200), 1_500);
        // Shrinking (masking, compaction) shifts down the same way.
        assert_eq!(calibrate(800, 1_000, 1_200), 1_000);
        // Absurd reports are clamped to 2× / ½ of the local count.
        assert_eq!(calibrate(1_000, 1_000, 1_000_000), 2_000);
        assert_eq!(calibrate(1_000, 1_000, 0), 500);
    }

    #[test]
    fn fingerprint_is_stable() {
        assert_eq!(fingerprint("abc"), fingerprint("abc"));
        assert_ne!(fingerprint("abc"), fingerprint("abd"));
    }
}
