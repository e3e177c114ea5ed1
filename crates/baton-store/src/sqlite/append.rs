//! Appending a batch of events: fenced, atomic, and in three round trips to the connection's
//! thread whatever the batch's size — BEGIN, one statement that fences and inserts, COMMIT.
//!
//! Each statement sqlx runs is a hand-off to the connection's worker thread and back; with one
//! statement per event a journaled turn spent most of its time in those hand-offs (measured by
//! `cargo bench -p baton-engine --bench overhead`), not in SQLite or the fsync.

use baton_core::{EventRecord, RunStatus};
use jiff::Timestamp;
use sqlx::sqlite::SqliteArguments;
use sqlx::{AssertSqlSafe, Sqlite, Transaction};

use super::SqliteStore;
use super::rows::from_db_int;
use crate::error::sqlite_primary_code;
use crate::shared::{check_batch, to_db_int, ts_to_text};
use crate::{Lease, StoreError};

/// The fence, and the end of the journal moved, in one statement: unless the lease token is the
/// current one and the batch starts where the journal ends, `event_count` becomes NULL, which its
/// NOT NULL constraint refuses — the statement fails and nothing after it runs.
const FENCE: &str = "UPDATE runs SET \
     event_count = CASE WHEN lease_token = ? AND event_count = ? THEN event_count + ? END, \
     status = COALESCE(?, status), updated_at = ? WHERE id = ?";

const INSERT: &str = "INSERT INTO events (run_id, seq, kind, at, payload) VALUES ";

/// Rows per INSERT statement: SQLite allows 32,766 bound values in one statement; five a row.
const ROWS_PER_INSERT: usize = 1_000;
// Within SQLite's limit of bound values, with the fence's six.
const _: () = assert!(ROWS_PER_INSERT * 5 + 6 <= 32_766);

/// SQLite's primary result code for a constraint violation (NOT NULL, FOREIGN KEY, PRIMARY KEY).
const SQLITE_CONSTRAINT: i64 = 19;

/// `INSERT … VALUES (?, ?, ?, ?, ?), …` for `rows` rows.
fn insert_sql(rows: usize) -> String {
    let mut sql = String::with_capacity(INSERT.len() + rows * 17);
    sql.push_str(INSERT);
    for i in 0..rows {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push_str("(?, ?, ?, ?, ?)");
    }
    sql
}

impl SqliteStore {
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
        // Serialize before taking the write lock, which other writers wait on.
        let payloads = records
            .iter()
            .map(|r| {
                serde_json::to_string(&r.event).map_err(|source| StoreError::Serialization {
                    run_id: run_id.clone(),
                    seq: r.seq,
                    source,
                })
            })
            .collect::<Result<Vec<String>, StoreError>>()?;
        let status = records.iter().rev().find_map(|r| r.event.status_change());
        let count = records.len() as u64;
        let mut chunks = records
            .chunks(ROWS_PER_INSERT)
            .zip(payloads.chunks(ROWS_PER_INSERT));

        let mut tx = self.begin_write("appending events").await?;
        // The fence and the first rows, in one round trip.
        let (rows, texts) = chunks.next().unwrap_or_default();
        let sql = format!("{FENCE}; {}", insert_sql(rows.len()));
        let query = sqlx::query(AssertSqlSafe(sql))
            .bind(&lease.token)
            .bind(to_db_int(first))
            .bind(to_db_int(count))
            .bind(status.map(RunStatus::as_str))
            .bind(ts_to_text(Timestamp::now()))
            .bind(run_id.as_str());
        let done = bind_rows(query, run_id.as_str(), rows, texts)
            .execute(&mut *tx)
            .await;
        match done {
            Ok(done) if done.rows_affected() == 1 + rows.len() as u64 => {}
            Ok(_) => return Err(self.refusal(&mut tx, lease, first, None).await),
            Err(sqlx::Error::Database(db))
                if sqlite_primary_code(db.as_ref()) == Some(SQLITE_CONSTRAINT) =>
            {
                let error = sqlx::Error::Database(db);
                return Err(self.refusal(&mut tx, lease, first, Some(error)).await);
            }
            Err(e) => return Err(self.db("appending events")(e)),
        }
        for (rows, texts) in chunks {
            let query = sqlx::query(AssertSqlSafe(insert_sql(rows.len())));
            bind_rows(query, run_id.as_str(), rows, texts)
                .execute(&mut *tx)
                .await
                .map_err(self.db("inserting events"))?;
        }
        // With synchronous = FULL the commit returns after the WAL is fsynced.
        tx.commit().await.map_err(self.db("committing events"))
    }

    /// Why an append was refused: the run is gone, its lease is someone else's now, or the batch
    /// does not start where the journal ends. `cause` is the database's own error, returned when
    /// none of these holds (then something else went wrong).
    async fn refusal(
        &self,
        tx: &mut Transaction<'static, Sqlite>,
        lease: &Lease,
        first: u64,
        cause: Option<sqlx::Error>,
    ) -> StoreError {
        let run_id = &lease.run_id;
        let row: Result<Option<(Option<String>, i64)>, StoreError> =
            sqlx::query_as("SELECT lease_token, event_count FROM runs WHERE id = ?")
                .bind(run_id.as_str())
                .fetch_optional(&mut **tx)
                .await
                .map_err(self.db("checking why an append was refused"));
        let stored = match row {
            Err(e) => return e,
            Ok(None) => {
                return StoreError::NotFound {
                    run_id: run_id.clone(),
                };
            }
            Ok(Some((token, _))) if token.as_deref() != Some(lease.token.as_str()) => {
                return StoreError::LeaseLost {
                    run_id: run_id.clone(),
                };
            }
            Ok(Some((_, stored))) => stored,
        };
        match from_db_int(&self.path, "event count", stored) {
            Err(e) => e,
            Ok(expected) if expected != first => StoreError::SequenceConflict {
                run_id: run_id.clone(),
                expected,
                got: first,
            },
            Ok(_) => match cause {
                Some(e) => self.db("appending events")(e),
                None => StoreError::InvalidRecords {
                    run_id: run_id.clone(),
                    detail: "the store wrote a different number of rows than the batch has".into(),
                },
            },
        }
    }
}

type Query<'q> = sqlx::query::Query<'q, Sqlite, SqliteArguments>;

fn bind_rows<'q>(
    mut query: Query<'q>,
    run_id: &'q str,
    rows: &'q [EventRecord],
    payloads: &'q [String],
) -> Query<'q> {
    for (record, payload) in rows.iter().zip(payloads) {
        query = query
            .bind(run_id)
            .bind(to_db_int(record.seq))
            .bind(record.event.kind())
            .bind(ts_to_text(record.at))
            .bind(payload.as_str());
    }
    query
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_placeholder_group_per_row() {
        assert_eq!(insert_sql(1), format!("{INSERT}(?, ?, ?, ?, ?)"));
        let sql = insert_sql(3);
        assert_eq!(sql.matches("(?, ?, ?, ?, ?)").count(), 3);
        assert_eq!(sql.matches('?').count(), 15);
    }
}
