//! Client of OpenAI-compatible Chat Completions servers (OpenAI, DeepSeek, vLLM, llama.cpp,
//! Ollama, OpenRouter, …), streamed or whole.

mod response;
mod stream;
mod wire;

use baton_core::{ModelReply, ModelRequest};

pub use wire::request_body;

/// The streaming reader, public only for this crate's property tests and benchmarks.
#[doc(hidden)]
pub use stream::read_stream;

use crate::ModelError;
pub use crate::provider::MAX_RESPONSE_BYTES;
use crate::provider::{Dialect, Endpoint, HttpProvider};

/// Where and how to reach a Chat Completions server: base URL up to the API version, e.g.
/// `https://api.openai.com/v1`.
pub type OpenAiConfig = Endpoint;

/// The Chat Completions wire (`POST {base}/chat/completions`, bearer key).
#[derive(Clone, Debug, Default)]
pub struct ChatCompletions;

/// An OpenAI-compatible Chat Completions provider.
pub type OpenAiProvider = HttpProvider<ChatCompletions>;

impl HttpProvider<ChatCompletions> {
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        HttpProvider::with_dialect(ChatCompletions, config)
    }
}

impl Dialect for ChatCompletions {
    type Stream = stream::StreamAccumulator;

    fn name(&self) -> &'static str {
        "openai-compatible"
    }

    fn endpoint(&self, base: &str) -> String {
        format!("{base}/chat/completions")
    }

    fn request_body(&self, request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
        request_body(request)
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
        assert!(!provider.has_key());
    }
}
