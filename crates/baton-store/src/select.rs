//! Choosing a backend from what the user gave (`--store` / `BATON_STORE`, or nothing).

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::shared::redact_url;
use crate::{PostgresStore, SqliteStore, Store, StoreError};

/// Where a store lives.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// A PostgreSQL server; the URL may carry a password, so `Debug` redacts it.
    Postgres(String),
    /// A SQLite file.
    Sqlite(PathBuf),
}

impl std::fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreLocation::Postgres(url) => {
                f.debug_tuple("Postgres").field(&redact_url(url)).finish()
            }
            StoreLocation::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
        }
    }
}

impl StoreLocation {
    /// `postgres://…` and `postgresql://…` are Postgres; `sqlite://PATH` and a plain path are
    /// a SQLite file; no store at all means the journal in the workspace's state directory. Any other
    /// `scheme://` is refused rather than taken for a file name.
    pub fn choose(store: Option<&str>, workspace: &Path) -> Result<StoreLocation, StoreError> {
        let Some(store) = store.map(str::trim).filter(|s| !s.is_empty()) else {
            return Ok(StoreLocation::Sqlite(SqliteStore::workspace_db_path(
                workspace,
            )));
        };
        let lower = store.to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            return Ok(StoreLocation::Postgres(store.to_owned()));
        }
        if let Some(path) = store.strip_prefix("sqlite://") {
            return Ok(StoreLocation::Sqlite(PathBuf::from(path)));
        }
        if store.contains("://") {
            return Err(StoreError::UnsupportedUrl {
                url: redact_url(store),
            });
        }
        Ok(StoreLocation::Sqlite(PathBuf::from(store)))
    }

    /// Whether several workspaces (or machines) may keep their runs here.
    pub fn is_shared(&self) -> bool {
        matches!(self, StoreLocation::Postgres(_))
    }

    /// For messages: the path, or the URL with any password redacted.
    pub fn describe(&self) -> String {
        match self {
            StoreLocation::Postgres(url) => redact_url(url),
            StoreLocation::Sqlite(path) => path.display().to_string(),
        }
    }
}

/// Opens the store at `location`: connects to Postgres (migrating its schema), or opens the
/// SQLite file, creating it and its directory if needed.
pub async fn open_store(location: &StoreLocation) -> Result<Arc<dyn Store>, StoreError> {
    Ok(match location {
        StoreLocation::Postgres(url) => Arc::new(PostgresStore::connect(url).await?),
        StoreLocation::Sqlite(path) => {
            if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                // Directories it creates are private (0700); an existing one is left as it is.
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(|source| StoreError::Io {
                        path: dir.to_owned(),
                        source,
                    })?;
            }
            Arc::new(SqliteStore::open(path).await?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_choose_the_backend() {
        let ws = Path::new("/w");
        let choose = |s: Option<&str>| StoreLocation::choose(s, ws);
        let own = StoreLocation::Sqlite(baton_state::StateDir::for_workspace(ws).journal());
        assert_eq!(choose(None).unwrap(), own);
        assert_eq!(choose(Some("  ")).unwrap(), own);
        for url in [
            "postgres://u@h/db",
            "postgresql://u:p@h:5433/db?sslmode=disable",
        ] {
            let location = choose(Some(url)).unwrap();
            assert_eq!(location, StoreLocation::Postgres(url.into()));
            assert!(location.is_shared());
        }
        assert_eq!(
            choose(Some("sqlite:///tmp/x.db")).unwrap(),
            StoreLocation::Sqlite("/tmp/x.db".into())
        );
        assert_eq!(
            choose(Some("runs.db")).unwrap(),
            StoreLocation::Sqlite("runs.db".into())
        );
        let err = choose(Some("mysql://root:pw@h/db")).unwrap_err();
        assert!(matches!(err, StoreError::UnsupportedUrl { .. }), "{err:?}");
        assert!(!err.to_string().contains("pw"), "{err}");
        let secret = StoreLocation::Postgres("postgres://u:hunter2@h/db".into());
        assert!(!format!("{secret:?}").contains("hunter2"));
        assert_eq!(secret.describe(), "postgres://u:***@h/db");
    }
}
