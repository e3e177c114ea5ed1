//! The in-memory matrix of one model's vectors that exact vector search scans.
//!
//! A type of its own, apart from the embedding pass in `vectors.rs`, because the
//! [`CodeIndex`](crate::CodeIndex) holds one (reloaded when the index's generation changes)
//! while `vectors.rs` adds its search methods to that same index: with the matrix here, neither
//! module needs the other's insides.

use std::sync::Arc;

use baton_embed::dot;
use sqlx::SqlitePool;

use crate::db::decode_vector;
use crate::error::{IndexError, db};

/// The vectors of one model (stored key, see `input_layout.rs`), valid for one index
/// generation: row `i` is chunk `ids[i]` at `paths[i]`, its `dims` values at `i * dims`.
pub(crate) struct Matrix {
    generation: i64,
    model: String,
    ids: Vec<i64>,
    paths: Vec<Arc<str>>,
    dims: usize,
    values: Vec<f32>,
}

impl Matrix {
    /// Every chunk's vector of `model` (a stored key), in chunk id order, as of `generation`.
    pub(crate) async fn load(
        pool: &SqlitePool,
        model: &str,
        generation: i64,
    ) -> Result<Matrix, IndexError> {
        let rows: Vec<(i64, String, Vec<u8>)> = sqlx::query_as(
            "SELECT c.id, c.path, v.vec FROM chunks c \
             JOIN vectors v ON v.model = ? AND v.hash = c.hash ORDER BY c.id",
        )
        .bind(model)
        .fetch_all(pool)
        .await
        .map_err(db("loading vectors"))?;
        let dims = rows.first().map_or(0, |r| r.2.len() / 4);
        let mut matrix = Matrix {
            generation,
            model: model.to_owned(),
            ids: Vec::with_capacity(rows.len()),
            paths: Vec::with_capacity(rows.len()),
            dims,
            values: Vec::with_capacity(rows.len() * dims),
        };
        let mut last_path: Option<Arc<str>> = None;
        for (id, path, bytes) in rows {
            // A vector of another length (a model that changed its output) is not comparable.
            if bytes.len() != dims * 4 {
                continue;
            }
            let path: Arc<str> = match &last_path {
                Some(p) if **p == *path => p.clone(),
                _ => Arc::from(path.as_str()),
            };
            last_path = Some(path.clone());
            matrix.ids.push(id);
            matrix.paths.push(path);
            matrix.values.extend(decode_vector(&bytes));
        }
        Ok(matrix)
    }

    /// Whether this matrix still holds `model`'s vectors as of `generation`.
    pub(crate) fn is_current(&self, generation: i64, model: &str) -> bool {
        self.generation == generation && self.model == model
    }

    /// The `limit` chunks nearest to `query` (a unit vector), among those under `path_prefix`,
    /// as (chunk id, cosine), best first; ties by chunk id. None for a query of another length.
    pub(crate) fn nearest(
        &self,
        query: &[f32],
        path_prefix: Option<&str>,
        limit: usize,
    ) -> Vec<(i64, f32)> {
        if self.dims != query.len() {
            return Vec::new();
        }
        let mut scored: Vec<(i64, f32)> = Vec::new();
        for (row, id) in self.ids.iter().enumerate() {
            if path_prefix.is_some_and(|p| !self.paths[row].starts_with(p)) {
                continue;
            }
            let v = &self.values[row * self.dims..(row + 1) * self.dims];
            scored.push((*id, dot(v, query)));
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(limit);
        scored
    }
}
