//! Why an embedding call failed, classified like a model call's failure.

use baton_model::ModelError;

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The embeddings server failed or refused (retryable or not: see [`EmbedError::is_retryable`]).
    #[error("embedding request failed: {0}")]
    Server(#[from] ModelError),
    /// The configured local model could not be loaded.
    #[error("cannot load the embedding model from {dir}: {reason}")]
    ModelLoad { dir: String, reason: String },
    /// The local model failed on an input.
    #[error("the local embedding model failed: {0}")]
    Inference(String),
    /// The configuration cannot work (no model name, a zero batch size…).
    #[error("embeddings are misconfigured: {0}")]
    Config(String),
    /// Embedding is on hold (the run it served has ended; see `Metered::hold`).
    #[error("embedding is on hold: the run it served has ended")]
    Held,
}

impl EmbedError {
    /// Whether the same call may succeed later (rate limits, overload, transport failures).
    pub fn is_retryable(&self) -> bool {
        match self {
            EmbedError::Server(e) => e.is_retryable(),
            EmbedError::ModelLoad { .. }
            | EmbedError::Inference(_)
            | EmbedError::Config(_)
            | EmbedError::Held => false,
        }
    }
}
