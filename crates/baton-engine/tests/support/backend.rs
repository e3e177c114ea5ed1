//! The store kinds the engine tests run against: every test runs twice, as `sqlite::NAME` (the
//! workspace's SQLite file) and `postgres::NAME` (a schema of its own on the PostgreSQL test
//! server, `BATON_TEST_POSTGRES`).

use std::sync::Arc;

use baton_store::testing::PgTestSchema;
use baton_store::{SqliteStore, Store};

#[derive(Clone, Copy)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// A fresh store, and the Postgres schema that must outlive it (dropped with the test).
    pub async fn store(
        self,
        workspace: &std::path::Path,
    ) -> (Arc<dyn Store>, Option<PgTestSchema>) {
        match self {
            Backend::Sqlite => (
                Arc::new(SqliteStore::for_workspace(workspace).await.unwrap()),
                None,
            ),
            Backend::Postgres => {
                let schema = PgTestSchema::create().await;
                (Arc::new(schema.store().await), Some(schema))
            }
        }
    }
}

/// Instantiates each `async fn NAME(backend: Backend)` as a test per backend.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[tokio::test] async fn $name() { super::$name(super::Backend::Sqlite).await; })*
        }
        mod postgres {
            $(#[tokio::test] async fn $name() { super::$name(super::Backend::Postgres).await; })*
        }
    };
}
pub(crate) use on_both_backends;
