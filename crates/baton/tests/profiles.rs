#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The model profile decides a run's defaults — compaction, thinking, verbosity stays unset —
//! and configuration overrides each; a profile's choice never lands where the wire cannot
//! carry it. Settings resolution of explicit layers (no user file can interfere).

use baton::config::ConfigLayer;
use baton_core::{Compaction, ProviderKind, ReasoningHistory, Thinking, Verbosity};

fn resolve(layer: ConfigLayer) -> baton_core::RunSettings {
    baton::settings::settings_of(layer).unwrap().0
}

fn model(provider: &str, model: &str) -> ConfigLayer {
    ConfigLayer {
        provider: Some(provider.into()),
        model: Some(model.into()),
        ..ConfigLayer::default()
    }
}

#[test]
fn profiles_set_defaults_that_configuration_overrides() {
    // Anthropic's compacting models: provider compaction and adaptive thinking by default.
    let claude = resolve(model("anthropic", "claude-opus-4-6"));
    assert_eq!(claude.model.provider, ProviderKind::Anthropic);
    assert_eq!(claude.context.compaction, Compaction::Provider);
    assert_eq!(claude.model.reasoning.thinking, Some(Thinking::Adaptive));
    assert_eq!(claude.model.reasoning.verbosity, None);

    // The same model through a Chat Completions gateway: neither default applies there.
    let routed = resolve(model("openrouter", "anthropic/claude-opus-4-6"));
    assert!(
        matches!(routed.context.compaction, Compaction::Summarize { .. }),
        "{:?}",
        routed.context.compaction
    );
    assert_eq!(routed.model.reasoning.thinking, None);

    // The codex models compact on the Responses wire OpenAI serves them on.
    let codex = resolve(model("openai", "gpt-5.1-codex-max"));
    assert_eq!(codex.model.wire_api, baton_core::WireApi::Responses);
    assert_eq!(codex.context.compaction, Compaction::Provider);

    // Older models keep baton's own summary and the server's thinking default.
    let older = resolve(model("anthropic", "claude-sonnet-4-5"));
    assert!(matches!(
        older.context.compaction,
        Compaction::Summarize { .. }
    ));
    assert_eq!(older.model.reasoning.thinking, None);

    // Configuration wins over each profile choice (a config file's TOML, parsed as one).
    let file: ConfigLayer = toml::from_str(
        "thinking = \"off\"\nreasoning_history = \"drop\"\nverbosity = \"low\"\n\
         [context]\ncompaction = \"baton\"\n",
    )
    .unwrap();
    let configured = resolve(model("anthropic", "claude-opus-4-6").overlay(file));
    assert!(matches!(
        configured.context.compaction,
        Compaction::Summarize { .. }
    ));
    assert_eq!(configured.model.reasoning.thinking, Some(Thinking::Off));
    assert_eq!(configured.model.reasoning.history, ReasoningHistory::Drop);
    assert_eq!(configured.model.reasoning.verbosity, Some(Verbosity::Low));

    // A verbosity the API does not know is refused when the file is read, naming the values.
    let error = toml::from_str::<ConfigLayer>("verbosity = \"loud\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("verbosity") && error.contains("low"),
        "{error}"
    );
}
