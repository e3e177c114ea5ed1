//! `[embeddings]` and `[repo_map]`: which embedder the code index uses and how large the repo
//! map is, resolved from the same layers as every other setting.
//!
//! ```toml
//! [embeddings]
//! provider = "openai"              # or "local", or "none"
//! model = "text-embedding-3-small"
//! base_url = "https://api.openai.com/v1"   # default: OpenAI's; any compatible server
//! api_key_env = "OPENAI_API_KEY"   # default: BATON_EMBED_API_KEY (and OPENAI_API_KEY for OpenAI)
//! dimensions = 512
//! batch_size = 64
//! price_per_mtok = 0.02            # USD per million input tokens
//! cache = "postgres"               # share vectors through the PostgreSQL store
//!
//! [repo_map]
//! tokens = 1000                    # 0: no map in briefs
//! ```
//!
//! Without `[embeddings]`, `BATON_EMBED_MODEL_DIR` names a local model directory; with neither,
//! there is no embedder and search is keyword-only (said once by the commands that search).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use baton_embed::{Embedder, Metered, OpenAiEmbedder, OpenAiEmbedderConfig};
use baton_index::{PostgresVectorCache, VectorCache};
use baton_model::ratelimit::{RateLimit, RateLimiter};
use serde::{Deserialize, Serialize};

use crate::Error;
use crate::layered::{Layered, layered};

/// The environment variable naming a local embedding model directory.
pub const MODEL_DIR_ENV: &str = "BATON_EMBED_MODEL_DIR";
/// The environment variable holding an embeddings API key by default.
pub const API_KEY_ENV: &str = "BATON_EMBED_API_KEY";
const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// `[embeddings] provider`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EmbeddingProvider {
    /// An OpenAI-compatible `/v1/embeddings` endpoint.
    Openai,
    /// all-MiniLM-L6-v2 (or a model of its layout) in-process, from `model_dir`.
    Local,
    /// No embeddings: keyword search and the repo map only.
    None,
}

/// `[embeddings] cache`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EmbeddingCache {
    /// Vectors only in the workspace's own index (the default).
    Local,
    /// Also in a PostgreSQL table shared by every workspace using it.
    Postgres,
}

impl Layered for EmbeddingProvider {}
impl Layered for EmbeddingCache {}

layered! {
/// The `[embeddings]` table.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingsConfig {
    /// `openai`, `local` or `none` (default: from the keys set, else `BATON_EMBED_MODEL_DIR`).
    pub provider: Option<EmbeddingProvider>,
    /// The model name the server knows (`openai`).
    pub model: Option<String>,
    /// The API base up to `/v1` (`openai`).
    pub base_url: Option<String>,
    /// The environment variable holding the API key (`openai`).
    pub api_key_env: Option<String>,
    /// Vector length to ask for (text-embedding-3 and later).
    pub dimensions: Option<u32>,
    /// Texts per request.
    pub batch_size: Option<u32>,
    /// Longest one request may take, in seconds.
    pub timeout_secs: Option<u64>,
    /// The local model's directory (`local`; else `BATON_EMBED_MODEL_DIR`).
    pub model_dir: Option<PathBuf>,
    /// `local` (default) or `postgres`.
    pub cache: Option<EmbeddingCache>,
    /// The PostgreSQL URL of the shared cache (default: the `--store` URL).
    pub cache_url: Option<String>,
    /// USD per million input tokens.
    pub price_per_mtok: Option<f64>,
    /// Client-side requests_per_minute / tokens_per_minute.
    pub rate_limit: Option<RateLimit>,
}
}

layered! {
/// The `[repo_map]` table.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RepoMapConfig {
    /// Tokens of the map in a task's brief; 0 leaves it out.
    pub tokens: Option<u32>,
}
}

/// A configured embedder, ready to use.
pub struct Embeddings {
    /// The embedder with its rate limit, retries and accounting.
    pub metered: Arc<Metered>,
    /// `local all-MiniLM-L6-v2 (/path)`, `openai text-embedding-3-small at https://…`.
    pub description: String,
    /// Where shared vectors live, if anywhere.
    pub cache: Option<CacheTarget>,
    /// The API key, to be redacted wherever text is written.
    pub secret: Option<String>,
}

/// A shared cache to connect to.
#[derive(Clone)]
pub struct CacheTarget {
    url: String,
}

impl CacheTarget {
    /// Connects to the cache (creating its table if missing).
    pub async fn connect(&self) -> Result<Arc<dyn VectorCache>, Error> {
        let cache = PostgresVectorCache::connect(&self.url)
            .await
            .map_err(|e| Error::failed(format!("the shared embedding cache: {e}")))?;
        Ok(Arc::new(cache))
    }
}

impl std::fmt::Debug for Embeddings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.description)
    }
}

/// An embedder, its description and its API key.
type Chosen = (Arc<dyn Embedder>, String, Option<String>);

pub use baton_index::NO_EMBEDDER;

/// The embedder `config` describes, or `None` when there is none. `store_url` is the run's
/// PostgreSQL store, if it has one (the default shared cache). Loading a local model reads
/// about 90 MB: call this from a blocking context.
pub fn resolve(
    config: Option<&EmbeddingsConfig>,
    store_url: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Embeddings>, Error> {
    let empty = EmbeddingsConfig::default();
    let config = config.unwrap_or(&empty);
    let env_dir = env(MODEL_DIR_ENV).filter(|v| !v.trim().is_empty());
    let provider = match config.provider {
        Some(p) => p,
        None if config.model_dir.is_some() => EmbeddingProvider::Local,
        None if config.model.is_some() || config.base_url.is_some() => EmbeddingProvider::Openai,
        None if env_dir.is_some() => EmbeddingProvider::Local,
        None => return Ok(None),
    };
    let (embedder, description, secret): Chosen = match provider {
        EmbeddingProvider::None => return Ok(None),
        EmbeddingProvider::Local => {
            let dir = config.model_dir.clone().or(env_dir.map(PathBuf::from));
            let Some(dir) = dir else {
                return Err(Error::usage(format!(
                    "[embeddings] provider = \"local\" needs model_dir (or {MODEL_DIR_ENV}): \
                         a directory with config.json, tokenizer.json and model.safetensors"
                )));
            };
            let (embedder, description) = load_local(&dir)?;
            (embedder, description, None)
        }
        EmbeddingProvider::Openai => openai(config, env)?,
    };
    let mut metered = Metered::new(embedder);
    if let Some(price) = config.price_per_mtok {
        if !(price.is_finite() && price >= 0.0) {
            return Err(Error::usage(format!(
                "[embeddings] price_per_mtok = {price}: use a price in USD, 0 or more"
            )));
        }
        metered = metered.with_price_per_mtok(price);
    }
    if let Some(limit) = &config.rate_limit {
        let limiter = RateLimiter::new(*limit)
            .map_err(|e| Error::usage(format!("[embeddings.rate_limit]: {e}")))?;
        metered = metered.with_rate_limiter(limiter);
    }
    let cache = match config.cache.unwrap_or(EmbeddingCache::Local) {
        EmbeddingCache::Local => None,
        EmbeddingCache::Postgres => {
            let url = config.cache_url.as_deref().or(store_url).ok_or_else(|| {
                Error::usage(
                    "[embeddings] cache = \"postgres\" needs a PostgreSQL store (--store \
                     postgres://…) or cache_url",
                )
            })?;
            Some(CacheTarget {
                url: url.to_owned(),
            })
        }
    };
    Ok(Some(Embeddings {
        metered: Arc::new(metered),
        description,
        cache,
        secret,
    }))
}

fn openai(
    config: &EmbeddingsConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Chosen, Error> {
    let model = config.model.clone().ok_or_else(|| {
        Error::usage("[embeddings] provider = \"openai\" needs model (e.g. text-embedding-3-small)")
    })?;
    let base_url = config
        .base_url
        .clone()
        .unwrap_or_else(|| OPENAI_BASE_URL.into());
    let key = api_key(config, env)?;
    let mut wire = OpenAiEmbedderConfig::new(base_url.clone(), model.clone());
    wire.api_key = key.clone();
    wire.dimensions = config.dimensions;
    if let Some(batch) = config.batch_size {
        wire.batch_size = batch as usize;
    }
    if let Some(secs) = config.timeout_secs {
        wire.timeout = Duration::from_secs(secs.max(1));
    }
    let embedder = OpenAiEmbedder::new(wire).map_err(|e| Error::usage(e.to_string()))?;
    Ok((
        Arc::new(embedder),
        format!("openai-compatible {model} at {base_url}"),
        key,
    ))
}

/// The embeddings API key `config` selects: `api_key_env`'s variable (which must be set), else
/// `BATON_EMBED_API_KEY`, else — for OpenAI's own endpoint only — `OPENAI_API_KEY`.
fn api_key(
    config: &EmbeddingsConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, Error> {
    let openai = config
        .base_url
        .as_deref()
        .is_none_or(|u| u == OPENAI_BASE_URL);
    Ok(match &config.api_key_env {
        Some(var) => Some(env(var).filter(|v| !v.is_empty()).ok_or_else(|| {
            Error::usage(format!(
                "[embeddings] api_key_env = \"{var}\", but {var} is not set"
            ))
        })?),
        None => env(API_KEY_ENV).filter(|v| !v.is_empty()).or_else(|| {
            // OpenAI's own key goes only to OpenAI.
            openai
                .then(|| env("OPENAI_API_KEY"))
                .flatten()
                .filter(|v| !v.is_empty())
        }),
    })
}

/// The embeddings API key, if one is configured: a secret the engine redacts.
pub fn secret_values(config: Option<&EmbeddingsConfig>) -> Vec<String> {
    let Some(config) = config else {
        return Vec::new();
    };
    if matches!(
        config.provider,
        Some(EmbeddingProvider::None | EmbeddingProvider::Local)
    ) {
        return Vec::new();
    }
    api_key(config, &|k| std::env::var(k).ok())
        .ok()
        .flatten()
        .into_iter()
        .collect()
}

#[cfg(feature = "local-embeddings")]
fn load_local(dir: &Path) -> Result<(Arc<dyn Embedder>, String), Error> {
    let embedder =
        baton_embed::LocalEmbedder::load(dir).map_err(|e| Error::usage(e.to_string()))?;
    Ok((
        Arc::new(embedder),
        format!(
            "local {} ({})",
            dir.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default(),
            dir.display()
        ),
    ))
}

#[cfg(not(feature = "local-embeddings"))]
fn load_local(dir: &Path) -> Result<(Arc<dyn Embedder>, String), Error> {
    Err(Error::usage(format!(
        "the local embedding model in {} needs baton built with the `local-embeddings` feature",
        dir.display()
    )))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn nothing_configured_is_no_embedder() {
        assert!(resolve(None, None, &no_env).unwrap().is_none());
        let none = EmbeddingsConfig {
            provider: Some(EmbeddingProvider::None),
            model: Some("x".into()),
            ..Default::default()
        };
        assert!(resolve(Some(&none), None, &no_env).unwrap().is_none());
    }

    #[test]
    fn openai_needs_a_model_and_keeps_its_key_for_openai() {
        let bare = EmbeddingsConfig {
            provider: Some(EmbeddingProvider::Openai),
            ..Default::default()
        };
        let err = resolve(Some(&bare), None, &no_env).err().unwrap();
        assert!(err.to_string().contains("needs model"), "{err}");
        let env = |k: &str| (k == "OPENAI_API_KEY").then(|| "sk-openai".to_owned());
        let local_server = EmbeddingsConfig {
            model: Some("nomic".into()),
            base_url: Some("http://127.0.0.1:11434/v1".into()),
            ..Default::default()
        };
        let got = resolve(Some(&local_server), None, &env).unwrap().unwrap();
        assert_eq!(
            got.secret, None,
            "OpenAI's key is not sent to another server"
        );
        assert_eq!(got.metered.model_id(), "openai/nomic");
        let openai = EmbeddingsConfig {
            model: Some("text-embedding-3-small".into()),
            dimensions: Some(256),
            ..Default::default()
        };
        let got = resolve(Some(&openai), None, &env).unwrap().unwrap();
        assert_eq!(got.secret.as_deref(), Some("sk-openai"));
        assert_eq!(got.metered.model_id(), "openai/text-embedding-3-small/256");
        let named = EmbeddingsConfig {
            api_key_env: Some("MY_KEY".into()),
            ..openai
        };
        let err = resolve(Some(&named), None, &env).err().unwrap();
        assert!(err.to_string().contains("MY_KEY is not set"), "{err}");
    }

    #[test]
    fn a_postgres_cache_needs_a_url() {
        let config = EmbeddingsConfig {
            model: Some("m".into()),
            base_url: Some("http://127.0.0.1:1/v1".into()),
            cache: Some(EmbeddingCache::Postgres),
            ..Default::default()
        };
        let err = resolve(Some(&config), None, &no_env).err().unwrap();
        assert!(
            err.is_usage() && err.to_string().contains("PostgreSQL store"),
            "{err}"
        );
        let ok = resolve(Some(&config), Some("postgres://x/y"), &no_env)
            .unwrap()
            .unwrap();
        assert!(ok.cache.is_some());
    }

    #[test]
    fn local_without_a_directory_says_what_it_needs() {
        let config = EmbeddingsConfig {
            provider: Some(EmbeddingProvider::Local),
            ..Default::default()
        };
        let err = resolve(Some(&config), None, &no_env).err().unwrap();
        assert!(err.to_string().contains(MODEL_DIR_ENV), "{err}");
        let missing = EmbeddingsConfig {
            model_dir: Some("/nonexistent/model".into()),
            ..Default::default()
        };
        let err = resolve(Some(&missing), None, &no_env).err().unwrap();
        assert!(err.to_string().contains("/nonexistent/model"), "{err}");
    }
}
