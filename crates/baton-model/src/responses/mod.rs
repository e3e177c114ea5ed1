//! Client of OpenAI's Responses API (`POST {base}/responses`), the only wire of the
//! `gpt-5*-codex` models: stateless (`store: false`, the whole input every turn), reasoning
//! items carried forward with their encrypted content, streamed or whole.

mod response;
mod stream;
mod wire;

use baton_core::{ModelReply, ModelRequest};

pub use wire::request_body;

/// The streaming reader, public only for this crate's property tests and benchmarks.
#[doc(hidden)]
pub use stream::read_stream;

use crate::ModelError;
use crate::provider::{Dialect, Endpoint, HttpProvider};

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
    type Stream = stream::StreamAccumulator;

    fn name(&self) -> &'static str {
        "openai-responses"
    }

    fn endpoint(&self, base: &str) -> String {
        format!("{base}/responses")
    }

    fn request_body(&self, request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
        request_body(request)
    }

    fn parse_whole(&self, body: &[u8]) -> Result<ModelReply, ModelError> {
        response::parse_whole(body)
    }
}
