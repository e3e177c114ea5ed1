//! Client of OpenAI-compatible Chat Completions servers (OpenAI, DeepSeek, vLLM, llama.cpp,
//! Ollama, OpenRouter, …), streamed or whole.

mod response;
mod stream;
mod wire;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use baton_core::{ErrorClass, ModelReply, ModelRequest, Redactor, ResponseMode};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};

pub use wire::request_body;

/// The streaming reader, public only for this crate's property tests and benchmarks.
#[doc(hidden)]
pub use stream::read_stream;

use crate::error::classify_http_error;
use crate::http::Answer;
use crate::{ModelError, ModelProvider, StreamObserver};

/// Largest successful response read, streamed or whole. Far above any real completion; it only
/// stops a runaway server from exhausting memory.
pub const MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;

/// Where and how to reach the server. `Debug` never shows the API key.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// Base URL up to the API version, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    pub api_key: Option<String>,
    /// Limit for connecting and receiving the response headers. Servers that do not stream
    /// send headers only once the whole answer is generated, so this must allow for that.
    pub request_timeout: Duration,
    /// Limit for the gap between two pieces of the response body.
    pub idle_timeout: Duration,
}

impl OpenAiConfig {
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

    /// A config with default timeouts and no API key.
    pub fn new(base_url: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            api_key: None,
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
        }
    }

    pub fn with_api_key(mut self, api_key: impl Into<String>) -> Self {
        self.api_key = Some(api_key.into());
        self
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("request_timeout", &self.request_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

/// An OpenAI-compatible Chat Completions provider. One `complete` is one HTTP request.
pub struct OpenAiProvider {
    client: reqwest::Client,
    endpoint: String,
    /// Marked sensitive, so the HTTP stack never prints it.
    authorization: Option<HeaderValue>,
    /// Removes the key from error messages, in case a server echoes it back.
    redactor: Redactor,
    request_timeout: Duration,
    idle_timeout: Duration,
}

impl fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("endpoint", &self.endpoint)
            .field(
                "api_key",
                &self.authorization.as_ref().map(|_| "[REDACTED]"),
            )
            .field("request_timeout", &self.request_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

fn invalid(message: impl Into<String>) -> ModelError {
    ModelError::new(ErrorClass::InvalidRequest, message)
}

impl OpenAiProvider {
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        let base = config.base_url.trim().trim_end_matches('/');
        let url = reqwest::Url::parse(base)
            .map_err(|e| invalid(format!("base URL {base:?} is not a valid URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid(format!(
                "base URL {base:?} must start with http:// or https://"
            )));
        }
        let endpoint = format!("{base}/chat/completions");
        let key = config
            .api_key
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty());
        let authorization = match &key {
            Some(key) => {
                let mut value = HeaderValue::from_str(&format!("Bearer {key}"))
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
        Ok(OpenAiProvider {
            client,
            endpoint,
            authorization,
            redactor: Redactor::new(key),
            request_timeout: config.request_timeout,
            idle_timeout: config.idle_timeout,
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
        let body = request_body(request)?;
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
            .body(body);
        if let Some(authorization) = &self.authorization {
            builder = builder.header(AUTHORIZATION, authorization.clone());
        }
        tracing::debug!(endpoint = %self.endpoint, model = %request.model, streaming, "sending model request");
        let answer = crate::http::exchange(
            builder,
            streaming,
            self.request_timeout,
            self.idle_timeout,
            MAX_RESPONSE_BYTES,
            classify_http_error,
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
impl ModelProvider for OpenAiProvider {
    fn describe(&self) -> String {
        format!("openai-compatible {}", self.endpoint)
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
    fn endpoint_is_built_from_the_base_url() {
        for base in [
            "http://127.0.0.1:8080/v1",
            "http://127.0.0.1:8080/v1/",
            " http://127.0.0.1:8080/v1// ",
        ] {
            let provider = OpenAiProvider::new(OpenAiConfig::new(base)).unwrap();
            assert_eq!(
                provider.endpoint(),
                "http://127.0.0.1:8080/v1/chat/completions"
            );
            assert_eq!(
                provider.describe(),
                "openai-compatible http://127.0.0.1:8080/v1/chat/completions"
            );
        }
    }

    #[test]
    fn bad_configs_are_invalid_requests() {
        for base in ["", "not a url", "ftp://example.com/v1"] {
            let err = OpenAiProvider::new(OpenAiConfig::new(base)).unwrap_err();
            assert_eq!(err.class, ErrorClass::InvalidRequest, "{base:?}");
        }
        let secret = "sk-line\nbreak-secret-value";
        let err =
            OpenAiProvider::new(OpenAiConfig::new("http://127.0.0.1:1/v1").with_api_key(secret))
                .unwrap_err();
        assert_eq!(err.class, ErrorClass::InvalidRequest);
        assert!(!format!("{err} {err:?}").contains("secret-value"));
    }

    #[test]
    fn debug_never_shows_the_key() {
        let key = "sk-test-0123456789abcdef";
        let config = OpenAiConfig::new("http://127.0.0.1:1/v1").with_api_key(key);
        let text = format!("{config:?}");
        assert!(!text.contains(key), "{text}");
        assert!(text.contains("[REDACTED]"));
        let provider = OpenAiProvider::new(config).unwrap();
        let text = format!("{provider:?}");
        assert!(!text.contains(key), "{text}");
        assert!(text.contains("[REDACTED]"));
    }

    #[test]
    fn blank_key_means_no_key() {
        let provider =
            OpenAiProvider::new(OpenAiConfig::new("http://127.0.0.1:1/v1").with_api_key("  "))
                .unwrap();
        assert!(provider.authorization.is_none());
    }
}
