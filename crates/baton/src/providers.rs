//! Provider presets: `--provider NAME` fills in the API flavour, the base URL and which
//! environment variable holds the key, so common endpoints need no further configuration.

use baton_core::ProviderKind;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// A named provider: its flavour, endpoint and key variable, so `--provider NAME` is enough.
pub struct Preset {
    /// The name `--provider` takes.
    pub name: &'static str,
    /// Which wire family it speaks.
    pub kind: ProviderKind,
    /// Its endpoint.
    pub base_url: &'static str,
    /// Where the key is read from (after `BATON_API_KEY`); `None` for local servers.
    pub key_env: Option<&'static str>,
    /// Whether a missing key is worth a warning (hosted APIs always need one).
    pub needs_key: bool,
}

const fn hosted(
    name: &'static str,
    kind: ProviderKind,
    base_url: &'static str,
    key_env: &'static str,
) -> Preset {
    Preset {
        name,
        kind,
        base_url,
        key_env: Some(key_env),
        needs_key: true,
    }
}

const fn local(name: &'static str, base_url: &'static str) -> Preset {
    Preset {
        name,
        kind: ProviderKind::OpenAiCompatible,
        base_url,
        key_env: None,
        needs_key: false,
    }
}

/// Every preset, in the order `baton doctor` and errors list them.
pub const PRESETS: &[Preset] = &[
    hosted(
        "openai",
        ProviderKind::OpenAiCompatible,
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
    ),
    hosted(
        "anthropic",
        ProviderKind::Anthropic,
        "https://api.anthropic.com",
        "ANTHROPIC_API_KEY",
    ),
    hosted(
        "deepseek",
        ProviderKind::OpenAiCompatible,
        "https://api.deepseek.com/v1",
        "DEEPSEEK_API_KEY",
    ),
    hosted(
        "qwen",
        ProviderKind::OpenAiCompatible,
        "https://dashscope-intl.aliyuncs.com/compatible-mode/v1",
        "DASHSCOPE_API_KEY",
    ),
    hosted(
        "moonshot",
        ProviderKind::OpenAiCompatible,
        "https://api.moonshot.ai/v1",
        "MOONSHOT_API_KEY",
    ),
    // Zhipu's GLM, OpenAI-compatible (mainland endpoint; international: https://api.z.ai/api/paas/v4).
    hosted(
        "glm",
        ProviderKind::OpenAiCompatible,
        "https://open.bigmodel.cn/api/paas/v4",
        "ZHIPUAI_API_KEY",
    ),
    // The same GLM endpoint under Zhipu's own name.
    hosted(
        "zhipu",
        ProviderKind::OpenAiCompatible,
        "https://open.bigmodel.cn/api/paas/v4",
        "ZHIPUAI_API_KEY",
    ),
    // Qwen on DashScope's mainland endpoint (`qwen` is the international one).
    hosted(
        "qwen-cn",
        ProviderKind::OpenAiCompatible,
        "https://dashscope.aliyuncs.com/compatible-mode/v1",
        "DASHSCOPE_API_KEY",
    ),
    // Doubao and the models hosted on Volcengine Ark (model: a model name or an `ep-…` id).
    hosted(
        "doubao",
        ProviderKind::OpenAiCompatible,
        "https://ark.cn-beijing.volces.com/api/v3",
        "ARK_API_KEY",
    ),
    // SiliconFlow's mainland endpoint (international: https://api.siliconflow.com/v1).
    hosted(
        "siliconflow",
        ProviderKind::OpenAiCompatible,
        "https://api.siliconflow.cn/v1",
        "SILICONFLOW_API_KEY",
    ),
    // MiniMax's international endpoint (mainland: https://api.minimaxi.com/v1). Its M2 models
    // keep their thinking in `content` between <think> tags, which baton sends back unchanged.
    hosted(
        "minimax",
        ProviderKind::OpenAiCompatible,
        "https://api.minimax.io/v1",
        "MINIMAX_API_KEY",
    ),
    hosted(
        "openrouter",
        ProviderKind::OpenAiCompatible,
        "https://openrouter.ai/api/v1",
        "OPENROUTER_API_KEY",
    ),
    local("ollama", "http://127.0.0.1:11434/v1"),
    local("vllm", "http://127.0.0.1:8000/v1"),
    local("llamacpp", "http://127.0.0.1:8080/v1"),
];

/// The preset called `name`.
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS
        .iter()
        .find(|p| p.name.eq_ignore_ascii_case(name.trim()))
}

/// The preset names, comma-separated (for error messages).
pub fn preset_names() -> String {
    PRESETS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The preset whose base URL this is, to find the key variable of a run resumed from its
/// recorded settings.
pub fn preset_for_url(kind: ProviderKind, base_url: &str) -> Option<&'static Preset> {
    let trimmed = base_url.trim_end_matches('/');
    PRESETS
        .iter()
        .find(|p| p.kind == kind && p.base_url == trimmed)
}

/// Environment variables that may hold the key, in order: `BATON_API_KEY`, the preset's own,
/// then the flavour's conventional one.
pub fn key_variables(kind: ProviderKind, preset: Option<&Preset>) -> Vec<&'static str> {
    let mut vars = vec!["BATON_API_KEY"];
    if let Some(var) = preset.and_then(|p| p.key_env) {
        vars.push(var);
    }
    let conventional = match kind {
        ProviderKind::OpenAiCompatible => "OPENAI_API_KEY",
        ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
    };
    if !vars.contains(&conventional) {
        vars.push(conventional);
    }
    vars
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_preset_exists_once() {
        for name in [
            "openai",
            "anthropic",
            "deepseek",
            "qwen",
            "moonshot",
            "glm",
            "openrouter",
            "ollama",
            "vllm",
            "llamacpp",
        ] {
            assert_eq!(
                PRESETS.iter().filter(|p| p.name == name).count(),
                1,
                "{name}"
            );
        }
        assert_eq!(
            preset("Anthropic").map(|p| p.kind),
            Some(ProviderKind::Anthropic)
        );
        assert!(preset("nope").is_none());
    }

    #[test]
    fn key_lookup_order() {
        let deepseek = preset("deepseek");
        assert_eq!(
            key_variables(ProviderKind::OpenAiCompatible, deepseek),
            ["BATON_API_KEY", "DEEPSEEK_API_KEY", "OPENAI_API_KEY"]
        );
        assert_eq!(
            key_variables(ProviderKind::Anthropic, preset("anthropic")),
            ["BATON_API_KEY", "ANTHROPIC_API_KEY"]
        );
        assert_eq!(
            key_variables(ProviderKind::OpenAiCompatible, None),
            ["BATON_API_KEY", "OPENAI_API_KEY"]
        );
    }

    #[test]
    fn recorded_urls_find_their_preset() {
        let found = preset_for_url(
            ProviderKind::OpenAiCompatible,
            "https://openrouter.ai/api/v1/",
        );
        assert_eq!(found.map(|p| p.name), Some("openrouter"));
        assert!(preset_for_url(ProviderKind::OpenAiCompatible, "http://127.0.0.1:9/v1").is_none());
    }
}
