//! Text embeddings for baton's code index.
//!
//! One trait, [`Embedder`], with two implementations:
//! - [`OpenAiEmbedder`]: any OpenAI-compatible `POST /v1/embeddings` endpoint (OpenAI, Ollama,
//!   vLLM, llama.cpp's server with `--embedding`, …), batched;
//! - `LocalEmbedder` (feature `local`, on by default): all-MiniLM-L6-v2 run in-process by
//!   candle, loaded from a model directory, never downloaded.
//!
//! [`Metered`] wraps either with what model calls have: a client-side rate limit, retries of
//! retryable failures (baton-model's [`RetryPolicy`], which honours `Retry-After`), token and
//! cost accounting, and a [`UsageSink`] that the caller journals each call's usage to.
//!
//! A vector's identity is the embedder's [`Embedder::model_id`] plus the input text: the same
//! model id must always give the same vector for the same text, which is what lets vectors be
//! cached by content hash and shared between workspaces.

mod error;
mod metered;
mod openai;

#[cfg(feature = "local")]
mod local;

pub use baton_model::{ModelError, RetryPolicy};
pub use error::EmbedError;
#[cfg(feature = "local")]
pub use local::{LocalEmbedder, MINILM_DIMENSIONS, MINILM_MODEL_ID};
pub use metered::{EmbedCall, Metered, UsageSink, UsageTotals};
pub use openai::{OpenAiEmbedder, OpenAiEmbedderConfig};

use async_trait::async_trait;

/// What a text is embedded as: some models embed queries and documents differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    Document,
    Query,
}

/// The vectors of one call, in input order, and what the call cost in tokens.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Embedded {
    pub vectors: Vec<Vec<f32>>,
    /// Input tokens as the server (or the local tokenizer) counted them.
    pub input_tokens: u64,
}

/// Something that turns texts into vectors.
#[async_trait]
pub trait Embedder: Send + Sync {
    /// Identifies the vectors this embedder makes (provider, model, dimensions): vectors of
    /// different ids are never compared or shared.
    fn model_id(&self) -> String;

    /// Texts per call: callers split larger inputs into batches of this many.
    fn max_batch(&self) -> usize;

    /// Embeds `texts` (at most [`Embedder::max_batch`]), one attempt. Vectors are L2-normalised
    /// by the caller ([`normalize`]) if the embedder does not.
    async fn embed(&self, texts: &[String], purpose: Purpose) -> Result<Embedded, EmbedError>;
}

/// Scales `v` to unit length (a zero vector stays zero), so a dot product is the cosine.
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// The dot product of two vectors of equal length (the cosine, for unit vectors).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_gives_unit_length() {
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert!((dot(&v, &v) - 1.0).abs() < 1e-6);
        let mut zero = vec![0.0; 3];
        normalize(&mut zero);
        assert_eq!(zero, [0.0; 3]);
    }
}

/// Where tests find the local model that `scripts/embed-model.sh` installs.
pub mod testing {
    use std::path::PathBuf;

    /// `$BATON_TEST_EMBED_MODEL`, else `${XDG_CACHE_HOME:-$HOME/.cache}/baton-embed-model/
    /// all-MiniLM-L6-v2` — or why it is not there, naming the script that installs it.
    pub fn model_dir() -> Result<PathBuf, String> {
        let dir = match std::env::var_os("BATON_TEST_EMBED_MODEL") {
            Some(dir) => PathBuf::from(dir),
            None => {
                let cache = std::env::var_os("XDG_CACHE_HOME")
                    .map(PathBuf::from)
                    .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                    .ok_or("neither XDG_CACHE_HOME nor HOME is set")?;
                cache.join("baton-embed-model").join("all-MiniLM-L6-v2")
            }
        };
        if dir.join("model.safetensors").is_file() {
            Ok(dir)
        } else {
            Err(format!(
                "no embedding model in {}: run scripts/embed-model.sh (scripts/test does)",
                dir.display()
            ))
        }
    }
}
