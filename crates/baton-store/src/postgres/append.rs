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
use crate::shared::{PreparedBatch, prepare_batch, to_db_int};
use crate::{Lease, StoreError};

/// The fenced append: `$1` run, `$2`–`$5` the rows' seq, kind, at and payload, `$6` their number,
/// `$7` the run's new status (or NULL), `$8` the lease token, `$9` the seq the batch starts at.
/// `updated_at` is in the server's clock, like `created_at` and the lease expiry. Built once.
static APPEND_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "WITH fence AS ( \
             UPDATE runs SET event_count = event_count + $6, status = COALESCE($7, status), \
             updated_at = {SERVER_NOW_TEXT} \
             WHERE id = $1 AND lease_token = $8 AND event_count = $9 RETURNING id) \
         INSERT INTO events (run_id, seq, kind, at, payload) \
         SELECT fence.id, u.seq, u.kind, u.at, u.payload FROM fence, \
             UNNEST($2::bigint[], $3::text[], $4::text[], $5::text[]) AS u(seq, kind, at, payload)"
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
            status,
            rows,
        }) = prepare_batch(run_id, records)?
        else {
            return Ok(());
        };
        let seqs: Vec<i64> = rows.iter().map(|r| r.seq).collect();
        let kinds: Vec<&str> = rows.iter().map(|r| r.kind).collect();
        let (ats, payloads): (Vec<String>, Vec<String>) =
            rows.into_iter().map(|r| (r.at, r.payload)).unzip();
        let count = records.len() as u64;
        // With synchronous_commit = on the statement returns after the server flushed its WAL.
        let inserted = sqlx::query(sqlx::AssertSqlSafe(APPEND_SQL.as_str()))
            .bind(run_id.as_str())
            .bind(&seqs)
            .bind(&kinds)
            .bind(&ats)
            .bind(&payloads)
            .bind(to_db_int(count))
            .bind(status.map(RunStatus::as_str))
            .bind(&lease.token)
            .bind(to_db_int(first))
            .execute(&self.pool)
            .await
            .map_err(self.db("appending events"))?
            .rows_affected();
        if inserted == count {
            return Ok(());
        }
        Err(self.refusal(lease, first, count, inserted).await)
    }

    /// Why an append inserted `inserted` rows instead of its `records_len`.
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
                    "an append of {records_len} events to run {} inserted {inserted}",
                    lease.run_id
                ),
            })
    }
}
