//! Where SQLite rows come from, for errors: the database file. The decoding itself is shared
//! with PostgreSQL (`crate::rows`).

use std::path::Path;

use super::open::classify;
use crate::StoreError;
use crate::rows::Origin;

pub(crate) use crate::rows::RUN_COLUMNS;

/// Errors about a row name the database file.
impl Origin for &Path {
    fn corrupt(&self, detail: String) -> StoreError {
        corrupt(self, detail)
    }

    fn failed(&self, context: &str, error: sqlx::Error) -> StoreError {
        classify(self, context, error)
    }
}

pub(crate) fn corrupt(path: &Path, detail: String) -> StoreError {
    StoreError::Corrupt {
        path: path.to_owned(),
        detail,
    }
}
