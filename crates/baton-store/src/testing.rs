//! Test support (cargo feature `test-support`, for this workspace's tests only): a Postgres
//! store in a schema of its own, so that tests run in parallel on one database without seeing
//! each other's runs, and the schema is dropped when the test ends (even by a panic).
//!
//! The server is found through `BATON_TEST_POSTGRES` (default
//! `postgres://postgres@127.0.0.1:5432/test`). An unreachable server fails the test with a
//! message saying so: CI guarantees the server, so a silent skip would only hide a broken setup.

use std::time::Duration;

use sqlx::Connection;

use crate::{PostgresOptions, PostgresStore};

pub const TEST_POSTGRES_ENV: &str = "BATON_TEST_POSTGRES";
pub const DEFAULT_TEST_POSTGRES: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The test server's URL.
pub fn test_postgres_url() -> String {
    std::env::var(TEST_POSTGRES_ENV)
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_TEST_POSTGRES.to_owned())
}

/// A fresh, migrated schema on the test server; dropped (with everything in it) on drop.
pub struct PgTestSchema {
    base_url: String,
    schema: String,
}

impl PgTestSchema {
    /// Creates and migrates a uniquely named schema. Panics, naming the server, if it cannot.
    pub async fn create() -> PgTestSchema {
        let base_url = test_postgres_url();
        let schema = format!("baton_test_{}", uuid::Uuid::now_v7().simple());
        let this = PgTestSchema { base_url, schema };
        // Connecting with the schema option creates and migrates it.
        this.store().await.close().await;
        this
    }

    /// A uniquely named schema with nothing in it (not migrated), dropped on drop: for tests
    /// that build an older schema themselves.
    pub async fn create_empty() -> PgTestSchema {
        let base_url = test_postgres_url();
        let schema = format!("baton_test_{}", uuid::Uuid::now_v7().simple());
        let mut conn = sqlx::PgConnection::connect(&base_url)
            .await
            .unwrap_or_else(|e| panic!("the PostgreSQL test server is not usable: {e}"));
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("could not create schema {schema}: {e}"));
        let _ = conn.close().await;
        PgTestSchema { base_url, schema }
    }

    /// The server's URL, without this schema.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Options that keep a store in this schema, with the given lease TTL.
    pub fn options(&self, lease_ttl: Duration) -> PostgresOptions {
        PostgresOptions {
            lease_ttl,
            schema: Some(self.schema.clone()),
            ..PostgresOptions::default()
        }
    }

    /// A new store (its own pool) on this schema, with the default lease TTL.
    pub async fn store(&self) -> PostgresStore {
        self.store_with(self.options(PostgresOptions::default().lease_ttl))
            .await
    }

    pub async fn store_with(&self, options: PostgresOptions) -> PostgresStore {
        match PostgresStore::connect_with(&self.base_url, options).await {
            Ok(store) => store,
            Err(e) => panic!(
                "the PostgreSQL test server is not usable ({e}). Tests need a server at \
                 {TEST_POSTGRES_ENV} (default {DEFAULT_TEST_POSTGRES}); start it (for example \
                 `service postgresql start`) or point {TEST_POSTGRES_ENV} at one"
            ),
        }
    }

    /// What the schema's tables take on the server, with their indexes and TOAST
    /// (`pg_total_relation_size`): what a store's rows cost, page overhead and dead rows included.
    pub async fn stored_bytes(&self) -> u64 {
        let mut conn = sqlx::PgConnection::connect(&self.base_url)
            .await
            .unwrap_or_else(|e| panic!("the PostgreSQL test server is not usable: {e}"));
        let bytes: i64 = sqlx::query_scalar(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'",
        )
        .bind(&self.schema)
        .fetch_one(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("could not measure schema {}: {e}", self.schema));
        let _ = conn.close().await;
        u64::try_from(bytes).unwrap_or(0)
    }

    /// A URL that selects this schema by itself (through the connection's `search_path`), for
    /// a `baton --store URL` process.
    pub fn url(&self) -> String {
        let separator = if self.base_url.contains('?') {
            '&'
        } else {
            '?'
        };
        format!(
            "{}{separator}options[search_path]={}",
            self.base_url, self.schema
        )
    }
}

impl Drop for PgTestSchema {
    fn drop(&mut self) {
        let (url, schema) = (self.base_url.clone(), self.schema.clone());
        // Drop cannot await, and may run inside a runtime: use a thread with its own runtime.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async {
                let mut conn = sqlx::PgConnection::connect(&url)
                    .await
                    .map_err(|e| e.to_string())?;
                let drop = format!("DROP SCHEMA IF EXISTS {schema} CASCADE");
                sqlx::raw_sql(sqlx::AssertSqlSafe(drop))
                    .execute(&mut conn)
                    .await
                    .map_err(|e| e.to_string())?;
                let _ = conn.close().await;
                Ok::<(), String>(())
            })
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!("could not drop test schema {}: {e}", self.schema);
        }
    }
}
