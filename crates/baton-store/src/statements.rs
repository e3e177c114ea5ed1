//! The statements both backends run alike, once, generic over the sqlx database: state
//! checkpoints, reading a run's events, whether a run exists, why an append was refused, and
//! the lease's writes (take, renew, release) with why a fenced one matched nothing. Only the
//! SQL's placeholder syntax differs ([`Dialect`]); where an error points is the rows'
//! [`Origin`]. What differs between the backends is whose clock a lease's times come from, so
//! the callers pass the times.

use baton_core::{EventRecord, RunId};
use jiff::Timestamp;

use crate::rows::{At, Origin};
use crate::shared::{to_db_int, ts_to_text};
use crate::{Checkpoint, Holder, Lease, StoreError};

/// The shared statements in one database's SQL.
pub(crate) trait Dialect: sqlx::Database {
    /// Written only while the lease is held (so only by the run's one writer, whose state is the
    /// latest), replacing the run's previous checkpoint; one statement, so one commit.
    const SAVE_CHECKPOINT: &'static str;
    const LOAD_CHECKPOINT: &'static str;
    const READ_EVENTS: &'static str;
    const RUN_EXISTS: &'static str;
    /// What an append is fenced by: the run's lease token and event count.
    const FENCE_ROW: &'static str;
    /// A new lease: token, host, pid, pid start, expiry, worker, renewed at; then the run.
    const WRITE_LEASE: &'static str;
    /// A renewal: expiry, renewed at; then the run and the lease token (the fence).
    const RENEW_LEASE: &'static str;
    /// A release: the run and the lease token (the fence).
    const RELEASE_LEASE: &'static str;
}

impl Dialect for sqlx::Sqlite {
    // The SELECT's WHERE is what lets SQLite parse the upsert.
    const SAVE_CHECKPOINT: &'static str = "INSERT INTO checkpoints (run_id, seq, format, state) \
         SELECT id, ?, ?, ? FROM runs WHERE id = ? AND lease_token = ? \
         ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, format = excluded.format, \
         state = excluded.state";
    const LOAD_CHECKPOINT: &'static str =
        "SELECT seq, format, state FROM checkpoints WHERE run_id = ?";
    // The commit holding `from` (the last that starts at or before it) and those after it.
    const READ_EVENTS: &'static str = "SELECT first_seq, encoding, body FROM journal \
         WHERE run_id = ?1 AND first_seq >= COALESCE((SELECT MAX(first_seq) FROM journal \
         WHERE run_id = ?1 AND first_seq <= ?2), 0) ORDER BY first_seq LIMIT ?3";
    const RUN_EXISTS: &'static str = "SELECT id FROM runs WHERE id = ?";
    const FENCE_ROW: &'static str = "SELECT lease_token, event_count FROM runs WHERE id = ?";
    const WRITE_LEASE: &'static str = "UPDATE runs SET lease_token = ?, lease_host = ?, \
         lease_pid = ?, lease_pid_start = ?, lease_expires_at = ?, lease_worker = ?, \
         lease_renewed_at = ? WHERE id = ?";
    const RENEW_LEASE: &'static str = "UPDATE runs SET lease_expires_at = ?, \
         lease_renewed_at = ? WHERE id = ? AND lease_token = ?";
    const RELEASE_LEASE: &'static str = "UPDATE runs SET lease_token = NULL, lease_host = NULL, \
         lease_pid = NULL, lease_pid_start = NULL, lease_expires_at = NULL, lease_worker = NULL, \
         lease_renewed_at = NULL WHERE id = ? AND lease_token = ?";
}

impl Dialect for sqlx::Postgres {
    const SAVE_CHECKPOINT: &'static str = "INSERT INTO checkpoints (run_id, seq, format, state) \
         SELECT id, $1, $2, $3 FROM runs WHERE id = $4 AND lease_token = $5 \
         ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, format = excluded.format, \
         state = excluded.state";
    const LOAD_CHECKPOINT: &'static str =
        "SELECT seq, format, state FROM checkpoints WHERE run_id = $1";
    const READ_EVENTS: &'static str = "SELECT first_seq, encoding, body FROM journal \
         WHERE run_id = $1 AND first_seq >= COALESCE((SELECT MAX(first_seq) FROM journal \
         WHERE run_id = $1 AND first_seq <= $2), 0) ORDER BY first_seq LIMIT $3";
    const RUN_EXISTS: &'static str = "SELECT id FROM runs WHERE id = $1";
    const FENCE_ROW: &'static str = "SELECT lease_token, event_count FROM runs WHERE id = $1";
    const WRITE_LEASE: &'static str = "UPDATE runs SET lease_token = $1, lease_host = $2, \
         lease_pid = $3, lease_pid_start = $4, lease_expires_at = $5, lease_worker = $6, \
         lease_renewed_at = $7 WHERE id = $8";
    const RENEW_LEASE: &'static str = "UPDATE runs SET lease_expires_at = $1, \
         lease_renewed_at = $2 WHERE id = $3 AND lease_token = $4";
    const RELEASE_LEASE: &'static str = "UPDATE runs SET lease_token = NULL, lease_host = NULL, \
         lease_pid = NULL, lease_pid_start = NULL, lease_expires_at = NULL, lease_worker = NULL, \
         lease_renewed_at = NULL WHERE id = $1 AND lease_token = $2";
}

/// A backend's pool and what its errors name.
pub(crate) struct Shared<'a, DB: sqlx::Database, O> {
    pub pool: &'a sqlx::Pool<DB>,
    pub origin: O,
}

impl<DB, O> Shared<'_, DB, O>
where
    DB: Dialect,
    O: Origin + Copy,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
    DB::Arguments: sqlx::IntoArguments<DB>,
    for<'t> String: sqlx::Encode<'t, DB>,
    for<'t> Vec<u8>: sqlx::Encode<'t, DB>,
    for<'t> i64: sqlx::Encode<'t, DB>,
    for<'t> Option<String>: sqlx::Encode<'t, DB>,
    for<'t> Option<i64>: sqlx::Encode<'t, DB>,
    for<'r> (i64, String, Vec<u8>): sqlx::FromRow<'r, DB::Row>,
    for<'r> (String,): sqlx::FromRow<'r, DB::Row>,
    for<'r> (Option<String>, i64): sqlx::FromRow<'r, DB::Row>,
    for<'c> &'c str: sqlx::ColumnIndex<DB::Row>,
    for<'r> String: sqlx::Decode<'r, DB>,
    String: sqlx::Type<DB>,
    for<'r> i64: sqlx::Decode<'r, DB>,
    i64: sqlx::Type<DB>,
    for<'r> bool: sqlx::Decode<'r, DB>,
    bool: sqlx::Type<DB>,
    for<'r> Vec<u8>: sqlx::Decode<'r, DB>,
    Vec<u8>: sqlx::Type<DB>,
{
    fn db(&self, context: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError + '_ {
        move |e| self.origin.failed(context, e)
    }

    pub(crate) async fn save_checkpoint(
        &self,
        lease: &Lease,
        checkpoint: &Checkpoint,
    ) -> Result<(), StoreError> {
        let (format, state) = crate::commit::pack_checkpoint(&checkpoint.format, &checkpoint.state);
        sqlx::query(DB::SAVE_CHECKPOINT)
            .bind(to_db_int(checkpoint.seq))
            .bind(format)
            .bind(state)
            .bind(lease.run_id.as_str().to_owned())
            .bind(lease.token.clone())
            .execute(self.pool)
            .await
            .map_err(self.db("saving a state checkpoint"))?;
        Ok(())
    }

    pub(crate) async fn load_checkpoint(
        &self,
        run_id: &RunId,
    ) -> Result<Option<Checkpoint>, StoreError> {
        let row: Option<(i64, String, Vec<u8>)> = sqlx::query_as(DB::LOAD_CHECKPOINT)
            .bind(run_id.as_str().to_owned())
            .fetch_optional(self.pool)
            .await
            .map_err(self.db("reading a state checkpoint"))?;
        row.map(|(seq, format, state)| {
            let seq = u64::try_from(seq).map_err(|_| {
                self.origin
                    .corrupt(format!("checkpoint seq is negative ({seq})"))
            })?;
            let (format, state) = crate::commit::unpack_checkpoint(&format, state)
                .map_err(|e| self.origin.corrupt(format!("run {run_id}: {e}")))?;
            Ok(Checkpoint { seq, format, state })
        })
        .transpose()
    }

    pub(crate) async fn run_exists(&self, run_id: &RunId) -> Result<bool, StoreError> {
        let found: Option<(String,)> = sqlx::query_as(DB::RUN_EXISTS)
            .bind(run_id.as_str().to_owned())
            .fetch_optional(self.pool)
            .await
            .map_err(self.db("looking up a run"))?;
        Ok(found.is_some())
    }

    /// Writes a fresh lease (`token`, expiring at `expires_at`) for `holder` on `run_id`, in the
    /// caller's transaction (which has checked that the lease may be taken).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn write_lease(
        &self,
        conn: &mut DB::Connection,
        run_id: &RunId,
        holder: &Holder,
        token: &str,
        expires_at: Timestamp,
        now: Timestamp,
        context: &'static str,
    ) -> Result<(), StoreError> {
        sqlx::query(DB::WRITE_LEASE)
            .bind(token.to_owned())
            .bind(holder.host.clone())
            .bind(i64::from(holder.pid))
            .bind(holder.pid_start.map(to_db_int))
            .bind(ts_to_text(expires_at))
            .bind(holder.worker_id.clone())
            .bind(ts_to_text(now))
            .bind(run_id.as_str().to_owned())
            .execute(conn)
            .await
            .map_err(self.db(context))?;
        Ok(())
    }

    /// Moves `lease`'s expiry to `expires_at`, fenced by its token; what the statement did, for
    /// the backend to count the rows it matched.
    pub(crate) async fn renew_lease(
        &self,
        lease: &Lease,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<DB::QueryResult, StoreError> {
        sqlx::query(DB::RENEW_LEASE)
            .bind(ts_to_text(expires_at))
            .bind(ts_to_text(now))
            .bind(lease.run_id.as_str().to_owned())
            .bind(lease.token.clone())
            .execute(self.pool)
            .await
            .map_err(self.db("renewing a lease"))
    }

    /// Ends `lease` if it is still the run's (a lost lease is someone else's now: left alone).
    pub(crate) async fn release_lease(&self, lease: &Lease) -> Result<(), StoreError> {
        sqlx::query(DB::RELEASE_LEASE)
            .bind(lease.run_id.as_str().to_owned())
            .bind(lease.token.clone())
            .execute(self.pool)
            .await
            .map_err(self.db("releasing a lease"))?;
        Ok(())
    }

    /// Why a fenced lease update matched no row: the run is gone, or its lease changed hands.
    pub(crate) async fn lease_failure(&self, run_id: &RunId) -> StoreError {
        match self.run_exists(run_id).await {
            Ok(true) => StoreError::LeaseLost {
                run_id: run_id.clone(),
            },
            Ok(false) => StoreError::NotFound {
                run_id: run_id.clone(),
            },
            Err(e) => e,
        }
    }

    /// Why a fenced append starting at `first` wrote nothing, read from the run's row afterwards
    /// (see [`crate::shared::refusal`]); `None` when the row explains nothing.
    pub(crate) async fn refusal(&self, lease: &Lease, first: u64) -> Option<StoreError> {
        let row: Option<(Option<String>, i64)> = match sqlx::query_as(DB::FENCE_ROW)
            .bind(lease.run_id.as_str().to_owned())
            .fetch_optional(self.pool)
            .await
        {
            Ok(row) => row,
            Err(e) => return Some(self.db("checking why an append was refused")(e)),
        };
        let row = match row {
            None => None,
            Some((token, stored)) => match u64::try_from(stored) {
                Ok(stored) => Some((token, stored)),
                Err(_) => {
                    return Some(
                        self.origin
                            .corrupt(format!("event count is negative ({stored})")),
                    );
                }
            },
        };
        crate::shared::refusal(lease, first, row)
    }

    /// Up to `limit` events of `run_id` from `from_seq` on, checked to be gap-free.
    pub(crate) async fn read_events(
        &self,
        run_id: &RunId,
        from_seq: u64,
        limit: u64,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let rows = sqlx::query(DB::READ_EVENTS)
            .bind(run_id.as_str().to_owned())
            .bind(to_db_int(from_seq))
            .bind(to_db_int(limit))
            .fetch_all(self.pool)
            .await
            .map_err(self.db("reading events"))?;
        if rows.is_empty() && !self.run_exists(run_id).await? {
            return Err(StoreError::NotFound {
                run_id: run_id.clone(),
            });
        }
        // Each row is a commit of at least one event, so `limit` rows hold at least `limit`
        // events from `from_seq` on; the first may start before it.
        let wanted = from_seq..from_seq.saturating_add(limit);
        let mut records = Vec::new();
        for row in &rows {
            records.extend(At(row, self.origin).commit(run_id, wanted.clone())?);
            if records.len() as u64 >= limit {
                break;
            }
        }
        if let Some(detail) = crate::shared::journal_gap(run_id, &records, from_seq) {
            return Err(self.origin.corrupt(detail));
        }
        Ok(records)
    }
}

/// `impl_store! { impl Store for $store { … } }`: the impl, with the methods both backends
/// answer alike written once here (releasing a lease, appending through the backend's own
/// `append_batch`, reading events, state checkpoints, closing through its inherent `close`), so
/// each backend writes only the methods that differ. The backend provides `shared()` (its
/// [`Shared`]), `append_batch` and `close`.
macro_rules! impl_store {
    (impl Store for $store:ident { $($methods:tt)* }) => {
        #[async_trait::async_trait]
        impl crate::Store for $store {
            async fn release(&self, lease: &crate::Lease) -> Result<(), crate::StoreError> {
                self.shared().release_lease(lease).await
            }

            async fn append(
                &self,
                lease: &crate::Lease,
                records: &[baton_core::EventRecord],
            ) -> Result<(), crate::StoreError> {
                self.append_batch(lease, records).await
            }

            async fn read_events(
                &self,
                run_id: &baton_core::RunId,
                from_seq: u64,
                limit: u64,
            ) -> Result<Vec<baton_core::EventRecord>, crate::StoreError> {
                self.shared().read_events(run_id, from_seq, limit).await
            }

            async fn save_checkpoint(
                &self,
                lease: &crate::Lease,
                checkpoint: &crate::Checkpoint,
            ) -> Result<(), crate::StoreError> {
                self.shared().save_checkpoint(lease, checkpoint).await
            }

            async fn load_checkpoint(
                &self,
                run_id: &baton_core::RunId,
            ) -> Result<Option<crate::Checkpoint>, crate::StoreError> {
                self.shared().load_checkpoint(run_id).await
            }

            async fn close(&self) {
                $store::close(self).await;
            }

            $($methods)*
        }
    };
}
pub(crate) use impl_store;
