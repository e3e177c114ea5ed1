//! The shared PostgreSQL backend: the SQLite schema and semantics on a server that many
//! processes, on many machines, use at once.

mod append;
mod connect;
mod rows;

use std::time::Duration;

use baton_core::{RunId, RunStatus};
use jiff::Timestamp;
use sqlx::postgres::{PgPool, PgRow};
use sqlx::{Postgres, Transaction};

// The options are the connection's; they keep their path here.
pub use self::connect::PostgresOptions;
use self::connect::classify;
use self::rows::{RUN_COLUMNS, SERVER_NOW, SERVER_NOW_TEXT, ts_from_micros};
use crate::process::local_hostname;
use crate::rows::At;
use crate::shared::{check_lease_free, lease_expiry, new_token, redact_url, to_db_int, ts_to_text};
use crate::statements::{Shared, impl_store};
use crate::{Holder, Lease, NewRun, RunSummary, StoreError};

/// A [`Store`] on a PostgreSQL server (tested with 15), shared by any number of processes.
///
/// # Fencing and sequence numbers
///
/// An append is one statement (one round trip, one transaction): it moves the run's event count
/// only if the lease token is the current one and the batch starts at the stored count, and
/// inserts the events only if it did. Concurrent appenders to one run queue on the row's lock
/// and each sees the previous one's result: no gaps, no duplicates, and a holder whose lease was
/// taken over gets [`StoreError::LeaseLost`] without writing anything.
///
/// # Time
///
/// Lease expiry is judged by the database server's clock, not the callers', so machines with
/// skewed clocks agree on it. A holder process that died is detected at once only when it ran
/// on this host (same hostname; see `process.rs`); elsewhere its lease has to expire.
///
/// # Durability
///
/// Every connection runs with `synchronous_commit = on`: a commit returns once the server has
/// flushed its WAL, so an `Ok` append survives a crash of the server (given the server's own
/// `fsync` is on, which is the server's configuration, not ours).
#[derive(Clone, Debug)]
pub struct PostgresStore {
    pool: PgPool,
    /// The URL with any password redacted: what every message names.
    url: String,
    lease_ttl: Duration,
    local_host: String,
}

impl PostgresStore {
    /// Connects to `url` (`postgres://USER[:PASSWORD]@HOST[:PORT]/DB[?…]`) with default options,
    /// creating or migrating baton's tables.
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        Self::connect_with(url, PostgresOptions::default()).await
    }

    pub async fn connect_with(
        url: &str,
        options: PostgresOptions,
    ) -> Result<PostgresStore, StoreError> {
        let redacted = redact_url(url);
        let connect = connect::connect_options(url, &redacted, &options)?
            .options([("synchronous_commit", "on")]);
        let pool = connect::open(connect, &redacted, &options).await?;
        Ok(PostgresStore {
            pool,
            url: redacted,
            lease_ttl: options.lease_ttl,
            local_host: local_hostname(),
        })
    }

    /// The store's URL with any password redacted.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }

    fn db(&self, context: &str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
        let context = context.to_owned();
        move |e| classify(&self.url, &context, e)
    }

    /// The statements this store runs as the other backend does.
    fn shared(&self) -> Shared<'_, sqlx::Postgres, &str> {
        Shared {
            pool: &self.pool,
            origin: self.url.as_str(),
        }
    }

    /// The lease as handed to the caller: its expiry in the caller's clock (which its heartbeat
    /// uses to schedule renewals), while the row holds the server's.
    fn lease_for_caller(&self, run_id: &RunId, token: String) -> Lease {
        Lease {
            run_id: run_id.clone(),
            token,
            expires_at: lease_expiry(self.lease_ttl, Timestamp::now()),
        }
    }

    async fn begin(&self, context: &str) -> Result<Transaction<'static, Postgres>, StoreError> {
        self.pool.begin().await.map_err(self.db(context))
    }

    async fn server_now(&self) -> Result<Timestamp, StoreError> {
        let micros: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT {SERVER_NOW}")))
            .fetch_one(&self.pool)
            .await
            .map_err(self.db("reading the server's clock"))?;
        ts_from_micros(&self.url, micros)
    }

    fn summaries(&self, rows: &[PgRow]) -> Result<Vec<RunSummary>, StoreError> {
        let Some(first) = rows.first() else {
            return Ok(Vec::new());
        };
        let now = ts_from_micros(&self.url, At(first, self.url.as_str()).int("server_now")?)?;
        rows.iter()
            .map(|row| At(row, self.url.as_str()).summary(&self.local_host, now))
            .collect()
    }
}

// The methods both backends answer alike are written once, in `impl_store!`.
impl_store! {
    impl Store for PostgresStore {
        async fn create_run(&self, run: &NewRun, holder: &Holder) -> Result<Lease, StoreError> {
            let now = self.server_now().await?;
            let created = ts_to_text(now);
            let token = new_token();
            // One statement: the run and its lease appear together or not at all.
            let inserted = sqlx::query(
                "INSERT INTO runs (id, goal, workspace, status, created_at, updated_at, \
                 event_count, lease_token, lease_host, lease_pid, lease_pid_start, \
                 lease_expires_at, lease_worker, lease_renewed_at) \
                 VALUES ($1, $2, $3, $4, $5, $5, 0, $6, $7, $8, $9, $10, $11, $5)",
            )
            .bind(run.id.as_str())
            .bind(&run.goal)
            .bind(&run.workspace)
            .bind(RunStatus::Created.as_str())
            .bind(&created)
            .bind(&token)
            .bind(&holder.host)
            .bind(i64::from(holder.pid))
            .bind(holder.pid_start.map(to_db_int))
            .bind(ts_to_text(lease_expiry(self.lease_ttl, now)))
            .bind(holder.worker_id.as_deref())
            .execute(&self.pool)
            .await;
            match inserted {
                Ok(_) => Ok(self.lease_for_caller(&run.id, token)),
                Err(sqlx::Error::Database(db)) if db.is_unique_violation() => {
                    Err(StoreError::AlreadyExists {
                        run_id: run.id.clone(),
                    })
                }
                Err(e) => Err(self.db("creating a run")(e)),
            }
        }

        async fn acquire(&self, run_id: &RunId, holder: &Holder) -> Result<Lease, StoreError> {
            let mut tx = self.begin("taking a lease").await?;
            // The row lock makes check-then-take atomic: a second acquirer waits here, then sees
            // the lease the first one wrote.
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT lease_token, lease_host, lease_pid, lease_pid_start, lease_expires_at, \
                 lease_worker, {SERVER_NOW} AS server_now FROM runs WHERE id = $1 FOR UPDATE"
            )))
            .bind(run_id.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(self.db("reading a lease"))?;
            let Some(row) = row else {
                return Err(StoreError::NotFound {
                    run_id: run_id.clone(),
                });
            };
            let now = ts_from_micros(&self.url, At(&row, self.url.as_str()).int("server_now")?)?;
            let current = At(&row, self.url.as_str()).lease()?;
            check_lease_free(run_id, current, now, &self.local_host)?;
            let token = new_token();
            self.shared()
                .write_lease(
                    &mut *tx,
                    run_id,
                    holder,
                    &token,
                    lease_expiry(self.lease_ttl, now),
                    now,
                    "recording the lease",
                )
                .await?;
            tx.commit().await.map_err(self.db("committing a lease"))?;
            Ok(self.lease_for_caller(run_id, token))
        }

        async fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
            let now = self.server_now().await?;
            let expires_at = lease_expiry(self.lease_ttl, now);
            let done = self.shared().renew_lease(lease, expires_at, now).await?;
            if done.rows_affected() == 0 {
                return Err(self.shared().lease_failure(&lease.run_id).await);
            }
            Ok(self.lease_for_caller(&lease.run_id, lease.token.clone()))
        }

        async fn get_run(&self, run_id: &RunId) -> Result<Option<RunSummary>, StoreError> {
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {RUN_COLUMNS}, {SERVER_NOW} AS server_now FROM runs WHERE id = $1"
            )))
            .bind(run_id.as_str())
            .fetch_all(&self.pool)
            .await
            .map_err(self.db("reading a run"))?;
            Ok(self.summaries(&rows)?.into_iter().next())
        }

        async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {RUN_COLUMNS}, {SERVER_NOW} AS server_now FROM runs \
                 ORDER BY created_at DESC, id DESC"
            )))
            .fetch_all(&self.pool)
            .await
            .map_err(self.db("listing runs"))?;
            self.summaries(&rows)
        }

        async fn set_queued(&self, run_id: &RunId, queued: bool) -> Result<(), StoreError> {
            let done = sqlx::query("UPDATE runs SET queued = $1 WHERE id = $2")
                .bind(queued)
                .bind(run_id.as_str())
                .execute(&self.pool)
                .await
                .map_err(self.db("queueing a run"))?;
            if done.rows_affected() == 0 {
                return Err(StoreError::NotFound {
                    run_id: run_id.clone(),
                });
            }
            Ok(())
        }

        async fn claim(&self, holder: &Holder) -> Result<Option<Lease>, StoreError> {
            let mut tx = self.begin("claiming a run").await?;
            // SKIP LOCKED: a row another claimer (or an appender) has locked is passed over instead
            // of waited for, so claimers spread over the queue and never take the same run; the
            // lease is written before the row lock is released at commit.
            let row: Option<(String, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
                "SELECT id, {SERVER_NOW} AS server_now FROM runs \
                 WHERE queued AND status NOT IN ('finished', 'failed') \
                 AND (lease_token IS NULL OR lease_expires_at <= {SERVER_NOW_TEXT}) \
                 ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED"
            )))
            .fetch_optional(&mut *tx)
            .await
            .map_err(self.db("looking for a queued run"))?;
            let Some((id, now)) = row else {
                // End the transaction now: a dropped one is only rolled back when its connection is
                // next used, and an idle transaction holds its table lock until then.
                tx.rollback()
                    .await
                    .map_err(self.db("ending an empty claim"))?;
                return Ok(None);
            };
            let run_id = RunId::from_string(id);
            let now = ts_from_micros(&self.url, now)?;
            let token = new_token();
            self.shared()
                .write_lease(
                    &mut *tx,
                    &run_id,
                    holder,
                    &token,
                    lease_expiry(self.lease_ttl, now),
                    now,
                    "recording the claimed lease",
                )
                .await?;
            tx.commit().await.map_err(self.db("committing a claim"))?;
            Ok(Some(self.lease_for_caller(&run_id, token)))
        }

        fn needs_postgres(&self, what: &str) -> StoreError {
            StoreError::NeedsPostgres {
                what: what.to_owned(),
                store: self.url.clone(),
            }
        }
    }
}
