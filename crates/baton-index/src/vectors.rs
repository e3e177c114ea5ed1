//! Embedding the chunks that have no vector yet, and exact vector search.
//!
//! Vectors are keyed by (embedder model id, chunk hash), never by chunk id: an unchanged chunk
//! keeps its vector through any edit elsewhere in its file, a moved one finds it again, and a
//! shared [`VectorCache`] can hand the same vector to every clone of a repository.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use baton_embed::{Metered, Purpose};
use serde::Serialize;

use crate::cache::VectorCache;
use crate::db::encode_vector;
use crate::error::{IndexError, db};
use crate::index::CodeIndex;
use crate::input_layout::{embed_input, vector_key};
use crate::matrix::Matrix;
use crate::update::content_hash;

/// Chunks taken from the database per round of embedding.
const ROUND: i64 = 256;

/// What [`CodeIndex::embed_missing`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EmbedReport {
    /// Distinct chunk texts given a vector by the embedder.
    pub embedded: usize,
    /// Distinct chunk texts whose vector came from the shared cache.
    pub from_cache: usize,
    /// Embedding requests made.
    pub calls: u64,
    pub input_tokens: u64,
}

/// A chunk text without a vector: its hash, a path, symbol and text it stands at.
type Missing = (String, String, Option<String>, String);

/// Hashes claimed in the shared cache at once: small enough that two workers starting together
/// take turns batch by batch (and share the work) instead of one waiting for the other's
/// whole round.
const CLAIM_BATCH: usize = 64;
/// How often a worker looks for the vectors another one claimed.
const CLAIM_POLL: Duration = Duration::from_millis(250);

/// Embeds `todo` (hash, path, symbol, text), in order: the vectors of the leading chunks it
/// embedded, and the failure that stopped it before the rest, if any (what was paid for is
/// kept either way).
async fn embed(
    embedder: &Metered,
    todo: &[&Missing],
) -> (Vec<(String, Vec<f32>)>, Option<IndexError>) {
    let inputs: Vec<String> = todo
        .iter()
        .map(|(_, path, symbol, text)| embed_input(path, symbol.as_deref(), text))
        .collect();
    let (vectors, error) = embedder.embed_prefix(&inputs, Purpose::Document).await;
    let fresh = todo.iter().map(|m| m.0.clone()).zip(vectors).collect();
    (fresh, error.map(IndexError::from))
}

/// Embedding through a shared cache: claim, embed what is ours, wait for what others claimed.
struct Shared<'a> {
    embedder: &'a Metered,
    cache: &'a dyn VectorCache,
    model: &'a str,
    /// This index's lasting id ([`CodeIndex::owner`]).
    owner: &'a str,
}

impl Shared<'_> {
    /// Gives every chunk of `todo` a vector in `found`: claimed batch by batch and embedded
    /// here, or, where another workspace holds the claim, from the cache once it has put it
    /// there (or from here, once its claim went stale).
    async fn embed(
        &self,
        todo: Vec<&Missing>,
        found: &mut HashMap<String, Vec<f32>>,
        report: &mut EmbedReport,
    ) -> Result<(), IndexError> {
        let mut theirs: Vec<&Missing> = Vec::new();
        for batch in todo.chunks(CLAIM_BATCH) {
            theirs.extend(self.embed_claimed(batch, found, report).await?);
        }
        while !theirs.is_empty() {
            tokio::time::sleep(CLAIM_POLL).await;
            let hashes: Vec<String> = theirs.iter().map(|m| m.0.clone()).collect();
            let got = self.cache.get(self.model, &hashes).await?;
            report.from_cache += got.len();
            theirs.retain(|m| !got.contains_key(&m.0));
            found.extend(got);
            if !theirs.is_empty() {
                // Claims that went stale are taken over here.
                theirs = self.embed_claimed(&theirs, found, report).await?;
            }
        }
        Ok(())
    }

    /// Claims `batch`, embeds and shares what this worker now holds; returns the rest (held by
    /// others).
    async fn embed_claimed<'m>(
        &self,
        batch: &[&'m Missing],
        found: &mut HashMap<String, Vec<f32>>,
        report: &mut EmbedReport,
    ) -> Result<Vec<&'m Missing>, IndexError> {
        let hashes: Vec<String> = batch.iter().map(|m| m.0.clone()).collect();
        let mine: HashSet<String> = self
            .cache
            .claim(self.model, self.owner, &hashes)
            .await?
            .into_iter()
            .collect();
        let (own, theirs): (Vec<&Missing>, Vec<&Missing>) =
            batch.iter().partition(|m| mine.contains(&m.0));
        if own.is_empty() {
            return Ok(theirs);
        }
        let (fresh, error) = embed(self.embedder, &own).await;
        if !fresh.is_empty() {
            self.cache.put(self.model, &fresh).await?;
        }
        report.embedded += fresh.len();
        let got = fresh.len();
        found.extend(fresh);
        if let Some(error) = error {
            // Best effort: others may take the rest now instead of after the claim timeout.
            let rest: Vec<String> = own.iter().skip(got).map(|m| m.0.clone()).collect();
            if let Err(release) = self.cache.release(self.model, &rest).await {
                tracing::warn!("could not release claims after a failed embedding: {release}");
            }
            return Err(error);
        }
        Ok(theirs)
    }
}

/// Progress of a long embedding pass: done and total distinct chunk texts.
pub type Progress<'a> = &'a (dyn Fn(usize, usize) + Send + Sync);

impl CodeIndex {
    /// Gives every chunk without a vector of `embedder`'s model one: from `cache` when it has
    /// it, else from the embedder (batched, retried and metered by [`Metered`]), then stored
    /// locally and in the cache. Stops at the first call that fails for good; what was embedded
    /// before stays.
    pub async fn embed_missing(
        &self,
        embedder: &Metered,
        cache: Option<&dyn VectorCache>,
        progress: Progress<'_>,
    ) -> Result<EmbedReport, IndexError> {
        let _writer = self.embed_lock.lock().await;
        let model_id = embedder.model_id();
        let model = vector_key(&model_id);
        let before = embedder.totals();
        let total = self.missing_count(&model_id).await?;
        let mut report = EmbedReport::default();
        let mut done = 0;
        // Named once per pass: only a shared cache needs to know who claims.
        let owner = match cache {
            Some(_) => Some(self.owner().await?),
            None => None,
        };
        let shared = cache.zip(owner.as_deref()).map(|(cache, owner)| Shared {
            embedder,
            cache,
            model: &model,
            owner,
        });
        progress(0, total);
        loop {
            let missing: Vec<Missing> = sqlx::query_as(
                "SELECT c.hash, min(c.path), min(c.symbol), min(c.text) FROM chunks c \
                 WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.model = ?1 AND v.hash = c.hash) \
                 GROUP BY c.hash ORDER BY min(c.id) LIMIT ?2",
            )
            .bind(&model)
            .bind(ROUND)
            .fetch_all(&self.pool)
            .await
            .map_err(db("finding chunks to embed"))?;
            if missing.is_empty() {
                break;
            }
            let hashes: Vec<String> = missing.iter().map(|m| m.0.clone()).collect();
            let mut found: HashMap<String, Vec<f32>> = match cache {
                Some(cache) => cache.get(&model, &hashes).await?,
                None => HashMap::new(),
            };
            report.from_cache += found.len();
            let todo: Vec<&Missing> = missing
                .iter()
                .filter(|m| !found.contains_key(&m.0))
                .collect();
            let outcome = match &shared {
                Some(shared) => shared.embed(todo, &mut found, &mut report).await,
                None => {
                    let (fresh, error) = embed(embedder, &todo).await;
                    report.embedded += fresh.len();
                    found.extend(fresh);
                    error.map_or(Ok(()), Err)
                }
            };
            // What was embedded is kept even when the rest failed: it was paid for.
            self.store_vectors(&model, &found).await?;
            outcome?;
            done += missing.len();
            progress(done.min(total), total);
        }
        let after = embedder.totals();
        report.calls = after.calls - before.calls;
        report.input_tokens = after.input_tokens - before.input_tokens;
        Ok(report)
    }

    /// This index's lasting id as a claimant in a shared cache: made once, kept in the index,
    /// so a worker killed while embedding takes its own claims back at once when it restarts.
    async fn owner(&self) -> Result<String, IndexError> {
        let seed = format!(
            "{}:{}:{:?}",
            self.root.display(),
            std::process::id(),
            std::time::SystemTime::now()
        );
        let fresh = content_hash(seed.as_bytes());
        sqlx::query("INSERT OR IGNORE INTO meta (key, value) VALUES ('owner', ?)")
            .bind(&fresh)
            .execute(&self.pool)
            .await
            .map_err(db("naming this index"))?;
        sqlx::query_scalar("SELECT value FROM meta WHERE key = 'owner'")
            .fetch_one(&self.pool)
            .await
            .map_err(db("naming this index"))
    }

    /// Distinct chunk texts without a vector of `model` (an embedder's model id). Counted once
    /// per index generation.
    pub async fn missing_count(&self, model: &str) -> Result<usize, IndexError> {
        let generation = self.generation().await?;
        let mut cached = self.missing.lock().await;
        if let Some((g, m, n)) = cached.as_ref()
            && *g == generation
            && m == model
        {
            return Ok(*n);
        }
        let n = self.count_missing(model).await?;
        *cached = Some((generation, model.to_owned(), n));
        Ok(n)
    }

    async fn count_missing(&self, model: &str) -> Result<usize, IndexError> {
        let model = vector_key(model);
        let n: i64 = sqlx::query_scalar(
            "SELECT count(DISTINCT c.hash) FROM chunks c WHERE NOT EXISTS \
             (SELECT 1 FROM vectors v WHERE v.model = ? AND v.hash = c.hash)",
        )
        .bind(&model)
        .fetch_one(&self.pool)
        .await
        .map_err(db("counting chunks to embed"))?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    async fn store_vectors(
        &self,
        model: &str,
        vectors: &HashMap<String, Vec<f32>>,
    ) -> Result<(), IndexError> {
        let mut sorted: Vec<(&String, &Vec<f32>)> = vectors.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        let mut tx = self.pool.begin().await.map_err(db("storing vectors"))?;
        for (hash, vector) in sorted {
            sqlx::query("INSERT OR REPLACE INTO vectors (model, hash, vec) VALUES (?, ?, ?)")
                .bind(model)
                .bind(hash)
                .bind(encode_vector(vector))
                .execute(&mut *tx)
                .await
                .map_err(db("storing vectors"))?;
        }
        sqlx::query(
            "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) \
             WHERE key = 'generation'",
        )
        .execute(&mut *tx)
        .await
        .map_err(db("storing vectors"))?;
        tx.commit().await.map_err(db("storing vectors"))
    }

    /// The `limit` chunks nearest to `query` (a unit vector of `model`, an embedder's model id),
    /// as (chunk id, cosine), best first; ties by chunk id.
    pub(crate) async fn nearest(
        &self,
        model: &str,
        query: &[f32],
        path_prefix: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(i64, f32)>, IndexError> {
        let model = vector_key(model);
        let model = model.as_str();
        let generation = self.generation().await?;
        let mut guard = self.matrix.lock().await;
        let stale = guard
            .as_ref()
            .is_none_or(|m| !m.is_current(generation, model));
        if stale {
            *guard = Some(Matrix::load(&self.pool, model, generation).await?);
        }
        Ok(guard
            .as_ref()
            .map_or_else(Vec::new, |matrix| matrix.nearest(query, path_prefix, limit)))
    }
}
