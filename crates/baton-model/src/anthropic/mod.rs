//! Client of Anthropic's Messages API (`POST /v1/messages`), streamed or whole, with prompt
//! caching of the stable request prefix.

mod errors;
mod response;
mod stream;
mod wire;

use std::fmt;
use std::time::{Duration, SystemTime};

use baton_core::{ModelReply, ModelRequest};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

pub use errors::{
    classify_error_event, classify_http_error_at, parse_rfc3339, rate_limit_reset_wait,
};
pub use wire::{EMPTY_TEXT, UNPARSED_ARGUMENTS_KEY, request_body};

/// The streaming reader, public only for this crate's property tests.
#[doc(hidden)]
pub use stream::read_stream;

use crate::ModelError;
pub use crate::provider::MAX_RESPONSE_BYTES;
use crate::provider::{Dialect, Endpoint, HttpProvider, invalid, key_header};

/// The API version every request is made against. Pinned, so that the response format this
/// module reads cannot change under it.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The beta that lets budgeted (`enabled`) thinking happen between tool calls.
pub const INTERLEAVED_THINKING_BETA: &str = "interleaved-thinking-2025-05-14";

/// The beta of server-side context editing (`context_management`).
pub const CONTEXT_MANAGEMENT_BETA: &str = "context-management-2025-06-27";

/// The beta of server-side compaction (`compact_20260112`).
pub const COMPACTION_BETA: &str = "compact-2026-01-12";

/// Where and how to reach the API. `Debug` never shows the API key.
#[derive(Clone)]
pub struct AnthropicConfig {
    /// Base URL, with or without the API version: `https://api.anthropic.com` and
    /// `https://api.anthropic.com/v1` both post to `https://api.anthropic.com/v1/messages`.
    pub base_url: String,
    pub api_key: Option<String>,
    /// Limit for connecting and receiving the response headers. A whole (non-streamed) response
    /// sends its headers only once the answer is generated, so this must allow for that.
    pub request_timeout: Duration,
    /// Limit for the gap between two pieces of the response body.
    pub idle_timeout: Duration,
    /// The required `max_tokens` of every request: the most the model may generate per answer.
    pub max_tokens: u32,
}

impl AnthropicConfig {
    pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Endpoint::DEFAULT_REQUEST_TIMEOUT;
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Endpoint::DEFAULT_IDLE_TIMEOUT;
    pub const DEFAULT_MAX_TOKENS: u32 = 8192;

    /// A config with default timeouts and `max_tokens`, and no API key.
    pub fn new(base_url: impl Into<String>) -> Self {
        AnthropicConfig {
            base_url: base_url.into(),
            api_key: None,
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            max_tokens: Self::DEFAULT_MAX_TOKENS,
        }
    }

    pub fn with_api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(api_key.into());
        self
    }
}

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("request_timeout", &self.request_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

/// The Messages wire (`POST {base}/v1/messages`, `x-api-key`, a pinned `anthropic-version`).
#[derive(Clone, Debug)]
pub struct AnthropicMessages {
    /// The required `max_tokens` of every request.
    pub max_tokens: u32,
}

/// An Anthropic Messages API provider.
pub type AnthropicProvider = HttpProvider<AnthropicMessages>;

impl HttpProvider<AnthropicMessages> {
    pub fn new(config: AnthropicConfig) -> Result<Self, ModelError> {
        if config.max_tokens == 0 {
            return Err(invalid("max_tokens must be at least 1"));
        }
        HttpProvider::with_dialect(
            AnthropicMessages {
                max_tokens: config.max_tokens,
            },
            Endpoint {
                base_url: config.base_url,
                api_key: config.api_key,
                request_timeout: config.request_timeout,
                idle_timeout: config.idle_timeout,
            },
        )
    }
}

impl Dialect for AnthropicMessages {
    type Stream = stream::StreamAccumulator;

    fn name(&self) -> &'static str {
        "anthropic"
    }

    fn endpoint(&self, base: &str) -> String {
        // The official base URL has no version; OpenAI-style configs often end in /v1.
        if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        }
    }

    fn auth_header(&self, key: &str) -> Result<(HeaderName, HeaderValue), ModelError> {
        Ok((HeaderName::from_static("x-api-key"), key_header(key)?))
    }

    fn extra_headers(&self, request: &ModelRequest) -> Vec<(HeaderName, HeaderValue)> {
        let mut headers = vec![(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        )];
        // Budgeted thinking between tool calls needs the beta; adaptive thinking has it built in.
        let interleaved = request.reasoning.thinking == Some(baton_core::Thinking::Enabled)
            && !request.tools.is_empty();
        let context_beta = request.provider_compaction_at.map(|_| {
            if wire::server_compaction(&request.model) {
                COMPACTION_BETA
            } else {
                CONTEXT_MANAGEMENT_BETA
            }
        });
        let betas = match (interleaved, context_beta) {
            (true, Some(CONTEXT_MANAGEMENT_BETA)) => {
                Some("interleaved-thinking-2025-05-14,context-management-2025-06-27")
            }
            (true, Some(_)) => Some("interleaved-thinking-2025-05-14,compact-2026-01-12"),
            (true, None) => Some(INTERLEAVED_THINKING_BETA),
            (false, beta) => beta,
        };
        if let Some(betas) = betas {
            headers.push((
                HeaderName::from_static("anthropic-beta"),
                HeaderValue::from_static(betas),
            ));
        }
        headers
    }

    fn request_body(&self, request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
        request_body(request, self.max_tokens)
    }

    fn classify_status(&self, status: u16, headers: &HeaderMap, body: &str) -> ModelError {
        classify_http_error_at(status, headers, body, SystemTime::now())
    }

    fn parse_whole(&self, body: &[u8]) -> Result<ModelReply, ModelError> {
        response::parse_whole(body)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::ModelProvider;
    use baton_core::ErrorClass;

    #[test]
    fn endpoint_is_built_with_or_without_the_version() {
        for base in [
            "http://127.0.0.1:8080",
            "http://127.0.0.1:8080/",
            "http://127.0.0.1:8080/v1",
            " http://127.0.0.1:8080/v1// ",
        ] {
            let provider = AnthropicProvider::new(AnthropicConfig::new(base)).unwrap();
            assert_eq!(provider.endpoint(), "http://127.0.0.1:8080/v1/messages");
            assert_eq!(
                provider.describe(),
                "anthropic http://127.0.0.1:8080/v1/messages"
            );
        }
        let provider =
            AnthropicProvider::new(AnthropicConfig::new("https://proxy.example/anthropic"))
                .unwrap();
        assert_eq!(
            provider.endpoint(),
            "https://proxy.example/anthropic/v1/messages"
        );
    }

    #[test]
    fn defaults() {
        let config = AnthropicConfig::new(AnthropicConfig::DEFAULT_BASE_URL);
        assert_eq!(config.max_tokens, 8192);
        assert_eq!(config.api_key, None);
        let provider = AnthropicProvider::new(config).unwrap();
        assert_eq!(provider.endpoint(), "https://api.anthropic.com/v1/messages");
    }

    #[test]
    fn bad_configs_are_invalid_requests() {
        for base in ["", "not a url", "ftp://example.com"] {
            let err = AnthropicProvider::new(AnthropicConfig::new(base)).unwrap_err();
            assert_eq!(err.class, ErrorClass::InvalidRequest, "{base:?}");
        }
        let zero = AnthropicConfig {
            max_tokens: 0,
            ..AnthropicConfig::new("http://127.0.0.1:1")
        };
        assert_eq!(
            AnthropicProvider::new(zero).unwrap_err().class,
            ErrorClass::InvalidRequest
        );
        let secret = "sk-ant-line\nbreak-secret-value";
        let err =
            AnthropicProvider::new(AnthropicConfig::new("http://127.0.0.1:1").with_api_key(secret))
                .unwrap_err();
        assert_eq!(err.class, ErrorClass::InvalidRequest);
        assert!(!format!("{err} {err:?}").contains("secret-value"));
    }

    #[test]
    fn debug_never_shows_the_key() {
        let key = "sk-ant-test-0123456789abcdef";
        let config = AnthropicConfig::new("http://127.0.0.1:1").with_api_key(key);
        let text = format!("{config:?}");
        assert!(!text.contains(key), "{text}");
        assert!(text.contains("[REDACTED]"));
        let provider = AnthropicProvider::new(config).unwrap();
        let text = format!("{provider:?}");
        assert!(!text.contains(key), "{text}");
        assert!(text.contains("[REDACTED]"));
    }

    #[test]
    fn blank_key_means_no_key() {
        let provider =
            AnthropicProvider::new(AnthropicConfig::new("http://127.0.0.1:1").with_api_key("  "))
                .unwrap();
        assert!(!provider.has_key());
    }
}
