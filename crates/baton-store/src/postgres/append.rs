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

use baton_core::{EventRecord, RunStatus};

use super::PostgresStore;
use super::rows::{SERVER_NOW_TEXT, from_db_int};
use crate::shared::{check_batch, to_db_int, ts_to_text};
use crate::{Lease, StoreError};

/// The fenced append: `$1` run, `$2`–`$5` the rows' seq, kind, at and payload, `$6` their number,
/// `$7` the run's new status (or NULL), `$8` the lease token, `$9` the seq the batch starts at.
/// `updated_at` is in the server's clock, like `created_at` and the lease expiry.
fn append_sql() -> String {
    format!(
        "WITH fence AS ( \
             UPDATE runs SET event_count = event_count + $6, status = COALESCE($7, status), \
             updated_at = {SERVER_NOW_TEXT} \
             WHERE id = $1 AND lease_token = $8 AND event_count = $9 RETURNING id) \
         INSERT INTO events (run_id, seq, kind, at, payload) \
         SELECT fence.id, u.seq, u.kind, u.at, u.payload FROM fence, \
             UNNEST($2::bigint[], $3::text[], $4::text[], $5::text[]) AS u(seq, kind, at, payload)"
    )
}

impl PostgresStore {
    pub(super) async fn append_batch(
        &self,
        lease: &Lease,
        records: &[EventRecord],
    ) -> Result<(), StoreError> {
        let run_id = &lease.run_id;
        let first = check_batch(run_id, records)?;
        if records.is_empty() {
            return Ok(());
        }
        let mut seqs = Vec::with_capacity(records.len());
        let mut kinds = Vec::with_capacity(records.len());
        let mut ats = Vec::with_capacity(records.len());
        let mut payloads = Vec::with_capacity(records.len());
        for r in records {
            let payload =
                serde_json::to_string(&r.event).map_err(|source| StoreError::Serialization {
                    run_id: run_id.clone(),
                    seq: r.seq,
                    source,
                })?;
            seqs.push(to_db_int(r.seq));
            kinds.push(r.event.kind().to_owned());
            ats.push(ts_to_text(r.at));
            payloads.push(payload);
        }
        let status = records.iter().rev().find_map(|r| r.event.status_change());
        let count = records.len() as u64;
        // With synchronous_commit = on the statement returns after the server flushed its WAL.
        let inserted = sqlx::query(sqlx::AssertSqlSafe(append_sql()))
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

    /// Why an append inserted `inserted` rows instead of its `records_len`: the run is gone, its lease is
    /// someone else's now, or the batch does not start where the journal ends. Read after the
    /// statement: the explanation of a refusal that already happened, not a decision.
    async fn refusal(
        &self,
        lease: &Lease,
        first: u64,
        records_len: u64,
        inserted: u64,
    ) -> StoreError {
        let run_id = &lease.run_id;
        let row: Result<Option<(Option<String>, i64)>, StoreError> =
            sqlx::query_as("SELECT lease_token, event_count FROM runs WHERE id = $1")
                .bind(run_id.as_str())
                .fetch_optional(&self.pool)
                .await
                .map_err(self.db("checking why an append was refused"));
        match row {
            Err(e) => e,
            Ok(None) => StoreError::NotFound {
                run_id: run_id.clone(),
            },
            Ok(Some((token, _))) if token.as_deref() != Some(lease.token.as_str()) => {
                StoreError::LeaseLost {
                    run_id: run_id.clone(),
                }
            }
            Ok(Some((_, stored))) => match from_db_int(&self.url, "event count", stored) {
                Err(e) => e,
                Ok(expected) if expected != first => StoreError::SequenceConflict {
                    run_id: run_id.clone(),
                    expected,
                    got: first,
                },
                // The row matches the fence, yet the statement inserted a different number of
                // rows than the batch holds: not a state this statement can leave.
                Ok(_) => StoreError::CorruptData {
                    store: self.url.clone(),
                    detail: format!(
                        "an append of {} events to run {run_id} inserted {inserted}",
                        records_len
                    ),
                },
            },
        }
    }
}
