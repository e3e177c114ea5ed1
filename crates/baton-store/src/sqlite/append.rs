//! Appending a batch of events: fenced, atomic, and in **one** round trip to the connection's
//! thread whatever the batch's size — `BEGIN IMMEDIATE`, the statement that fences, the
//! inserts and `COMMIT` go as one multi-statement query.
//!
//! Each statement sqlx runs on its own is a hand-off to the connection's worker thread and
//! back (~0.1 ms on the 2-core CI machine, about as long as the WAL's fsync); with one statement
//! per event a journaled turn spent most of its time in those hand-offs (measured by `cargo
//! bench -p baton-engine --bench overhead`), not in SQLite or the fsync.
//!
//! sqlx's `Transaction` cannot be used for this (its BEGIN and COMMIT are hand-offs of their
//! own), so the transaction is in the SQL text, and two things sqlx would otherwise guarantee
//! are kept here: a failed statement stops the query with the transaction open, so the error
//! path rolls it back (and closes the connection if even that fails); and the query runs on a
//! task of its own, because sqlx's worker stops a multi-statement query when its caller stops
//! listening — a caller cancelled between BEGIN and COMMIT would otherwise hand an open
//! transaction back to the pool.

use baton_core::{EventRecord, RunStatus};
use jiff::Timestamp;
use sqlx::sqlite::SqliteArguments;
use sqlx::{AssertSqlSafe, Sqlite};

use super::SqliteStore;
use crate::error::sqlite_primary_code;
use crate::shared::{check_batch, event_rows, to_db_int, ts_to_text};
use crate::{Lease, StoreError};

/// The fence, and the end of the journal moved, in one statement: unless the lease token is the
/// current one and the batch starts where the journal ends, `event_count` becomes NULL, which its
/// NOT NULL constraint refuses — the statement fails and nothing after it runs. (A run that
/// does not exist matches no row; then the inserts fail on the events' foreign key.)
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

/// The whole append of `rows` rows as one query: the transaction, the fence, an INSERT per
/// [`ROWS_PER_INSERT`] rows, the commit.
fn batch_sql(rows: usize) -> String {
    let mut sql = format!("BEGIN IMMEDIATE; {FENCE}; ");
    let mut left = rows;
    while left > 0 {
        let these = left.min(ROWS_PER_INSERT);
        sql.push_str(&insert_sql(these));
        sql.push_str("; ");
        left -= these;
    }
    sql.push_str("COMMIT");
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
        let rows = event_rows(run_id, records)?;
        let status = records.iter().rev().find_map(|r| r.event.status_change());
        let mut query = sqlx::query(AssertSqlSafe(batch_sql(rows.len())))
            .bind(lease.token.clone())
            .bind(to_db_int(first))
            .bind(to_db_int(records.len() as u64))
            .bind(status.map(RunStatus::as_str))
            .bind(ts_to_text(Timestamp::now()))
            .bind(run_id.as_str().to_owned());
        for row in rows {
            query = query
                .bind(run_id.as_str().to_owned())
                .bind(row.seq)
                .bind(row.kind)
                .bind(row.at)
                .bind(row.payload);
        }
        let pool = self.pool.clone();
        // On a task of its own: see the module's doc.
        let outcome = tokio::spawn(async move { run_in_one_hand_off(&pool, query).await })
            .await
            .map_err(|e| {
                let e = sqlx::Error::Protocol(format!("the append's task failed: {e}"));
                self.db("appending events")(e)
            })?;
        match outcome {
            // With synchronous = FULL the COMMIT returned after the WAL was fsynced.
            Ok(()) => Ok(()),
            Err(sqlx::Error::Database(db))
                if sqlite_primary_code(db.as_ref()) == Some(SQLITE_CONSTRAINT) =>
            {
                let error = sqlx::Error::Database(db);
                Err(self.refusal(lease, first, error).await)
            }
            Err(e) => Err(self.db("appending events")(e)),
        }
    }

    /// Why an append was refused; `cause`, the database's own error, when the run's row
    /// explains nothing (then something else went wrong).
    async fn refusal(&self, lease: &Lease, first: u64, cause: sqlx::Error) -> StoreError {
        self.shared()
            .refusal(lease, first)
            .await
            .unwrap_or_else(|| self.db("appending events")(cause))
    }
}

type Query = sqlx::query::Query<'static, Sqlite, SqliteArguments>;

/// Runs the multi-statement `query` on one connection; when it fails part-way, rolls back what
/// it began, and closes the connection instead of returning it to the pool if that fails too.
async fn run_in_one_hand_off(pool: &sqlx::SqlitePool, query: Query) -> Result<(), sqlx::Error> {
    let mut conn = pool.acquire().await?;
    let Err(error) = query.execute(&mut *conn).await else {
        return Ok(());
    };
    // "cannot rollback - no transaction is active" when BEGIN itself failed (busy): harmless.
    let rolled_back = sqlx::raw_sql(AssertSqlSafe("ROLLBACK"))
        .execute(&mut *conn)
        .await;
    if let Err(rollback) = rolled_back
        && !rollback.to_string().contains("no transaction is active")
    {
        // The connection may still be inside the transaction: it must never serve again.
        conn.close_on_drop();
    }
    Err(error)
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

    #[test]
    fn a_batch_is_one_transaction_with_an_insert_per_thousand_rows() {
        for rows in [1, 999, 1_000, 1_001, 2_500] {
            let sql = batch_sql(rows);
            assert!(sql.starts_with("BEGIN IMMEDIATE; UPDATE runs"));
            assert!(sql.ends_with("; COMMIT"));
            assert_eq!(sql.matches(INSERT).count(), rows.div_ceil(ROWS_PER_INSERT));
            assert_eq!(sql.matches('?').count(), 6 + 5 * rows, "{rows} rows");
        }
    }
}
