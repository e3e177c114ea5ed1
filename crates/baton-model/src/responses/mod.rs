//! Client of OpenAI's Responses API (`POST {base}/responses`), the only wire of the
//! `gpt-5*-codex` models: stateless (`store: false`, the whole input every turn), reasoning
//! items carried forward with their encrypted content, streamed or whole.

mod response;
mod stream;
mod wire;

use std::future::Future;
use std::time::Duration;

use baton_core::{ModelReply, ModelRequest};
use bytes::Bytes;
use futures::Stream;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

pub use wire::request_body;

/// The streaming reader, public only for this crate's property tests and benchmarks.
#[doc(hidden)]
pub use stream::read_stream;

use crate::error::classify_http_error;
use crate::provider::{Dialect, Endpoint, HttpProvider, bearer};
use crate::{ModelError, StreamObserver};

/// The Responses wire (`POST {base}/responses`, bearer key).
#[derive(Clone, Debug, Default)]
pub struct Responses;

/// An OpenAI Responses API provider.
pub type ResponsesProvider = HttpProvider<Responses>;

impl HttpProvider<Responses> {
    pub fn new(config: Endpoint) -> Result<Self, ModelError> {
        HttpProvider::with_dialect(Responses, config)
    }
}

impl Dialect for Responses {
    fn name(&self) -> &'static str {
        "openai-responses"
    }

    fn endpoint(&self, base: &str) -> String {
        format!("{base}/responses")
    }

    fn auth_header(&self, key: &str) -> Result<(HeaderName, HeaderValue), ModelError> {
        bearer(key)
    }

    fn request_body(&self, request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
        request_body(request)
    }

    /// OpenAI's error bodies are the same on both of its wires.
    fn classify_status(&self, status: u16, headers: &HeaderMap, body: &str) -> ModelError {
        classify_http_error(status, headers, body)
    }

    fn read_stream<'a, S>(
        &'a self,
        body: S,
        idle: Duration,
        cap: usize,
        observer: &'a mut dyn StreamObserver,
    ) -> impl Future<Output = Result<ModelReply, ModelError>> + Send + 'a
    where
        S: Stream<Item = Result<Bytes, ModelError>> + Unpin + Send + 'a,
    {
        stream::read_stream(body, idle, cap, observer)
    }

    fn parse_whole(&self, body: &[u8]) -> Result<ModelReply, ModelError> {
        response::parse_whole(body)
    }
}
