//! Model profiles ("compensation layers"): how much context scaffolding a model gets. A strong
//! model with a large window keeps more recent outputs in full and is summarised rarely; a
//! small local model gets aggressive masking and an early compaction threshold.

use baton_core::{Compaction, ContextSettings, Masking};

/// A named profile: the context settings a run starts with unless configuration overrides them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelProfile {
    pub name: &'static str,
    pub context: ContextSettings,
    /// The OpenAI wire the model is served on: `responses` for the models OpenAI serves only
    /// there (the `*-codex` family, the `*-pro` reasoning models), else `chat`.
    pub wire_api: baton_core::WireApi,
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

fn profile(
    name: &'static str,
    window_tokens: u64,
    masking: Masking,
    keep_recent_turns: u32,
) -> ModelProfile {
    ModelProfile {
        name,
        context: ContextSettings {
            window_tokens,
            compact_at_percent: 80,
            masking,
            compaction: Compaction::Summarize { keep_recent_turns },
        },
        wire_api: baton_core::WireApi::Chat,
    }
}

/// Whether OpenAI serves the model only on the Responses API ("This model is only supported in
/// v1/responses" on Chat Completions): the `codex` models (`gpt-5-codex`, `gpt-5.1-codex-max`,
/// `codex-mini-latest`, …) and the `-pro` reasoning models (`o1-pro`, `o3-pro`, `gpt-5-pro`).
pub fn responses_only(model: &str) -> bool {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    let reasoning_family = ["o1", "o3", "gpt-5"].iter().any(|p| name.starts_with(p));
    name.contains("codex") || (reasoning_family && name.split('-').any(|part| part == "pro"))
}

/// The profile for a model name (matched case-insensitively on the part after any `vendor/`).
/// Unknown models get the default profile: a 32k window and moderate masking, which is safe
/// for most local models; `--context-window` corrects the window.
pub fn profile_for(model: &str) -> ModelProfile {
    let mut profile = family_profile(model);
    if responses_only(model) {
        profile.wire_api = baton_core::WireApi::Responses;
    }
    profile
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
}

const DEFAULT_MASKING: Masking = Masking::OlderThan {
    keep_turns: 4,
    batch_turns: 12,
    min_bytes: 400,
};

/// The profiles, first match wins (so `gpt-4.1` and `gpt-4o` come before `gpt-4`). A new model
/// family is a new row; the README's profile table lists the same rows.
const PROFILES: &[Row] = &[
    Row {
        name: "claude",
        matches: Matches::Prefix(&["claude"]),
        window_tokens: 200_000,
        masking: STRONG_MASKING,
        keep_recent_turns: 4,
    },
    Row {
        name: "gpt-4.1",
        matches: Matches::Prefix(&["gpt-4.1"]),
        window_tokens: 1_000_000,
        masking: STRONG_MASKING,
        keep_recent_turns: 4,
    },
    Row {
        name: "gpt-5",
        matches: Matches::Prefix(&["gpt-5"]),
        window_tokens: 400_000,
        masking: STRONG_MASKING,
        keep_recent_turns: 4,
    },
    Row {
        name: "openai-reasoning",
        matches: Matches::Prefix(&["o1", "o3", "o4"]),
        window_tokens: 200_000,
        masking: STRONG_MASKING,
        keep_recent_turns: 4,
    },
    Row {
        name: "gpt-4o",
        matches: Matches::Prefix(&["gpt-4o", "gpt-4-turbo", "chatgpt-"]),
        window_tokens: 128_000,
        masking: STRONG_MASKING,
        keep_recent_turns: 4,
    },
    Row {
        name: "gpt-3.5",
        matches: Matches::Prefix(&["gpt-3.5"]),
        window_tokens: 16_385,
        masking: DEFAULT_MASKING,
        keep_recent_turns: 2,
    },
    Row {
        name: "gpt-4",
        matches: Matches::Prefix(&["gpt-4"]),
        window_tokens: 8_192,
        masking: DEFAULT_MASKING,
        keep_recent_turns: 2,
    },
    Row {
        name: "small-local",
        matches: Matches::Contains("smollm"),
        window_tokens: 8_192,
        masking: SMALL_MASKING,
        keep_recent_turns: 1,
    },
];

fn family_profile(model: &str) -> ModelProfile {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    let matching = PROFILES.iter().find(|row| match row.matches {
        Matches::Prefix(prefixes) => prefixes.iter().any(|p| name.starts_with(p)),
        Matches::Contains(part) => name.contains(part),
    });
    match matching {
        Some(row) => profile(
            row.name,
            row.window_tokens,
            row.masking,
            row.keep_recent_turns,
        ),
        None => ModelProfile {
            name: "default",
            context: ContextSettings::default(),
            wire_api: baton_core::WireApi::Chat,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_well_formed() {
        assert_eq!(DEFAULT_MASKING, Masking::default());
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
}
