//! A vector cache shared between workspaces: a team's workers on clones of one repository
//! embed each chunk once.
//!
//! Vectors are keyed by (embedder model id, chunk hash), so a cache never needs to know which
//! repository or file a chunk came from. Search stays in each workspace's own index; the cache
//! only saves embedding calls, which is why it needs no vector extension on the server.

use std::collections::HashMap;

use async_trait::async_trait;
use sqlx::PgPool;

use crate::IndexError;
use crate::db::{decode_vector, encode_vector};
use crate::error::db;

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
    async fn put(&self, model: &str, vectors: &[(String, Vec<f32>)]) -> Result<(), IndexError>;
}

/// The cache as a PostgreSQL table, `baton_embedding_cache`, in the store's database.
#[derive(Clone, Debug)]
pub struct PostgresVectorCache {
    pool: PgPool,
}

impl PostgresVectorCache {
    /// Uses `pool`, creating the table if it is missing.
    pub async fn new(pool: PgPool) -> Result<Self, IndexError> {
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS baton_embedding_cache (
                model TEXT NOT NULL,
                hash TEXT NOT NULL,
                vec BYTEA NOT NULL,
                created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
                PRIMARY KEY (model, hash)
            )",
        )
        .execute(&pool)
        .await
        .map_err(db("creating the shared embedding cache"))?;
        Ok(PostgresVectorCache { pool })
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
        sqlx::query(
            "INSERT INTO baton_embedding_cache (model, hash, vec) \
             SELECT $1, h, v FROM UNNEST($2::text[], $3::bytea[]) AS t(h, v) \
             ON CONFLICT (model, hash) DO NOTHING",
        )
        .bind(model)
        .bind(hashes)
        .bind(blobs)
        .execute(&self.pool)
        .await
        .map_err(db("writing the shared embedding cache"))?;
        Ok(())
    }
}
