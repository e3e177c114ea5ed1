use std::path::PathBuf;

/// Why a [`MemoryIndex`](crate::MemoryIndex) operation failed.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The query has no word to search for (empty, whitespace or punctuation only). A caller
    /// should tell the model to send some words; it is not an index failure.
    #[error("the search query has no words to search for")]
    EmptyQuery,
    #[error("memory index database error while {context}: {source}")]
    Database {
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
    /// Searching the workspace's files (the code index) failed.
    #[error("searching the workspace's files: {0}")]
    Workspace(#[source] baton_index::IndexError),
}

pub(crate) fn db(context: &'static str) -> impl FnOnce(sqlx::Error) -> MemoryError {
    move |source| MemoryError::Database { context, source }
}
