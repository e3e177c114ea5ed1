//! A vector cache shared between workspaces: a team's workers on clones of one repository
//! embed each chunk once.
//!
//! Vectors are keyed by (embedder model id, chunk hash), so a cache never needs to know which
//! repository or file a chunk came from. Search stays in each workspace's own index; the cache
//! only saves embedding calls, which is why it needs no vector extension on the server.
//!
//! Workers that start at once would each find the cache empty and embed the same chunks, so a
//! worker first *claims* the hashes it is about to embed: a claim is a row that says "being
//! embedded since T". Others wait for those vectors instead of embedding them; a claim older
//! than the claim timeout (its worker died or hung) is taken over, so nobody waits for ever.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::PgPool;

use crate::db::{decode_vector, encode_vector};
use crate::error::{IndexError, db};

/// Where vectors computed elsewhere can be found, and where new ones are put.
#[async_trait]
pub trait VectorCache: Send + Sync {
    /// The vectors of `model` the cache holds among `hashes`.
    async fn get(
        &self,
        model: &str,
        hashes: &[String],
    ) -> Result<HashMap<String, Vec<f32>>, IndexError>;

    /// Adds vectors; one already present is kept (all vectors of a model and hash are equal).
    /// Claims on them end.
    async fn put(&self, model: &str, vectors: &[(String, Vec<f32>)]) -> Result<(), IndexError>;

    /// Claims `hashes` for `owner` (an index's lasting id: a worker restarted on the same
    /// index is the same owner) to embed: returns those it now holds — unclaimed, claimed by
    /// the same owner, or claimed longer ago than the cache's claim timeout. Default: all of
    /// them (a cache that cannot coordinate).
    async fn claim(
        &self,
        model: &str,
        owner: &str,
        hashes: &[String],
    ) -> Result<Vec<String>, IndexError> {
        let _ = (model, owner);
        Ok(hashes.to_vec())
    }

    /// Gives claims up without vectors (the embedding failed), so others need not wait for
    /// them to go stale.
    async fn release(&self, model: &str, hashes: &[String]) -> Result<(), IndexError> {
        let _ = (model, hashes);
        Ok(())
    }
}

/// How long a claim holds by default: far longer than embedding one batch of chunks takes
/// (MiniLM on two cores: ~5 chunks a second, a claim covers at most 64).
pub const DEFAULT_CLAIM_TIMEOUT: Duration = Duration::from_secs(300);

/// The cache's tables (created when missing) and what creating each is called in errors.
const TABLES: [(&str, &str); 3] = [
    (
        "CREATE TABLE IF NOT EXISTS baton_embedding_cache (
            model TEXT NOT NULL,
            hash TEXT NOT NULL,
            vec BYTEA NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (model, hash)
        )",
        "creating the shared embedding cache",
    ),
    (
        "CREATE TABLE IF NOT EXISTS baton_embedding_claims (
            model TEXT NOT NULL,
            hash TEXT NOT NULL,
            claimed_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (model, hash)
        )",
        "creating the shared embedding cache's claims",
    ),
    (
        "ALTER TABLE baton_embedding_claims ADD COLUMN IF NOT EXISTS owner TEXT NOT NULL DEFAULT ''",
        "adding owners to the shared embedding cache's claims",
    ),
];

/// The cache as a PostgreSQL table, `baton_embedding_cache`, in the store's database.
#[derive(Clone, Debug)]
pub struct PostgresVectorCache {
    pool: PgPool,
    claim_timeout: Duration,
}

impl PostgresVectorCache {
    /// Uses `pool`, creating the table if it is missing.
    pub async fn new(pool: PgPool) -> Result<Self, IndexError> {
        for (table, what) in TABLES {
            sqlx::query(table).execute(&pool).await.map_err(db(what))?;
        }
        Ok(PostgresVectorCache {
            pool,
            claim_timeout: DEFAULT_CLAIM_TIMEOUT,
        })
    }

    /// How old a claim must be before another worker takes it over.
    pub fn with_claim_timeout(mut self, timeout: Duration) -> Self {
        self.claim_timeout = timeout;
        self
    }

    /// Connects to `url` (a `postgres://` URL) with a small pool of its own.
    pub async fn connect(url: &str) -> Result<Self, IndexError> {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect(url)
            .await
            .map_err(db("connecting to the shared embedding cache"))?;
        Self::new(pool).await
    }
}

#[async_trait]
impl VectorCache for PostgresVectorCache {
    async fn get(
        &self,
        model: &str,
        hashes: &[String],
    ) -> Result<HashMap<String, Vec<f32>>, IndexError> {
        let rows: Vec<(String, Vec<u8>)> = sqlx::query_as(
            "SELECT hash, vec FROM baton_embedding_cache WHERE model = $1 AND hash = ANY($2)",
        )
        .bind(model)
        .bind(hashes)
        .fetch_all(&self.pool)
        .await
        .map_err(db("reading the shared embedding cache"))?;
        Ok(rows
            .into_iter()
            .map(|(hash, bytes)| (hash, decode_vector(&bytes)))
            .collect())
    }

    async fn put(&self, model: &str, vectors: &[(String, Vec<f32>)]) -> Result<(), IndexError> {
        if vectors.is_empty() {
            return Ok(());
        }
        let hashes: Vec<&str> = vectors.iter().map(|(h, _)| h.as_str()).collect();
        let blobs: Vec<Vec<u8>> = vectors.iter().map(|(_, v)| encode_vector(v)).collect();
        // One statement: the vectors land and their claims end together.
        sqlx::query(
            "WITH added AS (
                INSERT INTO baton_embedding_cache (model, hash, vec)
                SELECT $1, h, v FROM UNNEST($2::text[], $3::bytea[]) AS t(h, v)
                ON CONFLICT (model, hash) DO NOTHING
             )
             DELETE FROM baton_embedding_claims WHERE model = $1 AND hash = ANY($2)",
        )
        .bind(model)
        .bind(hashes)
        .bind(blobs)
        .execute(&self.pool)
        .await
        .map_err(db("writing the shared embedding cache"))?;
        Ok(())
    }

    async fn claim(
        &self,
        model: &str,
        owner: &str,
        hashes: &[String],
    ) -> Result<Vec<String>, IndexError> {
        if hashes.is_empty() {
            return Ok(Vec::new());
        }
        // A new row is a claim; an existing one is taken over when it is the owner's own (a
        // restarted worker) or has gone stale. RETURNING lists exactly the rows inserted or
        // taken over.
        sqlx::query_scalar(
            "INSERT INTO baton_embedding_claims (model, hash, owner)
             SELECT $1, h, $4 FROM UNNEST($2::text[]) AS t(h)
             ON CONFLICT (model, hash) DO UPDATE SET claimed_at = now(), owner = $4
             WHERE baton_embedding_claims.owner = $4
                OR baton_embedding_claims.claimed_at < now() - make_interval(secs => $3)
             RETURNING hash",
        )
        .bind(model)
        .bind(hashes)
        .bind(self.claim_timeout.as_secs_f64())
        .bind(owner)
        .fetch_all(&self.pool)
        .await
        .map_err(db("claiming chunks in the shared embedding cache"))
    }

    async fn release(&self, model: &str, hashes: &[String]) -> Result<(), IndexError> {
        sqlx::query("DELETE FROM baton_embedding_claims WHERE model = $1 AND hash = ANY($2)")
            .bind(model)
            .bind(hashes)
            .execute(&self.pool)
            .await
            .map_err(db("releasing claims in the shared embedding cache"))?;
        Ok(())
    }
}
