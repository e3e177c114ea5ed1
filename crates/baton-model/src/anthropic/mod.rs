//! Client of Anthropic's Messages API (`POST /v1/messages`), streamed or whole, with prompt
//! caching of the stable request prefix.

mod errors;
mod response;
mod stream;
mod wire;

use std::fmt;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use baton_core::{ErrorClass, ModelReply, ModelRequest, Redactor, ResponseMode};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderValue};

pub use errors::{
    classify_error_event, classify_http_error_at, parse_rfc3339, rate_limit_reset_wait,
};
pub use wire::{EMPTY_TEXT, UNPARSED_ARGUMENTS_KEY, request_body};

/// The streaming reader, public only for this crate's property tests.
#[doc(hidden)]
pub use stream::read_stream;

use crate::http::Answer;
use crate::{ModelError, ModelProvider, StreamObserver};

/// The API version every request is made against. Pinned, so that the response format this
/// module reads cannot change under it.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Largest successful response read, streamed or whole. Far above any real message; it only
/// stops a runaway server from exhausting memory.
pub const MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;

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
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
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

/// An Anthropic Messages API provider. One `complete` is one HTTP request.
pub struct AnthropicProvider {
    client: reqwest::Client,
    endpoint: String,
    /// Marked sensitive, so the HTTP stack never prints it.
    api_key: Option<HeaderValue>,
    /// Removes the key from error messages, in case a server echoes it back.
    redactor: Redactor,
    request_timeout: Duration,
    idle_timeout: Duration,
    max_tokens: u32,
}

impl fmt::Debug for AnthropicProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicProvider")
            .field("endpoint", &self.endpoint)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("request_timeout", &self.request_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

fn invalid(message: impl Into<String>) -> ModelError {
    ModelError::new(ErrorClass::InvalidRequest, message)
}

impl AnthropicProvider {
    pub fn new(config: AnthropicConfig) -> Result<Self, ModelError> {
        let base = config.base_url.trim().trim_end_matches('/');
        let url = reqwest::Url::parse(base)
            .map_err(|e| invalid(format!("base URL {base:?} is not a valid URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid(format!(
                "base URL {base:?} must start with http:// or https://"
            )));
        }
        if config.max_tokens == 0 {
            return Err(invalid("max_tokens must be at least 1"));
        }
        // The official base URL has no version; OpenAI-style configs often end in /v1.
        let endpoint = if base.ends_with("/v1") {
            format!("{base}/messages")
        } else {
            format!("{base}/v1/messages")
        };
        let key = config
            .api_key
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty());
        let api_key = match &key {
            Some(key) => {
                let mut value = HeaderValue::from_str(key)
                    // The message must not quote the key, not even its invalid part.
                    .map_err(|_| {
                        invalid("the API key contains characters not allowed in an HTTP header")
                    })?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        let client = reqwest::Client::builder()
            .connect_timeout(config.request_timeout)
            .user_agent(concat!("baton/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| invalid(format!("could not set up the HTTP client: {e}")))?;
        Ok(AnthropicProvider {
            client,
            endpoint,
            api_key,
            redactor: Redactor::new(key),
            request_timeout: config.request_timeout,
            idle_timeout: config.idle_timeout,
            max_tokens: config.max_tokens,
        })
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    async fn send(
        &self,
        request: &ModelRequest,
        observer: &mut dyn StreamObserver,
    ) -> Result<ModelReply, ModelError> {
        let body = request_body(request, self.max_tokens)?;
        let streaming = request.response_mode == ResponseMode::Streaming;
        let accept = if streaming {
            "text/event-stream"
        } else {
            "application/json"
        };
        let mut builder = self
            .client
            .post(&self.endpoint)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, accept)
            .header("anthropic-version", ANTHROPIC_VERSION)
            .body(body);
        if let Some(api_key) = &self.api_key {
            builder = builder.header("x-api-key", api_key.clone());
        }
        tracing::debug!(endpoint = %self.endpoint, model = %request.model, streaming, "sending model request");
        let answer = crate::http::exchange(
            builder,
            streaming,
            self.request_timeout,
            self.idle_timeout,
            MAX_RESPONSE_BYTES,
            |status, headers, text| {
                classify_http_error_at(status, headers, text, SystemTime::now())
            },
        )
        .await?;
        match answer {
            Answer::Stream(body) => {
                stream::read_stream(body, self.idle_timeout, MAX_RESPONSE_BYTES, observer).await
            }
            Answer::Whole(bytes) => {
                let reply = response::parse_whole(&bytes)?;
                crate::announce(&reply, observer);
                Ok(reply)
            }
        }
    }
}

#[async_trait]
impl ModelProvider for AnthropicProvider {
    fn describe(&self) -> String {
        format!("anthropic {}", self.endpoint)
    }

    /// Sends the request once. Streamed pieces go to `observer` as they arrive; a whole reply is
    /// shown to it in one piece at the end.
    async fn complete(
        &self,
        request: &ModelRequest,
        observer: &mut dyn StreamObserver,
    ) -> Result<ModelReply, ModelError> {
        self.send(request, observer).await.map_err(|mut e| {
            e.message = self.redactor.redact(&e.message);
            e
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

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
        assert!(provider.api_key.is_none());
    }
}
