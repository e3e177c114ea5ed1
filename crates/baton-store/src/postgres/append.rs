//! Appending a batch of events on PostgreSQL: fenced, atomic, and in **one** round trip to the
//! server whatever the batch's size.
//!
//! One statement does it all, in autocommit (one statement is one transaction): its CTE moves
//! the end of the journal only if the lease token is the current one and the batch starts where
//! the journal ends, and its INSERT adds the batch's rows only for the run row that CTE updated.
//! The row lock the UPDATE takes queues concurrent appenders to one run; under READ COMMITTED the
//! one that waited re-checks the fence against the row as the first left it, so it matches
//! nothing and inserts nothing. An append that inserted nothing is then explained from the run's
//! row (gone, lease lost, or not at the journal's end).
//!
//! It was a transaction of five statements (BEGIN, `SELECT … FOR UPDATE`, INSERT, UPDATE,
//! COMMIT): five round trips, each a network hop where the server is on another machine.

use std::sync::LazyLock;

use baton_core::{EventRecord, RunStatus};

use super::PostgresStore;
use super::rows::SERVER_NOW_TEXT;
use crate::commit::{PreparedBatch, prepare_batch};
use crate::shared::to_db_int;
use crate::{Lease, StoreError};

/// The fenced append: `$1` run, `$2`–`$4` the commit's first seq, encoding and body, `$5` its
/// number of events, `$6` the run's new status (or NULL), `$7` the lease token.
/// `updated_at` is in the server's clock, like `created_at` and the lease expiry. Built once.
static APPEND_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH fence AS ( \
             UPDATE runs SET event_count = event_count + $5, status = COALESCE($6, status), \
             updated_at = {SERVER_NOW_TEXT} \
             WHERE id = $1 AND lease_token = $7 AND event_count = $2 RETURNING id) \
         INSERT INTO journal (run_id, first_seq, encoding, body) \
         SELECT fence.id, $2, $3, $4 FROM fence"
    )
});

impl PostgresStore {
    pub(super) async fn append_batch(
        &self,
        lease: &Lease,
        records: &[EventRecord],
    ) -> Result<(), StoreError> {
        let run_id = &lease.run_id;
        let Some(PreparedBatch {
            first,
            count,
            status,
            row,
        }) = prepare_batch(run_id, records)?
        else {
            return Ok(());
        };
        // With synchronous_commit = on the statement returns after the server flushed its WAL.
        let inserted = sqlx::query(sqlx::AssertSqlSafe(APPEND_SQL.as_str()))
            .bind(run_id.as_str())
            .bind(row.first_seq)
            .bind(row.encoding)
            .bind(row.body)
            .bind(to_db_int(count))
            .bind(status.map(RunStatus::as_str))
            .bind(&lease.token)
            .execute(&self.pool)
            .await
            .map_err(self.db("appending events"))?
            .rows_affected();
        if inserted == 1 {
            return Ok(());
        }
        Err(self.refusal(lease, first, count, inserted).await)
    }

    /// Why an append of `records_len` events inserted `inserted` rows instead of its one.
    async fn refusal(
        &self,
        lease: &Lease,
        first: u64,
        records_len: u64,
        inserted: u64,
    ) -> StoreError {
        // The row matching the fence, yet the statement inserting another number of rows than
        // the batch holds, is not a state this statement can leave.
        self.shared()
            .refusal(lease, first)
            .await
            .unwrap_or_else(|| StoreError::CorruptData {
                store: self.url.clone(),
                detail: format!(
                    "an append of {records_len} events to run {} inserted {inserted} rows, not 1",
                    lease.run_id
                ),
            })
    }
}
