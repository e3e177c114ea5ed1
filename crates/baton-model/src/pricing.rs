//! What a model call cost, in US dollars, from the token usage the server reported.
//!
//! Prices are list prices per million tokens. The built-in table covers common models of OpenAI,
//! Anthropic and DeepSeek; configuration can override or extend it. A model the table does not
//! know has an unknown cost (`None`), never a silent zero.

use std::collections::HashMap;

use baton_core::Usage;
use serde::{Deserialize, Serialize};

/// A model's prices in USD per million tokens.
///
/// In configuration, `cached_input_per_mtok` and `cache_write_per_mtok` may be left out: they
/// then default to `input_per_mtok`, which is right for servers without a prompt-cache discount
/// and never under-counts.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "PriceConfig")]
pub struct Price {
    /// Prompt tokens neither read from nor written to the prompt cache.
    pub input_per_mtok: f64,
    /// Prompt tokens read from the prompt cache.
    pub cached_input_per_mtok: f64,
    /// Prompt tokens written to the prompt cache (Anthropic bills these above the input rate).
    pub cache_write_per_mtok: f64,
    /// Completion tokens, reasoning included.
    pub output_per_mtok: f64,
}

/// A price in configuration was not a usable number.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error(
    "price `{field}` must be a finite, non-negative number of USD per million tokens, not {value}"
)]
pub struct PriceError {
    pub field: &'static str,
    pub value: f64,
}

/// The configuration form of [`Price`]: cache rates optional, unknown keys rejected so that a
/// misspelt rate is an error instead of silently falling back to the input rate.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriceConfig {
    input_per_mtok: f64,
    output_per_mtok: f64,
    cached_input_per_mtok: Option<f64>,
    cache_write_per_mtok: Option<f64>,
}

impl TryFrom<PriceConfig> for Price {
    type Error = PriceError;

    fn try_from(config: PriceConfig) -> Result<Self, Self::Error> {
        let price = Price {
            input_per_mtok: config.input_per_mtok,
            cached_input_per_mtok: config
                .cached_input_per_mtok
                .unwrap_or(config.input_per_mtok),
            cache_write_per_mtok: config.cache_write_per_mtok.unwrap_or(config.input_per_mtok),
            output_per_mtok: config.output_per_mtok,
        };
        for (field, value) in [
            ("input_per_mtok", price.input_per_mtok),
            ("cached_input_per_mtok", price.cached_input_per_mtok),
            ("cache_write_per_mtok", price.cache_write_per_mtok),
            ("output_per_mtok", price.output_per_mtok),
        ] {
            if !value.is_finite() || value < 0.0 {
                return Err(PriceError { field, value });
            }
        }
        Ok(price)
    }
}

/// Cost in USD of one call with `usage` at `price`.
///
/// `usage.prompt_tokens` counts every input token, cache reads and writes included, so the plain
/// input rate applies to what is left after both. A server that reports more cached (or
/// cache-written) tokens than prompt tokens is trusted only up to the prompt count: the cost is
/// never negative and no input token is billed twice.
pub fn cost_usd(usage: &Usage, price: &Price) -> f64 {
    let prompt = usage.prompt_tokens;
    let cached = usage.cached_prompt_tokens.unwrap_or(0).min(prompt);
    let written = usage.cache_write_tokens.unwrap_or(0).min(prompt - cached);
    let uncached = prompt - cached - written;
    (uncached as f64 * price.input_per_mtok
        + cached as f64 * price.cached_input_per_mtok
        + written as f64 * price.cache_write_per_mtok
        + usage.completion_tokens as f64 * price.output_per_mtok)
        / 1_000_000.0
}

/// Built-in list prices, USD per million tokens: (model, input, cache read, cache write, output).
///
/// Basis: list prices on the providers' own pricing pages (each group names its page and when
/// it was read), cross-checked against independent price tables. Standard tier only: batch
/// discounts, Anthropic's 1-hour cache writes (2x input) and long-context surcharges are not
/// modelled — configure overrides where they matter. Left out on purpose: models whose price
/// could not be confirmed on the provider's own page (SiliconFlow's, Kimi K2.5/K2.6, Claude
/// Opus 4.6+), and models priced by prompt-length tier (Qwen on DashScope, Doubao/Seed on Ark),
/// which one rate per token cannot express without under-counting long prompts — a budget
/// must never be passed because the table guessed low. Mainland endpoints (`qwen-cn`,
/// `doubao`, `glm`/`zhipu` on open.bigmodel.cn) bill in CNY: the USD rates below are the
/// international endpoints'; set `[prices."MODEL"]` for what your account pays.
const DEFAULT_PRICES: &[(&str, f64, f64, f64, f64)] = &[
    // OpenAI bills no cache writes: the write rate is the input rate.
    ("gpt-4o", 2.50, 1.25, 2.50, 10.00),
    // The first GPT-4o snapshot kept its launch price and has no cache discount.
    ("gpt-4o-2024-05-13", 5.00, 5.00, 5.00, 15.00),
    ("gpt-4o-mini", 0.15, 0.075, 0.15, 0.60),
    ("gpt-4.1", 2.00, 0.50, 2.00, 8.00),
    ("gpt-4.1-mini", 0.40, 0.10, 0.40, 1.60),
    ("gpt-4.1-nano", 0.10, 0.025, 0.10, 0.40),
    // o3 after the June 2025 price cut.
    ("o3", 2.00, 0.50, 2.00, 8.00),
    ("o4-mini", 1.10, 0.275, 1.10, 4.40),
    // The GPT-5 family, developers.openai.com/api/docs/pricing (read 2026-12-01): cached input
    // 0.1x, no cache-write charge.
    ("gpt-5", 1.25, 0.125, 1.25, 10.00),
    ("gpt-5-mini", 0.25, 0.025, 0.25, 2.00),
    ("gpt-5-nano", 0.05, 0.005, 0.05, 0.40),
    ("gpt-5-codex", 1.25, 0.125, 1.25, 10.00),
    ("gpt-5.1", 1.25, 0.125, 1.25, 10.00),
    ("gpt-5.1-codex", 1.25, 0.125, 1.25, 10.00),
    ("gpt-5.1-codex-max", 1.25, 0.125, 1.25, 10.00),
    ("gpt-5.1-codex-mini", 0.25, 0.025, 0.25, 2.00),
    // Anthropic: cache reads 0.1x input, 5-minute cache writes 1.25x input.
    ("claude-opus-4", 15.00, 1.50, 18.75, 75.00),
    ("claude-opus-4-1", 15.00, 1.50, 18.75, 75.00),
    ("claude-sonnet-4", 3.00, 0.30, 3.75, 15.00),
    ("claude-3-7-sonnet", 3.00, 0.30, 3.75, 15.00),
    ("claude-3-5-haiku", 0.80, 0.08, 1.00, 4.00),
    // The 4.5 models, platform.claude.com/docs/en/about-claude/pricing (read 2026-12-01).
    ("claude-opus-4-5", 5.00, 0.50, 6.25, 25.00),
    ("claude-sonnet-4-5", 3.00, 0.30, 3.75, 15.00),
    ("claude-haiku-4-5", 1.00, 0.10, 1.25, 5.00),
    // DeepSeek: both endpoints serve DeepSeek-V3.2 at one price since 2025-09-29. A cache miss
    // is the input rate; there is no separate write charge.
    ("deepseek-chat", 0.28, 0.028, 0.28, 0.42),
    ("deepseek-reasoner", 0.28, 0.028, 0.28, 0.42),
    // Zhipu's GLM on Z.ai, docs.z.ai/guides/overview/pricing (read 2026-12-01); cache storage
    // is free for a limited time, so writes are billed as plain input.
    ("glm-4.7", 0.60, 0.11, 0.60, 2.20),
    ("glm-4.6", 0.60, 0.11, 0.60, 2.20),
    ("glm-4.5", 0.60, 0.11, 0.60, 2.20),
    ("glm-4.5-air", 0.20, 0.03, 0.20, 1.10),
    // MiniMax, platform.minimax.io/docs/guides/pricing-paygo (last updated 2026-01-17): cache
    // reads 0.03, cache writes 0.375.
    ("minimax-m2", 0.30, 0.03, 0.375, 1.20),
    ("minimax-m2.1", 0.30, 0.03, 0.375, 1.20),
    ("minimax-m2.1-lightning", 0.30, 0.03, 0.375, 2.40),
];

/// Prices by model name, with lookup that tolerates snapshot suffixes and provider prefixes.
#[derive(Clone, Debug, PartialEq)]
pub struct PriceTable {
    /// Keys are lower-case.
    prices: HashMap<String, Price>,
}

impl Default for PriceTable {
    fn default() -> Self {
        Self::defaults()
    }
}

impl PriceTable {
    /// A table that knows no model: every cost is unknown until prices are added.
    pub fn empty() -> Self {
        PriceTable {
            prices: HashMap::new(),
        }
    }

    /// The built-in list prices (see the comment on `DEFAULT_PRICES` for their basis).
    pub fn defaults() -> Self {
        let prices = DEFAULT_PRICES
            .iter()
            .map(|&(model, input, cached, write, output)| {
                let price = Price {
                    input_per_mtok: input,
                    cached_input_per_mtok: cached,
                    cache_write_per_mtok: write,
                    output_per_mtok: output,
                };
                (model.to_string(), price)
            })
            .collect();
        PriceTable { prices }
    }

    /// This table with `overrides` added; an override replaces a built-in price of the same
    /// name. Names are matched case-insensitively, like lookups.
    pub fn with_overrides(mut self, overrides: HashMap<String, Price>) -> Self {
        for (model, price) in overrides {
            self.prices.insert(normalize(&model), price);
        }
        self
    }

    /// The price of `model`, if known.
    ///
    /// Tried in order, first hit wins: the exact name; the name with `.` read as `-` (OpenRouter
    /// writes `claude-3.7-sonnet`); and the longest known name that `model` extends by a
    /// snapshot tag only (`-20250514`, `-2024-08-06`, `-latest`, `-0`), so
    /// `claude-sonnet-4-20250514` is priced as `claude-sonnet-4`. A provider-prefixed name
    /// such as `openai/gpt-4o` is tried whole first, then by its part after the last `/`.
    ///
    /// Deliberately not a bare prefix match: `o3-mini`, `claude-opus-4-5` or `gpt-4o-audio` are
    /// other models with other prices, so they are unknown rather than mispriced.
    pub fn price(&self, model: &str) -> Option<&Price> {
        let model = normalize(model);
        let after_slash = model.rsplit_once('/').map(|(_, name)| name);
        std::iter::once(model.as_str())
            .chain(after_slash)
            .find_map(|name| self.resolve(name))
    }

    /// Cost in USD of a call to `model` with `usage`; `None` when the model's price is unknown.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        self.price(model).map(|price| cost_usd(usage, price))
    }

    fn resolve(&self, name: &str) -> Option<&Price> {
        let dashed = name.replace('.', "-");
        let variants = if dashed == name {
            vec![name]
        } else {
            vec![name, dashed.as_str()]
        };
        if let Some(price) = variants.iter().find_map(|n| self.prices.get(*n)) {
            return Some(price);
        }
        variants.iter().find_map(|n| self.snapshot_of(n))
    }

    /// The price of the longest known model that `name` is a snapshot of.
    fn snapshot_of(&self, name: &str) -> Option<&Price> {
        self.prices
            .iter()
            .filter(|(known, _)| {
                name.strip_prefix(known.as_str())
                    .and_then(|rest| rest.strip_prefix('-'))
                    .is_some_and(is_snapshot_tag)
            })
            .max_by_key(|(known, _)| known.len())
            .map(|(_, price)| price)
    }
}

fn normalize(model: &str) -> String {
    model.trim().to_ascii_lowercase()
}

/// Whether `tag` names a snapshot or alias of a model rather than another model: a date
/// (`20250514`, `2024-08-06`), `latest`, or `0` (Anthropic's `claude-sonnet-4-0` alias).
fn is_snapshot_tag(tag: &str) -> bool {
    let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let dashed_date = {
        let parts: Vec<&str> = tag.split('-').collect();
        matches!(parts.as_slice(), [y, m, d] if y.len() == 4 && m.len() == 2 && d.len() == 2
            && parts.iter().all(|p| all_digits(p)))
    };
    tag == "latest" || tag == "0" || (tag.len() == 8 && all_digits(tag)) || dashed_date
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn usage(prompt: u64, cached: Option<u64>, written: Option<u64>, completion: u64) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            cached_prompt_tokens: cached,
            cache_write_tokens: written,
            reasoning_tokens: None,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
    }

    fn default_price(model: &str) -> Price {
        *PriceTable::defaults()
            .prices
            .get(model)
            .unwrap_or_else(|| panic!("{model} is not a built-in key"))
    }

    #[test]
    fn every_built_in_model_is_found_by_its_own_name() {
        let table = PriceTable::defaults();
        for &(model, input, cached, write, output) in DEFAULT_PRICES {
            let price = table.price(model).unwrap_or_else(|| panic!("{model}"));
            assert_eq!(
                (
                    price.input_per_mtok,
                    price.cached_input_per_mtok,
                    price.cache_write_per_mtok,
                    price.output_per_mtok
                ),
                (input, cached, write, output),
                "{model}"
            );
        }
        assert_eq!(table.prices.len(), DEFAULT_PRICES.len(), "duplicate keys");
    }

    #[test]
    fn the_brief_s_model_list_is_covered() {
        let table = PriceTable::defaults();
        for model in [
            "gpt-4o",
            "gpt-4o-mini",
            "gpt-4.1",
            "gpt-4.1-mini",
            "gpt-4.1-nano",
            "o3",
            "o4-mini",
            "claude-opus-4",
            "claude-sonnet-4",
            "claude-3-7-sonnet",
            "claude-3-5-haiku",
            "deepseek-chat",
            "deepseek-reasoner",
        ] {
            assert!(table.price(model).is_some(), "{model}");
        }
        // The current models of the presets whose providers publish one USD rate per token.
        for (model, base) in [
            ("gpt-5.1-codex-max", "gpt-5.1-codex-max"),
            ("openai/gpt-5-mini", "gpt-5-mini"),
            ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
            ("claude-opus-4-5-20251101", "claude-opus-4-5"),
            ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
            ("z-ai/glm-4.6", "glm-4.6"),
            ("GLM-4.5-Air", "glm-4.5-air"),
            ("MiniMax-M2.1", "minimax-m2.1"),
            ("MiniMax-M2", "minimax-m2"),
        ] {
            assert_eq!(table.price(model), Some(&default_price(base)), "{model}");
        }
    }

    #[test]
    fn anthropic_cache_rates_follow_the_published_multipliers() {
        for &(model, input, cached, write, _) in DEFAULT_PRICES {
            if model.starts_with("claude-") {
                assert!(close(cached, input * 0.1), "{model} read rate");
                assert!(close(write, input * 1.25), "{model} write rate");
            } else if model.starts_with("minimax-") {
                // MiniMax publishes a write rate of 1.25x input too.
                assert!(close(write, input * 1.25), "{model} write rate");
                assert!(cached <= input, "{model}");
            } else {
                // The others bill no cache writes: the input rate.
                assert_eq!(write, input, "{model}");
                assert!(cached <= input, "{model}");
            }
        }
    }

    #[test]
    fn snapshots_and_aliases_are_priced_as_their_model() {
        let table = PriceTable::defaults();
        for (served, base) in [
            ("claude-sonnet-4-20250514", "claude-sonnet-4"),
            ("claude-sonnet-4-0", "claude-sonnet-4"),
            ("claude-opus-4-20250514", "claude-opus-4"),
            ("claude-opus-4-1-20250805", "claude-opus-4-1"),
            ("claude-3-7-sonnet-20250219", "claude-3-7-sonnet"),
            ("claude-3-7-sonnet-latest", "claude-3-7-sonnet"),
            ("claude-3-5-haiku-20241022", "claude-3-5-haiku"),
            ("gpt-4o-2024-08-06", "gpt-4o"),
            ("gpt-4o-2024-11-20", "gpt-4o"),
            ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
            ("gpt-4.1-2025-04-14", "gpt-4.1"),
            ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
            ("gpt-4.1-nano-2025-04-14", "gpt-4.1-nano"),
            ("o3-2025-04-16", "o3"),
            ("o4-mini-2025-04-16", "o4-mini"),
        ] {
            assert_eq!(
                table.price(served),
                Some(&default_price(base)),
                "{served} should be priced as {base}"
            );
        }
    }

    #[test]
    fn an_exact_snapshot_entry_beats_its_model_s_price() {
        let table = PriceTable::defaults();
        let old = table.price("gpt-4o-2024-05-13").unwrap();
        assert_eq!(old.input_per_mtok, 5.0);
        assert_ne!(old, table.price("gpt-4o").unwrap());
    }

    #[test]
    fn other_models_sharing_a_prefix_are_unknown_not_mispriced() {
        let table = PriceTable::defaults();
        for model in [
            "o3-mini",
            "o3-pro",
            "o3-deep-research",
            "o1",
            "gpt-4",
            "gpt-4o-audio-preview",
            "gpt-4o-mini-tts",
            "gpt-4o-realtime-preview-2024-12-17",
            "gpt-4.1-mini-fast",
            "gpt-5-pro",
            "gpt-5.1-chat-latest-preview",
            "claude-opus-4-6",
            "claude-sonnet-4-6",
            "claude-3-5-sonnet-20241022",
            "glm-4.5v",
            "minimax-m2-her",
            "qwen3-coder-plus",
            "deepseek-chat-v3-0324",
            "deepseek-coder",
            // Not a date: eight characters, not eight digits.
            "gpt-4o-2024080x",
            "gpt-4o-",
            "",
            "llama-3.1-8b-instruct",
        ] {
            assert_eq!(table.price(model), None, "{model:?}");
        }
    }

    #[test]
    fn provider_prefixed_names_match_after_the_slash() {
        let table = PriceTable::defaults();
        for (routed, base) in [
            ("openai/gpt-4o", "gpt-4o"),
            ("openai/gpt-4o-mini", "gpt-4o-mini"),
            ("openai/gpt-4.1", "gpt-4.1"),
            ("openai/o4-mini", "o4-mini"),
            ("anthropic/claude-sonnet-4", "claude-sonnet-4"),
            ("anthropic/claude-opus-4", "claude-opus-4"),
            ("anthropic/claude-3.7-sonnet", "claude-3-7-sonnet"),
            ("anthropic/claude-3.5-haiku", "claude-3-5-haiku"),
            ("anthropic/claude-3.5-haiku-20241022", "claude-3-5-haiku"),
            ("deepseek/deepseek-chat", "deepseek-chat"),
            ("openrouter/openai/gpt-4.1-nano", "gpt-4.1-nano"),
        ] {
            assert_eq!(
                table.price(routed),
                Some(&default_price(base)),
                "{routed} should be priced as {base}"
            );
        }
        // Variants with a price of their own (OpenRouter's free tier) are not guessed.
        for model in [
            "deepseek/deepseek-chat:free",
            "anthropic/claude-3.7-sonnet:thinking",
        ] {
            assert_eq!(table.price(model), None, "{model}");
        }
    }

    #[test]
    fn names_are_case_and_whitespace_insensitive() {
        let table = PriceTable::defaults();
        assert_eq!(table.price(" GPT-4o "), table.price("gpt-4o"));
        assert_eq!(
            table.price("Anthropic/Claude-Sonnet-4-20250514"),
            table.price("claude-sonnet-4")
        );
    }

    #[test]
    fn overrides_win_and_extend() {
        let custom = Price {
            input_per_mtok: 1.0,
            cached_input_per_mtok: 0.5,
            cache_write_per_mtok: 1.0,
            output_per_mtok: 2.0,
        };
        let local = Price {
            input_per_mtok: 0.0,
            cached_input_per_mtok: 0.0,
            cache_write_per_mtok: 0.0,
            output_per_mtok: 0.0,
        };
        let routed = Price {
            input_per_mtok: 9.0,
            cached_input_per_mtok: 9.0,
            cache_write_per_mtok: 9.0,
            output_per_mtok: 9.0,
        };
        let table = PriceTable::defaults().with_overrides(HashMap::from([
            ("GPT-4o".to_string(), custom),
            ("my-local-llama".to_string(), local),
            ("openrouter/openai/o3".to_string(), routed),
        ]));
        assert_eq!(table.price("gpt-4o"), Some(&custom));
        // The override also prices the model's snapshots…
        assert_eq!(table.price("gpt-4o-2024-08-06"), Some(&custom));
        assert_eq!(table.price("openai/gpt-4o"), Some(&custom));
        // …but an exact built-in snapshot entry stays exact.
        assert_eq!(
            table.price("gpt-4o-2024-05-13").unwrap().input_per_mtok,
            5.0
        );
        // A model the defaults do not know becomes known, with a real zero cost.
        let u = usage(1000, None, None, 1000);
        assert_eq!(table.cost("my-local-llama", &u), Some(0.0));
        // A full provider-prefixed override beats the default for the bare name.
        assert_eq!(table.price("openrouter/openai/o3"), Some(&routed));
        assert_eq!(table.price("openai/o3"), Some(&default_price("o3")));
        // Untouched models keep their defaults.
        assert_eq!(table.price("o4-mini"), Some(&default_price("o4-mini")));
    }

    #[test]
    fn cost_splits_prompt_tokens_into_plain_cached_and_written() {
        let price = default_price("claude-sonnet-4");
        let u = usage(1_000_000, Some(200_000), Some(100_000), 50_000);
        // 700k plain at $3 + 200k read at $0.30 + 100k written at $3.75 + 50k out at $15.
        let expected = 2.1 + 0.06 + 0.375 + 0.75;
        let cost = cost_usd(&u, &price);
        assert!(close(cost, expected), "{cost} != {expected}");
        assert!(close(
            PriceTable::defaults()
                .cost("claude-sonnet-4-20250514", &u)
                .unwrap(),
            expected
        ));
    }

    #[test]
    fn cost_without_cache_figures_bills_every_prompt_token_at_the_input_rate() {
        let price = default_price("gpt-4.1");
        let cost = cost_usd(&usage(10_000, None, None, 2_000), &price);
        assert!(close(cost, 10_000.0 * 2.0 / 1e6 + 2_000.0 * 8.0 / 1e6));
        let with_zeroes = cost_usd(&usage(10_000, Some(0), Some(0), 2_000), &price);
        assert!(close(cost, with_zeroes));
        assert_eq!(cost_usd(&usage(0, None, None, 0), &price), 0.0);
    }

    #[test]
    fn reasoning_tokens_are_not_billed_twice() {
        let price = default_price("o4-mini");
        let mut u = usage(1_000, None, None, 500);
        let without = cost_usd(&u, &price);
        u.reasoning_tokens = Some(400);
        assert_eq!(cost_usd(&u, &price), without);
    }

    #[test]
    fn inconsistent_cache_figures_never_make_a_negative_or_inflated_cost() {
        let price = default_price("claude-opus-4");
        // More cache reads than prompt tokens: all prompt tokens count as reads, no more.
        let cost = cost_usd(&usage(100, Some(1_000), None, 0), &price);
        assert!(close(cost, 100.0 * 1.5 / 1e6), "{cost}");
        // Reads and writes together above the prompt: writes get what reads left over.
        let cost = cost_usd(&usage(100, Some(60), Some(1_000), 10), &price);
        let expected = (60.0 * 1.5 + 40.0 * 18.75 + 10.0 * 75.0) / 1e6;
        assert!(close(cost, expected), "{cost} != {expected}");
        // Extreme values stay finite and non-negative.
        let cost = cost_usd(
            &usage(u64::MAX, Some(u64::MAX), Some(u64::MAX), u64::MAX),
            &price,
        );
        assert!(cost.is_finite() && cost >= 0.0);
    }

    #[test]
    fn unknown_models_have_an_unknown_cost() {
        let u = usage(1_000, Some(10), None, 10);
        assert_eq!(PriceTable::defaults().cost("some-new-model", &u), None);
        assert_eq!(PriceTable::empty().cost("gpt-4o", &u), None);
        assert_eq!(PriceTable::default(), PriceTable::defaults());
    }

    #[test]
    fn config_prices_default_their_cache_rates_to_the_input_rate() {
        let price: Price =
            serde_json::from_str(r#"{"input_per_mtok": 0.5, "output_per_mtok": 1.5}"#).unwrap();
        assert_eq!(
            price,
            Price {
                input_per_mtok: 0.5,
                cached_input_per_mtok: 0.5,
                cache_write_per_mtok: 0.5,
                output_per_mtok: 1.5,
            }
        );
        let price: Price = serde_json::from_str(
            r#"{"input_per_mtok": 3, "cached_input_per_mtok": 0.3,
                "cache_write_per_mtok": 3.75, "output_per_mtok": 15}"#,
        )
        .unwrap();
        assert_eq!(price, default_price("claude-sonnet-4"));
        // What is serialized reads back the same.
        let back: Price = serde_json::from_str(&serde_json::to_string(&price).unwrap()).unwrap();
        assert_eq!(back, price);
        // The configuration shape: a map of model name to price.
        let map: HashMap<String, Price> = serde_json::from_str(
            r#"{"qwen3-coder": {"input_per_mtok": 0.2, "output_per_mtok": 0.8}}"#,
        )
        .unwrap();
        let table = PriceTable::defaults().with_overrides(map);
        assert!(table.price("qwen3-coder").is_some());
    }

    #[test]
    fn bad_config_prices_are_rejected() {
        for json in [
            r#"{"input_per_mtok": -1, "output_per_mtok": 1}"#,
            r#"{"input_per_mtok": 1, "output_per_mtok": 1, "cached_input_per_mtok": -0.1}"#,
            r#"{"input_per_mtok": 1}"#,
            // A misspelt rate must not fall back to the input rate silently.
            r#"{"input_per_mtok": 1, "output_per_mtok": 1, "cache_read_per_mtok": 0.1}"#,
        ] {
            assert!(serde_json::from_str::<Price>(json).is_err(), "{json}");
        }
        let err = Price::try_from(PriceConfig {
            input_per_mtok: f64::NAN,
            output_per_mtok: 1.0,
            cached_input_per_mtok: None,
            cache_write_per_mtok: None,
        })
        .unwrap_err();
        assert_eq!(err.field, "input_per_mtok");
        let err = Price::try_from(PriceConfig {
            input_per_mtok: 1.0,
            output_per_mtok: f64::INFINITY,
            cached_input_per_mtok: None,
            cache_write_per_mtok: None,
        })
        .unwrap_err();
        assert_eq!(err.field, "output_per_mtok");
        assert!(err.to_string().contains("output_per_mtok"));
    }

    #[test]
    fn snapshot_tags() {
        for tag in ["20250514", "2024-08-06", "latest", "0"] {
            assert!(is_snapshot_tag(tag), "{tag}");
        }
        for tag in [
            "",
            "1",
            "5",
            "mini",
            "2024-8-06",
            "2024-08-0x",
            "202505141",
            "5-20251101",
            "preview",
        ] {
            assert!(!is_snapshot_tag(tag), "{tag}");
        }
    }
}
