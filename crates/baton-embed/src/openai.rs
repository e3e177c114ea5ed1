//! An OpenAI-compatible `POST /embeddings` client.
//!
//! Wire format from OpenAI's API reference: the body is `{"model", "input": [strings],
//! "encoding_format": "float", "dimensions"?}`; the answer is `{"data": [{"index", "embedding":
//! [floats]}], "usage": {"prompt_tokens", "total_tokens"}}`. An input array holds at most 2,048
//! texts, and all inputs of one request at most 300,000 tokens; each input at most 8,192 tokens
//! and never empty. `encoding_format` is sent as `"float"` because the official SDKs default to
//! base64, and some compatible servers only speak floats. Errors are classified like model
//! calls (429 rate limit, 5xx overload, 401 auth…), by baton-model.

use std::time::Duration;

use async_trait::async_trait;
use baton_core::ErrorClass;
use baton_model::{ModelError, classify_http_error, classify_transport_error};
use serde::{Deserialize, Serialize};

use crate::{EmbedError, Embedded, Embedder, Purpose, normalize};

/// The API's limit on texts per request.
pub const MAX_INPUTS_PER_REQUEST: usize = 2048;
/// An error body is read up to this size.
const MAX_ERROR_BODY: usize = 16 * 1024;

/// How to reach an OpenAI-compatible embeddings endpoint.
#[derive(Clone, Debug)]
pub struct OpenAiEmbedderConfig {
    /// The API base, up to and including `/v1` (`https://api.openai.com/v1`,
    /// `http://127.0.0.1:11434/v1`); `/embeddings` is appended.
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
    /// Asks the server for vectors of this length (text-embedding-3 and later); unset: the
    /// model's own.
    pub dimensions: Option<u32>,
    /// Texts per request.
    pub batch_size: usize,
    pub timeout: Duration,
}

impl OpenAiEmbedderConfig {
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiEmbedderConfig {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            dimensions: None,
            batch_size: 64,
            timeout: Duration::from_secs(120),
        }
    }
}

/// An embedder talking to an OpenAI-compatible server.
#[derive(Clone, Debug)]
pub struct OpenAiEmbedder {
    config: OpenAiEmbedderConfig,
    url: String,
    client: reqwest::Client,
}

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    input: &'a [String],
    encoding_format: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<u32>,
}

#[derive(Deserialize)]
struct Response {
    data: Vec<Datum>,
    #[serde(default)]
    usage: Option<ResponseUsage>,
}

#[derive(Deserialize)]
struct Datum {
    index: usize,
    embedding: Vector,
}

/// One vector per input, as OpenAI sends — or one per token, as llama.cpp's Python server
/// (`llama-cpp-python`) sends for a model without a pooling layer (a chat model such as
/// SmolLM2): those are mean-pooled here, which is what a pooling layer would do.
#[derive(Deserialize)]
#[serde(untagged)]
enum Vector {
    Pooled(Vec<f32>),
    PerToken(Vec<Vec<f32>>),
}

impl Vector {
    fn pooled(self) -> Vec<f32> {
        match self {
            Vector::Pooled(v) => v,
            Vector::PerToken(tokens) => {
                let Some(width) = tokens.first().map(Vec::len) else {
                    return Vec::new();
                };
                if tokens.iter().any(|t| t.len() != width) {
                    return Vec::new();
                }
                let mut sum = vec![0.0f32; width];
                for token in &tokens {
                    sum.iter_mut().zip(token).for_each(|(s, x)| *s += x);
                }
                let n = tokens.len() as f32;
                sum.iter_mut().for_each(|s| *s /= n);
                sum
            }
        }
    }
}

#[derive(Deserialize)]
struct ResponseUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    total_tokens: u64,
}

impl OpenAiEmbedder {
    pub fn new(config: OpenAiEmbedderConfig) -> Result<Self, EmbedError> {
        if config.model.trim().is_empty() {
            return Err(EmbedError::Config("no embedding model is named".into()));
        }
        if config.batch_size == 0 || config.batch_size > MAX_INPUTS_PER_REQUEST {
            return Err(EmbedError::Config(format!(
                "batch_size must be between 1 and {MAX_INPUTS_PER_REQUEST}, not {}",
                config.batch_size
            )));
        }
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| EmbedError::Config(format!("cannot build an HTTP client: {e}")))?;
        let url = format!("{}/embeddings", config.base_url.trim_end_matches('/'));
        Ok(OpenAiEmbedder {
            config,
            url,
            client,
        })
    }

    fn bad_response(message: impl Into<String>) -> EmbedError {
        EmbedError::Server(ModelError::new(ErrorClass::BadResponse, message))
    }
}

#[async_trait]
impl Embedder for OpenAiEmbedder {
    fn model_id(&self) -> String {
        match self.config.dimensions {
            Some(d) => format!("openai/{}/{d}", self.config.model),
            None => format!("openai/{}", self.config.model),
        }
    }

    fn max_batch(&self) -> usize {
        self.config.batch_size
    }

    async fn embed(&self, texts: &[String], _purpose: Purpose) -> Result<Embedded, EmbedError> {
        if texts.is_empty() {
            return Ok(Embedded::default());
        }
        // The API rejects empty strings; a blank chunk still deserves a vector.
        let inputs: Vec<String> = texts
            .iter()
            .map(|t| {
                if t.is_empty() {
                    " ".to_owned()
                } else {
                    t.clone()
                }
            })
            .collect();
        let body = Request {
            model: &self.config.model,
            input: &inputs,
            encoding_format: "float",
            dimensions: self.config.dimensions,
        };
        let mut request = self.client.post(&self.url).json(&body);
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let response = request
            .send()
            .await
            .map_err(|e| EmbedError::Server(classify_transport_error(&e)))?;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| EmbedError::Server(classify_transport_error(&e)))?;
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_ERROR_BODY)]);
            return Err(EmbedError::Server(classify_http_error(
                status.as_u16(),
                &headers,
                &text,
            )));
        }
        let parsed: Response = serde_json::from_slice(&bytes).map_err(|e| {
            Self::bad_response(format!(
                "the embeddings response is not the expected JSON: {e}"
            ))
        })?;
        into_embedded(parsed, texts.len(), self.config.dimensions)
    }
}

fn into_embedded(
    response: Response,
    expected: usize,
    dimensions: Option<u32>,
) -> Result<Embedded, EmbedError> {
    if response.data.len() != expected {
        return Err(OpenAiEmbedder::bad_response(format!(
            "asked for {expected} embeddings, got {}",
            response.data.len()
        )));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; expected];
    for datum in response.data {
        let Some(slot) = slots.get_mut(datum.index) else {
            return Err(OpenAiEmbedder::bad_response(format!(
                "embedding index {} is out of range",
                datum.index
            )));
        };
        *slot = Some(datum.embedding.pooled());
    }
    let mut vectors = Vec::with_capacity(expected);
    let mut length = None;
    for (i, slot) in slots.into_iter().enumerate() {
        let Some(mut v) = slot else {
            return Err(OpenAiEmbedder::bad_response(format!(
                "no embedding for input {i}"
            )));
        };
        if v.is_empty() || length.is_some_and(|l| l != v.len()) {
            return Err(OpenAiEmbedder::bad_response(format!(
                "embedding {i} has {} dimensions, unlike the others",
                v.len()
            )));
        }
        if let Some(d) = dimensions.filter(|d| *d as usize != v.len()) {
            return Err(OpenAiEmbedder::bad_response(format!(
                "asked for {d} dimensions, got {}",
                v.len()
            )));
        }
        length = Some(v.len());
        normalize(&mut v);
        vectors.push(v);
    }
    let input_tokens = response
        .usage
        .map(|u| {
            if u.prompt_tokens > 0 {
                u.prompt_tokens
            } else {
                u.total_tokens
            }
        })
        .unwrap_or(0);
    Ok(Embedded {
        vectors,
        input_tokens,
    })
}
