//! Model profiles ("compensation layers"): how much context scaffolding a model gets. A strong
//! model with a large window keeps more recent outputs in full and is summarised rarely; a
//! small local model gets aggressive masking and an early compaction threshold.

use baton_core::{Compaction, ContextSettings, Masking, ReasoningHistory, Thinking};

/// A named profile: what a run on the model starts with unless configuration overrides it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelProfile {
    pub name: &'static str,
    /// Window, masking and baton's own summary compaction.
    pub context: ContextSettings,
    /// The OpenAI wire the model is served on: `responses` for the models OpenAI serves only
    /// there (the `*-codex` family, the `*-pro` reasoning models), else `chat`.
    pub wire_api: baton_core::WireApi,
    /// Who compacts a long history by default. `Provider` applies only where the wire can
    /// (Anthropic Messages, OpenAI Responses); elsewhere baton summarises.
    pub compaction: CompactionBy,
    /// Reasoning defaults: the history rule for Chat Completions, and the thinking switch on
    /// the model's own wire (Anthropic). Configuration overrides each.
    pub reasoning: baton_core::ReasoningSettings,
    /// The most the model may write per answer (Anthropic's required `max_tokens`); `None`:
    /// the provider's default in baton (8,192 on Anthropic, unset on the OpenAI wires).
    pub max_output_tokens: Option<u32>,
}

/// Who compacts a history that outgrows the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompactionBy {
    /// baton writes a handoff summary (the default: works on every server).
    Baton,
    /// The provider, server-side, for models trained to compact themselves.
    Provider,
}

const STRONG_MASKING: Masking = Masking::OlderThan {
    keep_turns: 8,
    batch_turns: 16,
    min_bytes: 1_000,
};

const SMALL_MASKING: Masking = Masking::OlderThan {
    keep_turns: 2,
    batch_turns: 8,
    min_bytes: 200,
};

const DEFAULT_MASKING: Masking = Masking::OlderThan {
    keep_turns: 4,
    batch_turns: 12,
    min_bytes: 400,
};

/// Whether OpenAI serves the model only on the Responses API ("This model is only supported in
/// v1/responses" on Chat Completions): the `codex` models (`gpt-5-codex`, `gpt-5.1-codex-max`,
/// `codex-mini-latest`, …) and the `-pro` reasoning models (`o1-pro`, `o3-pro`, `gpt-5-pro`).
pub fn responses_only(model: &str) -> bool {
    let name = base_name(model);
    let reasoning_family = ["o1", "o3", "gpt-5"].iter().any(|p| name.starts_with(p));
    name.contains("codex") || (reasoning_family && name.split('-').any(|part| part == "pro"))
}

/// The profile for a model name (matched case-insensitively on the part after any `vendor/`).
/// Unknown models get the default profile: a 32k window and moderate masking, which is safe
/// for most local models; `--context-window` corrects the window.
pub fn profile_for(model: &str) -> ModelProfile {
    let name = base_name(model);
    let row = PROFILES
        .iter()
        .find(|row| match row.matches {
            Matches::Prefix(prefixes) => prefixes.iter().any(|p| name.starts_with(p)),
            Matches::Contains(part) => name.contains(part),
        })
        .unwrap_or(&DEFAULT_ROW);
    ModelProfile {
        name: row.name,
        context: ContextSettings {
            window_tokens: row.window_tokens,
            compact_at_percent: 80,
            masking: row.masking,
            compaction: Compaction::Summarize {
                keep_recent_turns: row.keep_recent_turns,
            },
        },
        wire_api: if responses_only(model) {
            baton_core::WireApi::Responses
        } else {
            baton_core::WireApi::Chat
        },
        compaction: row.compaction,
        reasoning: baton_core::ReasoningSettings {
            history: row.reasoning_history,
            thinking: row.thinking,
            ..Default::default()
        },
        max_output_tokens: row.max_output_tokens,
    }
}

fn base_name(model: &str) -> String {
    model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase()
}

/// How a profile recognises its models: a prefix of the lower-cased name after any `vendor/`,
/// or a part anywhere in it.
#[derive(Clone, Copy, Debug)]
enum Matches {
    Prefix(&'static [&'static str]),
    Contains(&'static str),
}

/// One row of the profile table.
struct Row {
    name: &'static str,
    matches: Matches,
    window_tokens: u64,
    masking: Masking,
    keep_recent_turns: u32,
    compaction: CompactionBy,
    reasoning_history: ReasoningHistory,
    thinking: Option<Thinking>,
    max_output_tokens: Option<u32>,
}

/// Anything no row matches: a 32k window and moderate masking, safe for most local models.
const DEFAULT_ROW: Row = Row {
    name: "default",
    matches: Matches::Prefix(&[]),
    window_tokens: 32_768,
    masking: DEFAULT_MASKING,
    keep_recent_turns: 2,
    compaction: CompactionBy::Baton,
    reasoning_history: ReasoningHistory::Preserve,
    thinking: None,
    max_output_tokens: None,
};

/// A hosted frontier model: a large window, light scaffolding.
const STRONG_ROW: Row = Row {
    window_tokens: 128_000,
    masking: STRONG_MASKING,
    keep_recent_turns: 4,
    ..DEFAULT_ROW
};

/// The profiles, first match wins (so `gpt-4.1` and `gpt-4o` come before `gpt-4`). A new model
/// family is a new row; the README's profile table lists the same rows.
const PROFILES: &[Row] = &[
    // Anthropic's models with adaptive thinking and server-side compaction (`compact_20260112`),
    // as the adaptive-thinking and compaction pages list them; Opus 4.7 accepts no other
    // thinking mode. Adaptive thinking spends output tokens, hence the larger `max_tokens`.
    Row {
        name: "claude-adaptive",
        matches: Matches::Prefix(&[
            "claude-opus-4-6",
            "claude-sonnet-4-6",
            "claude-opus-4-7",
            "claude-mythos",
        ]),
        window_tokens: 200_000,
        compaction: CompactionBy::Provider,
        thinking: Some(Thinking::Adaptive),
        max_output_tokens: Some(32_000),
        ..STRONG_ROW
    },
    Row {
        name: "claude",
        matches: Matches::Prefix(&["claude"]),
        window_tokens: 200_000,
        ..STRONG_ROW
    },
    // OpenAI's long-horizon coding models (Responses only), trained to work across compactions.
    Row {
        name: "gpt-codex",
        matches: Matches::Contains("-codex"),
        window_tokens: 400_000,
        compaction: CompactionBy::Provider,
        ..STRONG_ROW
    },
    Row {
        name: "gpt-4.1",
        matches: Matches::Prefix(&["gpt-4.1"]),
        window_tokens: 1_000_000,
        ..STRONG_ROW
    },
    Row {
        name: "gpt-5",
        matches: Matches::Prefix(&["gpt-5"]),
        window_tokens: 400_000,
        ..STRONG_ROW
    },
    Row {
        name: "openai-reasoning",
        matches: Matches::Prefix(&["o1", "o3", "o4"]),
        window_tokens: 200_000,
        ..STRONG_ROW
    },
    Row {
        name: "gpt-4o",
        matches: Matches::Prefix(&["gpt-4o", "gpt-4-turbo", "chatgpt-"]),
        ..STRONG_ROW
    },
    Row {
        name: "gpt-3.5",
        matches: Matches::Prefix(&["gpt-3.5"]),
        window_tokens: 16_385,
        ..DEFAULT_ROW
    },
    Row {
        name: "gpt-4",
        matches: Matches::Prefix(&["gpt-4"]),
        window_tokens: 8_192,
        ..DEFAULT_ROW
    },
    // The hosted Chinese frontier models. Each returns its thinking as `reasoning_content` and
    // requires it back on assistant messages with tool calls (DeepSeek thinking mode, Kimi K2
    // thinking, GLM's preserved thinking): `preserve`. Only the hosted names match, so a small
    // local distill (`deepseek-r1:7b`) keeps the default window.
    Row {
        name: "deepseek",
        matches: Matches::Prefix(&[
            "deepseek-chat",
            "deepseek-reasoner",
            "deepseek-v3",
            "deepseek-v4",
        ]),
        ..STRONG_ROW
    },
    Row {
        name: "kimi",
        matches: Matches::Prefix(&["kimi-k2"]),
        window_tokens: 256_000,
        ..STRONG_ROW
    },
    Row {
        name: "glm",
        matches: Matches::Prefix(&["glm-4.5", "glm-4.6", "glm-4.7", "glm-5"]),
        ..STRONG_ROW
    },
    // MiniMax M2 keeps its thinking inside `content` (`<think>…</think>`), which must go back
    // unchanged; baton sends assistant content back as it came.
    Row {
        name: "minimax",
        matches: Matches::Prefix(&["minimax-m2"]),
        window_tokens: 200_000,
        ..STRONG_ROW
    },
    Row {
        name: "small-local",
        matches: Matches::Contains("smollm"),
        window_tokens: 8_192,
        masking: SMALL_MASKING,
        keep_recent_turns: 1,
        ..DEFAULT_ROW
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_well_formed() {
        assert_eq!(DEFAULT_MASKING, Masking::default());
        assert_eq!(
            profile_for("some-local-model").context,
            ContextSettings::default(),
            "the default row is the default context"
        );
        let mut names: Vec<&str> = PROFILES.iter().map(|r| r.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PROFILES.len(), "profile names are unique");
        // A longer prefix must come before a shorter one it extends, or it never matches.
        for (i, row) in PROFILES.iter().enumerate() {
            for later in &PROFILES[i + 1..] {
                if let (Matches::Prefix(a), Matches::Prefix(b)) = (row.matches, later.matches) {
                    for short in b {
                        assert!(
                            !a.iter()
                                .any(|long| short.starts_with(long) && short != long),
                            "{} shadows {}",
                            row.name,
                            later.name
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_models_served_only_on_responses_are_recognised() {
        for model in [
            "gpt-5-codex",
            "gpt-5.1-codex-max",
            "openai/gpt-5.1-codex-mini",
            "codex-mini-latest",
            "o3-pro",
            "o1-pro-2025-03-19",
            "gpt-5-pro",
        ] {
            assert!(responses_only(model), "{model}");
            assert_eq!(profile_for(model).wire_api, baton_core::WireApi::Responses);
        }
        for model in [
            "gpt-5",
            "gpt-5-mini",
            "o3",
            "gpt-4o",
            "deepseek-v4-pro",
            "qwen3-coder",
        ] {
            assert!(!responses_only(model), "{model}");
            assert_eq!(profile_for(model).wire_api, baton_core::WireApi::Chat);
        }
    }

    #[test]
    fn known_families_get_their_windows() {
        for (model, name, window) in [
            ("claude-sonnet-4-5", "claude", 200_000),
            ("anthropic/claude-opus-4", "claude", 200_000),
            ("gpt-4o-mini", "gpt-4o", 128_000),
            ("gpt-4.1", "gpt-4.1", 1_000_000),
            ("gpt-4", "gpt-4", 8_192),
            ("o3-mini", "openai-reasoning", 200_000),
            ("SmolLM2-135M-Instruct", "small-local", 8_192),
            ("qwen2.5-coder", "default", 32_768),
        ] {
            let profile = profile_for(model);
            assert_eq!(
                (profile.name, profile.context.window_tokens),
                (name, window),
                "{model}"
            );
        }
    }

    #[test]
    fn stronger_models_get_less_scaffolding() {
        let keep = |model| match profile_for(model).context.masking {
            Masking::OlderThan { keep_turns, .. } => keep_turns,
            Masking::Off => u32::MAX,
        };
        assert!(keep("claude-sonnet-4") > keep("qwen2.5-coder"));
        assert!(keep("qwen2.5-coder") > keep("smollm2"));
    }

    #[test]
    fn profiles_decide_reasoning_compaction_and_output_length() {
        let adaptive = profile_for("claude-opus-4-6");
        assert_eq!(adaptive.name, "claude-adaptive");
        assert_eq!(adaptive.reasoning.thinking, Some(Thinking::Adaptive));
        assert_eq!(adaptive.compaction, CompactionBy::Provider);
        assert_eq!(adaptive.max_output_tokens, Some(32_000));
        assert_eq!(
            profile_for("anthropic/claude-opus-4-7").name,
            "claude-adaptive"
        );
        let older = profile_for("claude-sonnet-4-5");
        assert_eq!(older.name, "claude");
        assert_eq!(
            (
                older.reasoning.thinking,
                older.compaction,
                older.max_output_tokens
            ),
            (None, CompactionBy::Baton, None)
        );
        let codex = profile_for("gpt-5.1-codex-max");
        assert_eq!(
            (codex.name, codex.compaction, codex.wire_api),
            (
                "gpt-codex",
                CompactionBy::Provider,
                baton_core::WireApi::Responses
            )
        );
        assert_eq!(profile_for("gpt-5-mini").compaction, CompactionBy::Baton);
        for (model, name, window) in [
            ("deepseek-v4-flash", "deepseek", 128_000),
            ("deepseek-reasoner", "deepseek", 128_000),
            ("deepseek-r1:7b", "default", 32_768),
            ("kimi-k2-thinking", "kimi", 256_000),
            ("glm-4.6", "glm", 128_000),
            ("zai-org/GLM-4.6", "glm", 128_000),
            ("MiniMax-M2", "minimax", 200_000),
        ] {
            let profile = profile_for(model);
            assert_eq!(
                (profile.name, profile.context.window_tokens),
                (name, window),
                "{model}"
            );
            assert_eq!(
                profile.reasoning.history,
                ReasoningHistory::Preserve,
                "{model}"
            );
        }
    }
}
