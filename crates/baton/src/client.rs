//! Builds the model client for a run's recorded settings: the provider flavour, its key (read
//! from the environment on every start, never from the journal) and the retry policy.

use std::sync::Arc;
use std::time::Duration;

use baton_core::{ModelSettings, ProviderKind, WireApi};
use baton_model::anthropic::{AnthropicConfig, AnthropicProvider};
use baton_model::openai::{OpenAiConfig, OpenAiProvider};
use baton_model::responses::ResponsesProvider;
use baton_model::{ModelProvider, RetryPolicy};

use crate::Error;
use crate::config::{self, ConfigLayer};
use crate::providers;

/// A run's model provider and the key it was built with (the key is scrubbed from everything
/// journaled).
pub struct ModelClient {
    /// The provider, speaking the dialect of the settings' flavour and wire.
    pub provider: Arc<dyn ModelProvider>,
    /// The API key it sends (never journaled: scrubbed as a secret).
    pub api_key: Option<String>,
}

/// The provider for `settings` (the dialect its flavour and wire speak), with timeouts from
/// `layer` and the key from the environment variables the preset names.
pub fn model_client(settings: &ModelSettings, layer: &ConfigLayer) -> Result<ModelClient, Error> {
    let preset = providers::preset_for_url(settings.provider, &settings.base_url)
        .or_else(|| layer.provider.as_deref().and_then(providers::preset));
    let key_vars = providers::key_variables(settings.provider, preset);
    let api_key = config::api_key(&key_vars, |v| std::env::var(v).ok());
    if api_key.is_none() && preset.is_some_and(|p| p.needs_key) {
        tracing::warn!(
            "no API key found in {}; the server will probably refuse",
            key_vars.join(", ")
        );
    }
    let request_timeout = Duration::from_secs(layer.request_timeout_secs.unwrap_or(600));
    let idle_timeout = Duration::from_secs(layer.stream_idle_timeout_secs.unwrap_or(120));
    let setup_error =
        |e: baton_model::ModelError| Error::usage(format!("cannot set up the model client: {e}"));
    let provider: Arc<dyn ModelProvider> = match settings.provider {
        ProviderKind::OpenAiCompatible if settings.wire_api == WireApi::Responses => Arc::new(
            ResponsesProvider::new(OpenAiConfig {
                base_url: settings.base_url.clone(),
                api_key: api_key.clone(),
                request_timeout,
                idle_timeout,
            })
            .map_err(setup_error)?,
        ),
        ProviderKind::OpenAiCompatible => Arc::new(
            OpenAiProvider::new(OpenAiConfig {
                base_url: settings.base_url.clone(),
                api_key: api_key.clone(),
                request_timeout,
                idle_timeout,
            })
            .map_err(setup_error)?,
        ),
        ProviderKind::Anthropic => Arc::new(
            AnthropicProvider::new(AnthropicConfig {
                api_key: api_key.clone(),
                request_timeout,
                idle_timeout,
                // The profile's output length (adaptive thinking spends output tokens too).
                max_tokens: baton_context::profile::profile_for(&settings.model)
                    .max_output_tokens
                    .unwrap_or(AnthropicConfig::DEFAULT_MAX_TOKENS),
                ..AnthropicConfig::new(settings.base_url.clone())
            })
            .map_err(setup_error)?,
        ),
    };
    Ok(ModelClient { provider, api_key })
}

/// The retry schedule `layer` asks for (attempts, total wait, base delay) over the defaults.
pub fn retry_policy(layer: &ConfigLayer) -> RetryPolicy {
    let mut retry = RetryPolicy::default();
    if let Some(n) = layer.max_retry_attempts {
        retry.max_attempts = n;
    }
    if let Some(s) = layer.max_retry_wait_secs {
        retry.max_total_wait = Duration::from_secs(s);
    }
    if let Some(ms) = layer.retry_base_delay_ms {
        retry.base_delay = Duration::from_millis(ms);
    }
    retry
}
