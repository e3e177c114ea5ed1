//! `baton doctor`: one tiny request to the configured model, and a plain-words diagnosis of
//! whatever goes wrong (nothing listening, unknown host, TLS, key, model name).

use std::time::Instant;

use baton_core::{ErrorClass, Message, ModelRequest, ModelSettings, ResponseMode, ToolChoice};
use baton_model::{ModelError, NoObserver};

use crate::client;
use crate::config::ConfigLayer;

/// What a failed check means for the user, from the error's class and text.
pub fn diagnose(error: &ModelError, settings: &ModelSettings) -> String {
    let text = error.message.to_lowercase();
    let url = &settings.base_url;
    let hint = match error.class {
        ErrorClass::Auth => "the server refused the API key: set BATON_API_KEY (or the provider's own variable) to a valid key".to_string(),
        ErrorClass::QuotaExhausted => "the account has no quota or credit left".to_string(),
        ErrorClass::RateLimited => "rate limited right now; the endpoint and key work".to_string(),
        ErrorClass::Overloaded => "the provider is overloaded right now; the endpoint and key work".to_string(),
        ErrorClass::ContextOverflow => "the server says the prompt is too long for this model".to_string(),
        ErrorClass::InvalidRequest if error.status == Some(404) || text.contains("model") => format!(
            "the server does not know model '{}' (or {url} is not the API root): check --model and --base-url",
            settings.model
        ),
        ErrorClass::InvalidRequest => "the server rejected the request as invalid".to_string(),
        ErrorClass::BadResponse => format!("{url} answered, but not like a {} API: check --base-url / --provider", crate::output::word(&settings.provider)),
        ErrorClass::Transient | ErrorClass::Unreachable if text.contains("dns") || text.contains("lookup") || text.contains("resolve") => {
            format!("the host in {url} cannot be found (DNS): check the URL and your network")
        }
        ErrorClass::Transient | ErrorClass::Unreachable if text.contains("refused") => {
            format!("nothing is listening at {url}: is the server running on that port?")
        }
        ErrorClass::Transient | ErrorClass::Unreachable if text.contains("certificate") || text.contains("tls") || text.contains("ssl") => {
            format!("TLS failed talking to {url}: certificate or protocol problem (http vs https?)")
        }
        ErrorClass::Transient if text.contains("timed out") || text.contains("took longer") => {
            format!("{url} did not answer in time")
        }
        ErrorClass::Transient => "the server failed or the connection broke".to_string(),
        ErrorClass::Unreachable => format!("nothing answered at {url}: check the URL and that the server runs"),
    };
    format!("{hint}\n  ({error})")
}

/// Runs the check; returns (ok, report).
pub async fn check(
    settings: &ModelSettings,
    layer: &ConfigLayer,
) -> Result<(bool, String), crate::CliError> {
    let client = client::model_client(settings, layer)?;
    let request = ModelRequest {
        model: settings.model.clone(),
        messages: vec![Message::User {
            content: "Reply with the single word: ok".into(),
        }],
        tools: vec![],
        response_mode: ResponseMode::Whole,
        tool_choice: ToolChoice::Auto,
        reasoning: Default::default(),
    };
    let started = Instant::now();
    let outcome = client.provider.complete(&request, &mut NoObserver).await;
    let elapsed = started.elapsed().as_secs_f64();
    let head = format!(
        "{} model '{}' at {}",
        provider_name(settings),
        settings.model,
        settings.base_url
    );
    Ok(match outcome {
        Ok(reply) => {
            let usage = reply
                .usage
                .map(|u| {
                    format!(
                        "{} prompt + {} completion tokens",
                        u.prompt_tokens, u.completion_tokens
                    )
                })
                .unwrap_or_else(|| "no usage reported".into());
            let said = reply.message.content.unwrap_or_default();
            (
                true,
                format!(
                    "ok: {head} answered in {elapsed:.1}s ({usage}): {:?}",
                    crate::output::one_line(&said, 80)
                ),
            )
        }
        Err(error) => (
            false,
            format!("FAILED: {head}\n  {}", diagnose(&error, settings)),
        ),
    })
}

fn provider_name(settings: &ModelSettings) -> &'static str {
    match settings.provider {
        baton_core::ProviderKind::OpenAiCompatible => "OpenAI-compatible",
        baton_core::ProviderKind::Anthropic => "Anthropic",
    }
}
