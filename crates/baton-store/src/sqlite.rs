//! The embedded SQLite backend.

mod append;
mod appender;
mod open;
mod rows;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use baton_core::{RunId, RunStatus};
use jiff::Timestamp;
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{Sqlite, Transaction};

use self::appender::Appender;
use self::open::classify;
use self::rows::RUN_COLUMNS;
use crate::process::local_hostname;
use crate::rows::At;
use crate::shared::{check_lease_free, lease_expiry, new_token, ts_to_text};
use crate::statements::{Shared, impl_store};
use crate::{Holder, Lease, NewRun, RunSummary, StoreError};

/// Settings of a [`SqliteStore`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqliteOptions {
    /// How long a lease lasts without renewal. A holder renews well before this; a holder that
    /// stops renewing (hung, or on a machine that went away) loses the run after this long.
    pub lease_ttl: Duration,
    /// How long a statement waits for another connection's write lock before failing with a
    /// retryable error. Two processes (say `baton run` and `baton status`) share the file.
    pub busy_timeout: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            lease_ttl: Duration::from_secs(60),
            busy_timeout: Duration::from_secs(5),
        }
    }
}

/// A [`Store`] in one SQLite file, shared safely by several processes on one machine.
///
/// # Durability
///
/// The database runs in WAL mode with `synchronous = FULL`: a transaction commits only after
/// its WAL frames are fsynced, so when [`Store::append`] returns `Ok` the events survive a
/// process crash *and* a power loss. The cost is one fsync of the WAL per append (typically
/// 0.1–10 ms depending on the disk; see `benches/journal.rs`) — the price of "journal before
/// effect". Batching several events into one append pays it once.
///
/// Appends run on connections of their own (`sqlite/appender.rs`): on the caller's thread when
/// the database is free — the call blocks that thread for the transaction and its fsync, never
/// for a lock — and on a thread of their own, which waits for the lock up to the busy timeout,
/// when it is not. Everything else runs on sqlx's pool.
///
/// # Opening
///
/// An existing file is first checked on a read-only connection (SQLite header, `PRAGMA
/// quick_check`, schema version). A damaged file, another program's database or one migrated
/// by a newer baton is refused with [`StoreError::Corrupt`] / [`StoreError::NewerSchema`] and
/// left byte-for-byte unchanged. The quick check reads the whole file, so opening a very large
/// store takes time proportional to its size.
#[derive(Clone, Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// The journal's appends, on a connection of their own.
    appender: Arc<Appender>,
    path: PathBuf,
    lease_ttl: Duration,
    /// Leases held by processes on this host can be checked for a dead holder.
    local_host: String,
}

impl SqliteStore {
    /// Opens (or creates) the store at `path` with default options.
    pub async fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        Self::open_with(path, SqliteOptions::default()).await
    }

    pub async fn open_with(path: &Path, options: SqliteOptions) -> Result<SqliteStore, StoreError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
            && !parent.is_dir()
        {
            let source = std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the directory for the store does not exist",
            );
            return Err(StoreError::Io {
                path: path.to_owned(),
                source,
            });
        }
        // The journal holds what the agent read and wrote: 0600 from the start (SQLite gives its
        // -wal and -shm files the database's mode), and an older readable one made so.
        let io = |file: &Path| {
            let path = file.to_owned();
            move |source| StoreError::Io { path, source }
        };
        baton_state::make_private_file(path).map_err(io(path))?;
        for suffix in ["-wal", "-shm"] {
            let mut side = path.as_os_str().to_owned();
            side.push(suffix);
            let side = PathBuf::from(side);
            baton_state::make_private_if_there(&side).map_err(io(&side))?;
        }
        open::check_existing(path).await?;
        let pool = open::connect(path, options.busy_timeout).await?;
        if let Err(e) = open::migrate(&pool, path).await {
            pool.close().await;
            return Err(e);
        }
        let appender = match Appender::start(path, options.busy_timeout).await {
            Ok(appender) => Arc::new(appender),
            Err(e) => {
                pool.close().await;
                return Err(open::classify_sqlite(
                    path,
                    "opening the store for appends",
                    e,
                ));
            }
        };
        Ok(SqliteStore {
            pool,
            appender,
            path: path.to_owned(),
            lease_ttl: options.lease_ttl,
            local_host: local_hostname(),
        })
    }

    /// The store of a workspace: the journal in its state directory (see `baton_state`), made
    /// ready first (and a store of the old in-workspace layout moved there).
    pub async fn for_workspace(workspace: &Path) -> Result<SqliteStore, StoreError> {
        Self::for_workspace_with(workspace, SqliteOptions::default()).await
    }

    pub async fn for_workspace_with(
        workspace: &Path,
        options: SqliteOptions,
    ) -> Result<SqliteStore, StoreError> {
        let state = baton_state::StateDir::for_workspace(workspace);
        state.prepare()?;
        Self::open_with(&state.journal(), options).await
    }

    /// Where [`SqliteStore::for_workspace`] keeps the database of `workspace`.
    pub fn workspace_db_path(workspace: &Path) -> PathBuf {
        baton_state::StateDir::for_workspace(workspace).journal()
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }

    /// Closes all connections, letting SQLite checkpoint the WAL into the main file. Dropping the
    /// store without closing is safe too: committed data is already durable in the WAL.
    pub async fn close(&self) {
        self.appender.close().await;
        self.pool.close().await;
    }

    fn db(&self, context: &str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
        let context = context.to_owned();
        move |e| classify(&self.path, &context, e)
    }

    /// [`SqliteStore::db`] for the append connection's errors.
    fn sqlite_error(&self, context: &str, error: rusqlite::Error) -> StoreError {
        open::classify_sqlite(&self.path, context, error)
    }

    /// The statements this store runs as the other backend does.
    fn shared(&self) -> Shared<'_, sqlx::Sqlite, &Path> {
        Shared {
            pool: &self.pool,
            origin: self.path.as_path(),
        }
    }

    /// A write transaction that takes SQLite's write lock at BEGIN, so that what it reads
    /// cannot be changed by another writer before it writes (check-then-act is safe).
    async fn begin_write(&self, context: &str) -> Result<Transaction<'static, Sqlite>, StoreError> {
        self.pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(self.db(context))
    }

    /// Sets a fresh lease for `holder` on `run_id` within `tx`.
    async fn write_lease(
        &self,
        tx: &mut Transaction<'static, Sqlite>,
        run_id: &RunId,
        holder: &Holder,
        now: Timestamp,
    ) -> Result<Lease, StoreError> {
        let lease = Lease {
            run_id: run_id.clone(),
            token: new_token(),
            expires_at: lease_expiry(self.lease_ttl, now),
        };
        self.shared()
            .write_lease(
                &mut **tx,
                run_id,
                holder,
                &lease.token,
                lease.expires_at,
                now,
                "recording the lease",
            )
            .await?;
        Ok(lease)
    }

    fn summary(&self, row: &SqliteRow, now: Timestamp) -> Result<RunSummary, StoreError> {
        At(row, self.path.as_path()).summary(&self.local_host, now)
    }
}

// The methods both backends answer alike are written once, in `impl_store!`.
impl_store! {
    impl Store for SqliteStore {
        fn needs_postgres(&self, what: &str) -> StoreError {
            StoreError::NeedsPostgres {
                what: what.to_owned(),
                store: self.path.display().to_string(),
            }
        }

        async fn create_run(&self, run: &NewRun, holder: &Holder) -> Result<Lease, StoreError> {
            let now = Timestamp::now();
            let mut tx = self.begin_write("creating a run").await?;
            let created = ts_to_text(now);
            let inserted = sqlx::query(
                "INSERT INTO runs (id, goal, workspace, status, created_at, updated_at, \
                 event_count) \
                 VALUES (?, ?, ?, ?, ?, ?, 0)",
            )
            .bind(run.id.as_str())
            .bind(&run.goal)
            .bind(&run.workspace)
            .bind(RunStatus::Created.as_str())
            .bind(&created)
            .bind(&created)
            .execute(&mut *tx)
            .await;
            match inserted {
                Ok(_) => {}
                Err(sqlx::Error::Database(db)) if db.is_unique_violation() => {
                    return Err(StoreError::AlreadyExists {
                        run_id: run.id.clone(),
                    });
                }
                Err(e) => return Err(self.db("creating a run")(e)),
            }
            let lease = self.write_lease(&mut tx, &run.id, holder, now).await?;
            tx.commit().await.map_err(self.db("committing a new run"))?;
            Ok(lease)
        }

        async fn acquire(&self, run_id: &RunId, holder: &Holder) -> Result<Lease, StoreError> {
            let mut tx = self.begin_write("taking a lease").await?;
            let row = sqlx::query(
                "SELECT lease_token, lease_host, lease_pid, lease_pid_start, lease_expires_at, \
                 lease_worker FROM runs WHERE id = ?",
            )
            .bind(run_id.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(self.db("reading a lease"))?;
            let Some(row) = row else {
                return Err(StoreError::NotFound {
                    run_id: run_id.clone(),
                });
            };
            let now = Timestamp::now();
            let current = At(&row, self.path.as_path()).lease()?;
            check_lease_free(run_id, current, now, &self.local_host)?;
            let lease = self.write_lease(&mut tx, run_id, holder, now).await?;
            tx.commit().await.map_err(self.db("committing a lease"))?;
            Ok(lease)
        }

        async fn renew(&self, lease: &Lease) -> Result<Lease, StoreError> {
            let now = Timestamp::now();
            let expires_at = lease_expiry(self.lease_ttl, now);
            let done = self.shared().renew_lease(lease, expires_at, now).await?;
            if done.rows_affected() == 0 {
                return Err(self.shared().lease_failure(&lease.run_id).await);
            }
            Ok(Lease {
                expires_at,
                ..lease.clone()
            })
        }

        async fn get_run(&self, run_id: &RunId) -> Result<Option<RunSummary>, StoreError> {
            let row = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {RUN_COLUMNS} FROM runs WHERE id = ?"
            )))
            .bind(run_id.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(self.db("reading a run"))?;
            let now = Timestamp::now();
            row.map(|row| self.summary(&row, now)).transpose()
        }

        async fn list_runs(&self) -> Result<Vec<RunSummary>, StoreError> {
            let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
                "SELECT {RUN_COLUMNS} FROM runs ORDER BY created_at DESC, id DESC"
            )))
            .fetch_all(&self.pool)
            .await
            .map_err(self.db("listing runs"))?;
            let now = Timestamp::now();
            rows.iter().map(|row| self.summary(row, now)).collect()
        }
    }
}
