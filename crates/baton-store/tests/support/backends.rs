//! The two backends behind one face, so that one test body runs against both: a SQLite file in a
//! temporary directory, or a Postgres schema of its own (see `baton_store::testing`). Either is
//! removed when the `Place` is dropped.

#![allow(dead_code)] // Each test target uses a different part.

use std::sync::Arc;
use std::time::Duration;

use baton_store::testing::PgTestSchema;
use baton_store::{SqliteOptions, SqliteStore, Store};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
}

/// Where one test's stores live. Several stores (own pools, as separate processes would have)
/// can be opened on the same place.
pub enum Place {
    Sqlite(tempfile::TempDir),
    Postgres(PgTestSchema),
}

/// The default lease TTL of both backends.
pub const DEFAULT_TTL: Duration = Duration::from_secs(60);

impl Place {
    pub async fn new(kind: Kind) -> Place {
        match kind {
            Kind::Sqlite => Place::Sqlite(tempfile::tempdir().unwrap()),
            Kind::Postgres => Place::Postgres(PgTestSchema::create().await),
        }
    }

    pub fn kind(&self) -> Kind {
        match self {
            Place::Sqlite(_) => Kind::Sqlite,
            Place::Postgres(_) => Kind::Postgres,
        }
    }

    /// The SQLite database's file (`None` on PostgreSQL).
    pub fn sqlite_path(&self) -> Option<std::path::PathBuf> {
        match self {
            Place::Sqlite(dir) => Some(dir.path().join("baton.db")),
            Place::Postgres(_) => None,
        }
    }

    pub async fn store(&self) -> Arc<dyn Store> {
        self.store_with_ttl(DEFAULT_TTL).await
    }

    pub async fn store_with_ttl(&self, lease_ttl: Duration) -> Arc<dyn Store> {
        match self {
            Place::Sqlite(_) => {
                let options = SqliteOptions {
                    lease_ttl,
                    ..SqliteOptions::default()
                };
                Arc::new(
                    SqliteStore::open_with(&self.sqlite_path().unwrap(), options)
                        .await
                        .unwrap(),
                )
            }
            Place::Postgres(schema) => Arc::new(schema.store_with(schema.options(lease_ttl)).await),
        }
    }
}

/// Instantiates each listed `async fn NAME(place: Place)` twice, as `sqlite::NAME` and
/// `postgres::NAME`, each on a fresh place of its own.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let place = super::backends::Place::new(super::backends::Kind::Sqlite).await;
                    super::$name(place).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let place = super::backends::Place::new(super::backends::Kind::Postgres).await;
                    super::$name(place).await;
                }
            )*
        }
    };
}
