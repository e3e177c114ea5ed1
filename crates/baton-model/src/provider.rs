//! One HTTP provider skeleton for every wire: [`HttpProvider`] does what all of them share —
//! validate the base URL, hold the key as a sensitive header, send with deadlines, read a
//! streamed or whole answer within bounds, and keep the key out of error messages — and a
//! [`Dialect`] supplies what differs: the endpoint, the auth header, the request body, error
//! classification and the two response parsers. A new wire is a new dialect, not a new client.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use baton_core::{ErrorClass, ModelReply, ModelRequest, Redactor, ResponseMode};
use bytes::Bytes;
use futures::Stream;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use crate::http::Answer;
use crate::{ModelError, ModelProvider, StreamObserver};

/// Largest successful response read, streamed or whole. Far above any real answer; it only
/// stops a runaway server from exhausting memory.
pub const MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;

/// What one wire format does differently. Implementations are pure translation: no IO, so each
/// is tested on bytes alone; [`HttpProvider`] does the exchange.
pub trait Dialect: Send + Sync + 'static {
    /// Short name for logs and `describe`, e.g. `openai-compatible`.
    fn name(&self) -> &'static str;

    /// The URL requests are posted to, from a base URL already trimmed of trailing slashes.
    fn endpoint(&self, base: &str) -> String;

    /// The header that carries the API key (the value is marked sensitive by the caller).
    /// Default: `Authorization: Bearer KEY`, as OpenAI's wires and most servers take it.
    fn auth_header(&self, key: &str) -> Result<(HeaderName, HeaderValue), ModelError> {
        bearer(key)
    }

    /// Headers a request carries besides content type, accept and auth (an API version, a
    /// beta feature the request uses).
    fn extra_headers(&self, _request: &ModelRequest) -> Vec<(HeaderName, HeaderValue)> {
        Vec::new()
    }

    /// The exact request body. The same request must always give the same bytes (prompt
    /// caches match prefixes; a resumed run's request digest must match the original's).
    fn request_body(&self, request: &ModelRequest) -> Result<Vec<u8>, ModelError>;

    /// A failed HTTP status with its (capped) body, classified. Default: OpenAI's error bodies
    /// (the same on both of its wires, and what compatible servers send).
    fn classify_status(&self, status: u16, headers: &HeaderMap, body: &str) -> ModelError {
        crate::error::classify_http_error(status, headers, body)
    }

    /// How this wire's event stream folds into one reply.
    type Stream: StreamFold;

    /// Parses a whole (non-streamed) response body.
    fn parse_whole(&self, body: &[u8]) -> Result<ModelReply, ModelError>;
}

/// Folds one wire's server-sent events into a reply, event by event.
pub trait StreamFold: Default + Send {
    /// Takes one event (its `event:` name, empty when the wire sends none, and its `data:`);
    /// stream pieces go to `observer`. `true` once the stream says it is complete.
    fn on_event(
        &mut self,
        kind: &str,
        data: &str,
        observer: &mut dyn StreamObserver,
    ) -> Result<bool, ModelError>;

    /// The reply, once the stream ended; a stream cut before its end is an error.
    fn finish(self) -> Result<ModelReply, ModelError>;
}

/// Reads an event stream into one reply with `F`; pieces go to `observer` as they arrive. A cut
/// or malformed stream is a classified error, never a partial reply.
pub async fn fold_stream<F: StreamFold, S>(
    body: S,
    idle: Duration,
    cap: usize,
    observer: &mut dyn StreamObserver,
) -> Result<ModelReply, ModelError>
where
    S: Stream<Item = Result<Bytes, ModelError>> + Unpin,
{
    let mut fold = F::default();
    crate::body::read_sse(body, idle, cap, |kind, data| {
        fold.on_event(kind, data, observer)
    })
    .await?;
    fold.finish()
}

/// Defines a dialect module's `read_stream`: its wire's stream read with its fold (the tests and
/// benchmarks of a wire call it directly).
macro_rules! read_stream_with {
    ($fold:ty) => {
        /// Reads a stream of this wire into one reply (see [`crate::provider::fold_stream`]).
        pub async fn read_stream<S>(
            body: S,
            idle: std::time::Duration,
            cap: usize,
            observer: &mut dyn crate::StreamObserver,
        ) -> Result<baton_core::ModelReply, crate::ModelError>
        where
            S: futures::Stream<Item = Result<bytes::Bytes, crate::ModelError>> + Unpin,
        {
            crate::provider::fold_stream::<$fold, S>(body, idle, cap, observer).await
        }
    };
}

pub(crate) use read_stream_with;

/// Where and how to reach a server, for any dialect. `Debug` never shows the key.
#[derive(Clone)]
pub struct Endpoint {
    pub base_url: String,
    pub api_key: Option<String>,
    /// Limit for connecting and receiving the response headers. A whole response sends its
    /// headers only once the answer is generated, so this must allow for that.
    pub request_timeout: Duration,
    /// Limit for the gap between two pieces of the response body.
    pub idle_timeout: Duration,
}

impl Endpoint {
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

    /// An endpoint with default timeouts and no API key.
    pub fn new(base_url: impl Into<String>) -> Self {
        Endpoint {
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

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[REDACTED]"))
            .field("request_timeout", &self.request_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

pub(crate) fn invalid(message: impl Into<String>) -> ModelError {
    ModelError::new(ErrorClass::InvalidRequest, message)
}

/// `Authorization: Bearer KEY`, as OpenAI's wires (and most copies) take the key.
pub(crate) fn bearer(key: &str) -> Result<(HeaderName, HeaderValue), ModelError> {
    Ok((
        reqwest::header::AUTHORIZATION,
        key_header(&format!("Bearer {key}"))?,
    ))
}

/// A header value holding a key: refused (without quoting the key) if it cannot be a header.
pub(crate) fn key_header(value: &str) -> Result<HeaderValue, ModelError> {
    let mut value = HeaderValue::from_str(value)
        // The message must not quote the key, not even its invalid part.
        .map_err(|_| invalid("the API key contains characters not allowed in an HTTP header"))?;
    value.set_sensitive(true);
    Ok(value)
}

/// A model provider speaking dialect `D` over HTTP. One `complete` is one HTTP request.
pub struct HttpProvider<D> {
    dialect: D,
    client: reqwest::Client,
    endpoint: String,
    /// Marked sensitive, so the HTTP stack never prints it.
    auth: Option<(HeaderName, HeaderValue)>,
    /// Removes the key from error messages, in case a server echoes it back.
    redactor: Redactor,
    request_timeout: Duration,
    idle_timeout: Duration,
}

impl<D: Dialect> fmt::Debug for HttpProvider<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpProvider")
            .field("dialect", &self.dialect.name())
            .field("endpoint", &self.endpoint)
            .field("api_key", &self.auth.as_ref().map(|_| "[REDACTED]"))
            .field("request_timeout", &self.request_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

impl<D: Dialect> HttpProvider<D> {
    pub fn with_dialect(dialect: D, endpoint: Endpoint) -> Result<Self, ModelError> {
        let base = endpoint.base_url.trim().trim_end_matches('/');
        let url = reqwest::Url::parse(base)
            .map_err(|e| invalid(format!("base URL {base:?} is not a valid URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid(format!(
                "base URL {base:?} must start with http:// or https://"
            )));
        }
        let key = endpoint
            .api_key
            .map(|k| k.trim().to_string())
            .filter(|k| !k.is_empty());
        let auth = key.as_deref().map(|k| dialect.auth_header(k)).transpose()?;
        let client = reqwest::Client::builder()
            .connect_timeout(endpoint.request_timeout)
            .user_agent(concat!("baton/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| invalid(format!("could not set up the HTTP client: {e}")))?;
        Ok(HttpProvider {
            endpoint: dialect.endpoint(base),
            dialect,
            client,
            auth,
            redactor: Redactor::new(key),
            request_timeout: endpoint.request_timeout,
            idle_timeout: endpoint.idle_timeout,
        })
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub fn dialect(&self) -> &D {
        &self.dialect
    }

    /// Whether requests carry a key (a blank one counts as none).
    pub fn has_key(&self) -> bool {
        self.auth.is_some()
    }

    async fn send(
        &self,
        request: &ModelRequest,
        observer: &mut dyn StreamObserver,
    ) -> Result<ModelReply, ModelError> {
        let body = self.dialect.request_body(request)?;
        let mode = request.response_mode;
        let accept = match mode {
            ResponseMode::Streaming => "text/event-stream",
            ResponseMode::Whole => "application/json",
        };
        let mut builder = self
            .client
            .post(&self.endpoint)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, accept);
        for (name, value) in self.dialect.extra_headers(request) {
            builder = builder.header(name, value);
        }
        if let Some((name, value)) = &self.auth {
            builder = builder.header(name.clone(), value.clone());
        }
        tracing::debug!(endpoint = %self.endpoint, model = %request.model, ?mode, "sending model request");
        let answer = crate::http::exchange(
            builder.body(body),
            mode,
            self.request_timeout,
            self.idle_timeout,
            MAX_RESPONSE_BYTES,
            |status, headers, text| self.dialect.classify_status(status, headers, text),
        )
        .await?;
        match answer {
            Answer::Stream(body) => {
                fold_stream::<D::Stream, _>(body, self.idle_timeout, MAX_RESPONSE_BYTES, observer)
                    .await
            }
            Answer::Whole(bytes) => {
                let reply = self.dialect.parse_whole(&bytes)?;
                crate::announce(&reply, observer);
                Ok(reply)
            }
        }
    }
}

#[async_trait]
impl<D: Dialect> ModelProvider for HttpProvider<D> {
    fn describe(&self) -> String {
        format!("{} {}", self.dialect.name(), self.endpoint)
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
