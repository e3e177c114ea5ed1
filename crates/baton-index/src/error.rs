//! Why an index operation failed.

use std::path::PathBuf;

use baton_embed::EmbedError;

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("code index database: {context}: {source}")]
    Db {
        context: &'static str,
        #[source]
        source: sqlx::Error,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Embed(#[from] EmbedError),
    #[error("the query has no words to search for")]
    EmptyQuery,
    #[error(
        "vector search needs an embedder, and none is configured (set [embeddings] in \
         .baton/config.toml or BATON_EMBED_MODEL_DIR)"
    )]
    NoEmbedder,
    #[error("a background task failed: {0}")]
    Task(String),
}

impl IndexError {
    /// Whether trying again later may work (a locked database, a rate-limited embedder).
    pub fn is_retryable(&self) -> bool {
        match self {
            IndexError::Db { source, .. } => matches!(
                source,
                sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::Database(_)
            ),
            IndexError::Embed(e) => e.is_retryable(),
            IndexError::Io { .. }
            | IndexError::EmptyQuery
            | IndexError::NoEmbedder
            | IndexError::Task(_) => false,
        }
    }
}

pub(crate) fn db(context: &'static str) -> impl FnOnce(sqlx::Error) -> IndexError {
    move |source| IndexError::Db { context, source }
}
