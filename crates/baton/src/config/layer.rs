//! The configuration keys, declared once. Each field of [`ConfigLayer`] is at the same time a
//! key of the TOML files (serde), the run-shaping command-line flag of its name where it has
//! one (`--max-turns` *is* `max_turns`: the declaration, [`config_layer_fields!`], carries each
//! key's clap `#[arg(…)]`, which the CLI's twin of this struct derives its flags from — the
//! library itself does not depend on clap), a key of the `--settings-layer` data a supervisor
//! hands its children, and — with `=> set(…)` — the place in [`RunSettings`](crate::RunSettings)
//! its value goes. So a plain new setting is one field here, its home in `RunSettings`, and the
//! code that reads it.
//!
//! Keys without a flag are `#[arg(skip)]`: tables (`[sandbox]`, `[prices]` …) have flags of their
//! own shape, and the timeouts and retry knobs are file-only on purpose (they tune a deployment,
//! not a run).
//!
//! [`config_layer_fields!`]: crate::config_layer_fields

use serde::{Deserialize, Serialize};

use super::{ContextConfig, SandboxLayer};
use crate::layered::layered;

/// The declaration of [`ConfigLayer`], handed to the macro `$then` (invoked as `$then! { … }`):
/// the layer's doc comment and derives, then each key with its doc comment, serde attributes,
/// its flag (`#[arg(…)]`, `#[command(flatten)]` for a table with flags of its own) and, with
/// `=> set(…)` or `=> set_some(…)`, its place in [`RunSettings`](crate::RunSettings).
///
/// The library gives it to `layered!`, which makes [`ConfigLayer`] and its merging and drops the
/// flag attributes; the CLI gives it to a macro of its own that makes a clap twin of the layer
/// with the same fields, doc comments and flags, and its conversion into [`ConfigLayer`]. Paths
/// are written from `$crate` so that they resolve in either crate; the type of a flattened
/// table (`ContextConfig`) is written bare, and names the table's own struct where the
/// declaration is used (the library's, or the CLI's twin of it from
/// [`context_config_fields!`](crate::context_config_fields)).
#[macro_export]
macro_rules! config_layer_fields {
    ($then:path) => {
        $then! {
/// One layer: every key optional.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigLayer => $crate::RunSettings {
    /// Provider preset: openai, anthropic, deepseek, qwen, moonshot, glm, zhipu, qwen-cn,
    /// doubao, siliconflow, minimax, openrouter, ollama, vllm, llamacpp (API flavour, base URL
    /// and key variable) [env: BATON_PROVIDER]
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// Base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8080/v1 [env: BATON_BASE_URL]
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String> => set(model.base_url),
    /// Model name [env: BATON_MODEL]
    #[arg(long, value_name = "NAME")]
    pub model: Option<String> => set(model.model),
    /// Pause after this many turns (default 200).
    #[arg(long, value_name = "N", value_parser = $crate::config::flags::whole::<u32>)]
    pub max_turns: Option<u32> => set(limits.max_turns),
    /// `streaming` (default) or `whole` replies; the flag `--no-stream` asks for whole ones.
    #[arg(
        long = "no-stream",
        num_args = 0,
        default_missing_value = "whole",
        value_parser = $crate::config::flags::response_mode,
        help = "Ask for whole responses instead of streamed ones"
    )]
    pub response_mode: Option<$crate::core::ResponseMode> => set(model.response_mode),
    /// Longest a shell command may run, in seconds.
    #[arg(skip)]
    pub shell_timeout_secs: Option<u64> => set(limits.shell_timeout_secs),
    /// Longest a model request may take to answer, in seconds.
    #[arg(skip)]
    pub request_timeout_secs: Option<u64>,
    /// Longest a stream may stay silent, in seconds.
    #[arg(skip)]
    pub stream_idle_timeout_secs: Option<u64>,
    /// Attempts per model call before the run pauses.
    #[arg(skip)]
    pub max_retry_attempts: Option<u32>,
    /// Most time spent waiting between retries of one call, in seconds.
    #[arg(skip)]
    pub max_retry_wait_secs: Option<u64>,
    /// Longest one model call attempt may take in all, in seconds.
    #[arg(skip)]
    pub model_call_timeout_secs: Option<u64>,
    /// Whether the model must call a tool: `auto` (default), `required`, or a tool name.
    #[arg(long, value_name = "MODE")]
    pub tool_choice: Option<String>,
    /// What a reply without a tool call means after its one nudge: `finish` (default: the
    /// reply is the summary, as if the model called `finish`), `nudge` (keep nudging, bounded by
    /// --no-tool-turns) or `pause` (pause for a person, reason text_reply).
    #[arg(
        long,
        value_name = "finish|nudge|pause",
        value_parser = $crate::config::flags::on_text_reply,
    )]
    pub on_text_reply: Option<$crate::core::OnTextReply> => set(endings.on_text_reply),
    /// The OpenAI wire: `chat` (Chat Completions) or `responses`; default: `responses` for the
    /// models OpenAI serves only there (the `*-codex` family, `*-pro`), else `chat`.
    #[arg(long, value_name = "chat|responses", value_parser = $crate::config::flags::wire_api)]
    pub wire_api: Option<$crate::core::WireApi> => set(model.wire_api),
    /// What of the model's earlier reasoning goes back to the server: `preserve` (default:
    /// what DeepSeek, Kimi and GLM require in a tool loop) or `drop` (servers that reject it).
    #[arg(skip)]
    pub reasoning_history: Option<$crate::core::ReasoningHistory>
        => set(model.reasoning.history),
    /// Thinking: `adaptive`, `enabled` or `off` (DeepSeek/GLM `thinking`, Anthropic `thinking`;
    /// config: thinking).
    #[arg(
        long,
        value_name = "adaptive|enabled|off",
        value_parser = $crate::config::flags::thinking,
    )]
    pub thinking: Option<$crate::core::Thinking> => set_some(model.reasoning.thinking),
    /// Anthropic's thinking budget in tokens with `--thinking enabled` (at least 1024).
    #[arg(long, value_name = "N", value_parser = $crate::config::flags::whole::<u32>)]
    pub thinking_budget: Option<u32> => set_some(model.reasoning.thinking_budget),
    /// Reasoning effort as the provider documents it (`low`, `medium`, `high`, …): Chat
    /// `reasoning_effort`, Responses `reasoning.effort`, Anthropic `output_config.effort`; also
    /// accepted as `effort`.
    #[serde(alias = "effort")]
    #[arg(long, alias = "effort", value_name = "WORD")]
    pub reasoning_effort: Option<String> => set_some(model.reasoning.effort),
    /// How much the model writes: `low`, `medium` or `high` (Responses `text.verbosity`, GPT-5
    /// family; the codex models accept only `medium`).
    #[arg(long, value_name = "low|medium|high", value_parser = $crate::config::flags::verbosity)]
    pub verbosity: Option<$crate::core::Verbosity> => set_some(model.reasoning.verbosity),
    /// Replies in a row without a tool call that pause the run with reason `loop` (default 3).
    #[arg(long, value_name = "N", value_parser = $crate::config::flags::whole::<u32>)]
    pub no_tool_turns: Option<u32> => set(loop_detection.no_tool_turns),
    /// First retry delay in milliseconds (full jitter, doubling).
    #[arg(skip)]
    pub retry_base_delay_ms: Option<u64>,
    /// Consecutive failed model call attempts that pause the run.
    #[arg(skip)]
    pub circuit_breaker_failures: Option<u32>,
    /// `[prices."MODEL"]` tables: USD per million tokens, overriding the built-in list prices.
    #[arg(skip)]
    pub prices: Option<::std::collections::HashMap<String, $crate::model::pricing::Price>>,
    /// `[rate_limit]`: client-side requests_per_minute / tokens_per_minute (and bursts).
    #[arg(skip)]
    pub rate_limit: Option<$crate::model::ratelimit::RateLimit>,
    /// `[context]`: overrides of the model profile's context policy (its `window` is the flag
    /// `--context-window`).
    #[command(flatten)]
    pub context: Option<ContextConfig>,
    /// Pause the run when its cost reaches this many USD (a call that could pass it is not sent).
    #[arg(long, value_name = "USD", value_parser = $crate::config::flags::amount)]
    pub budget_usd: Option<f64>,
    /// Pause the run when its prompt + completion tokens reach this many.
    #[arg(long, value_name = "N", value_parser = $crate::config::flags::whole::<u64>)]
    pub budget_tokens: Option<u64>,
    /// Pause the run after this much running time, e.g. 45m or 2h (`90s`, `1h30m`; a bare
    /// number is seconds).
    #[arg(long, value_name = "DURATION")]
    pub max_time: Option<String>,
    /// With a task graph: pause when the current task's cost reaches this many USD.
    #[arg(long, value_name = "USD", value_parser = $crate::config::flags::amount)]
    pub task_budget_usd: Option<f64>,
    /// With a task graph: pause when the current task's tokens reach this many.
    #[arg(long, value_name = "N", value_parser = $crate::config::flags::whole::<u64>)]
    pub task_budget_tokens: Option<u64>,
    /// With a task graph: pause when the current task has worked this many turns.
    #[arg(long, value_name = "N", value_parser = $crate::config::flags::whole::<u32>)]
    pub task_max_turns: Option<u32> => set_some(tasks.max_turns),
    /// With a task graph: pause when the current task has run this long, e.g. 20m.
    #[arg(long, value_name = "DURATION")]
    pub task_max_time: Option<String>,
    /// `[sandbox]`: how commands are isolated and which may run.
    #[arg(skip)]
    pub sandbox: Option<$crate::config::SandboxLayer>,
    /// `false`: `run` / `resume` work in-process instead of in a supervised child process.
    #[arg(skip)]
    pub supervise: Option<bool>,
    /// How many times the supervisor restarts a crashed agent process (`--max-restarts`).
    #[arg(skip)]
    pub max_restarts: Option<u32>,
    /// `[snapshots]`: workspace snapshots in the state directory's `shadow.git`.
    #[arg(skip)]
    pub snapshots: Option<$crate::config::SnapshotsConfig>,
    /// `false`: run without MCP servers (`--no-mcp`).
    #[arg(skip)]
    pub mcp: Option<bool>,
    /// `[mcp_servers.NAME]`: MCP servers whose tools the run offers (`--mcp`, `--mcp-config`).
    #[arg(skip)]
    pub mcp_servers: Option<::std::collections::BTreeMap<String, $crate::mcp::McpServerConfig>>,
    /// `[embeddings]`: the code index's embedder (see `embeddings.rs`).
    #[arg(skip)]
    pub embeddings: Option<$crate::embeddings::EmbeddingsConfig>,
    /// `[repo_map]`: the repo map in task briefs.
    #[arg(skip)]
    pub repo_map: Option<$crate::embeddings::RepoMapConfig>,
}
        }
    };
}

crate::config_layer_fields!(layered);

impl ConfigLayer {
    /// The layer from environment variables, given a lookup (so tests need not touch the real
    /// environment).
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> ConfigLayer {
        let non_empty = |k: &str| get(k).filter(|v| !v.trim().is_empty());
        ConfigLayer {
            provider: non_empty("BATON_PROVIDER"),
            base_url: non_empty("BATON_BASE_URL"),
            model: non_empty("BATON_MODEL"),
            sandbox: non_empty("BATON_SANDBOX_BACKEND").map(|backend| SandboxLayer {
                backend: Some(backend),
                ..SandboxLayer::default()
            }),
            ..ConfigLayer::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::{OnTextReply, ReasoningHistory, ResponseMode, Thinking, Verbosity, WireApi};

    /// Each key declared with `=> set(…)` reaches its own setting: a wrong or missing
    /// destination fails here.
    #[test]
    fn each_declared_key_lands_in_its_setting() {
        let layer: ConfigLayer = toml::from_str(
            r#"
            base_url = "http://h/v1"
            model = "m"
            max_turns = 7
            response_mode = "whole"
            shell_timeout_secs = 11
            on_text_reply = "pause"
            no_tool_turns = 5
            wire_api = "responses"
            reasoning_history = "drop"
            effort = "high"
            thinking = "enabled"
            thinking_budget = 2048
            verbosity = "low"
            task_max_turns = 9
            "#,
        )
        .unwrap();
        let (s, _) = crate::settings::settings_of(layer).unwrap();
        assert_eq!(s.model.base_url, "http://h/v1");
        assert_eq!(s.model.model, "m");
        assert_eq!(s.limits.max_turns, 7);
        assert_eq!(s.model.response_mode, ResponseMode::Whole);
        assert_eq!(s.limits.shell_timeout_secs, 11);
        assert_eq!(s.endings.on_text_reply, OnTextReply::Pause);
        assert_eq!(s.loop_detection.no_tool_turns, 5);
        assert_eq!(s.model.wire_api, WireApi::Responses);
        let reasoning = &s.model.reasoning;
        assert_eq!(reasoning.history, ReasoningHistory::Drop);
        assert_eq!(reasoning.effort.as_deref(), Some("high"));
        assert_eq!(reasoning.thinking, Some(Thinking::Enabled));
        assert_eq!(reasoning.thinking_budget, Some(2048));
        assert_eq!(reasoning.verbosity, Some(Verbosity::Low));
        assert_eq!(s.tasks.max_turns, Some(9));

        // Unset keys keep what they are applied onto.
        let kept = crate::settings::apply(&ConfigLayer::default(), s.clone()).unwrap();
        assert_eq!(kept, s);
    }
}
