//! Rows of either backend's schema decoded into the store's types, once: both schemas have the
//! same columns, and only where an error points differs (a SQLite file, a PostgreSQL URL).
//!
//! Everything read back is validated: a value this crate could not have written (an unknown
//! status, a negative count, an unparsable time) means the data was damaged or edited, and is
//! reported as corrupt naming the store rather than papered over.

use baton_core::{EventRecord, RunId, RunStatus};
use jiff::Timestamp;

use crate::process::holder_is_dead;
use crate::{Holder, HolderInfo, RunSummary, StoreError};

/// Columns of `runs` that [`summary_from_row`] reads, in a form to paste into a SELECT.
pub(crate) const RUN_COLUMNS: &str = "id, goal, workspace, status, created_at, updated_at, \
     event_count, lease_token, lease_host, lease_pid, lease_pid_start, lease_expires_at, lease_worker, lease_renewed_at, queued";

/// Where rows come from, as the errors about them name it.
pub(crate) trait Origin {
    /// A value this crate could not have written.
    fn corrupt(&self, detail: String) -> StoreError;
    /// A statement failed in the driver while doing `context`.
    fn failed(&self, context: &str, error: sqlx::Error) -> StoreError;
    /// Reading `column` failed in the driver.
    fn unreadable(&self, column: &str, error: sqlx::Error) -> StoreError {
        self.failed(&format!("reading column {column}"), error)
    }
}

/// One row and its origin.
pub(crate) struct At<'a, R, O>(pub &'a R, pub O);

impl<R, O> At<'_, R, O>
where
    R: sqlx::Row,
    O: Origin,
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    for<'r> String: sqlx::Decode<'r, R::Database>,
    String: sqlx::Type<R::Database>,
    for<'r> i64: sqlx::Decode<'r, R::Database>,
    i64: sqlx::Type<R::Database>,
    for<'r> bool: sqlx::Decode<'r, R::Database>,
    bool: sqlx::Type<R::Database>,
    for<'r> Vec<u8>: sqlx::Decode<'r, R::Database>,
    Vec<u8>: sqlx::Type<R::Database>,
{
    fn get<T>(&self, column: &str) -> Result<T, StoreError>
    where
        for<'r> T: sqlx::Decode<'r, R::Database>,
        T: sqlx::Type<R::Database>,
    {
        self.0
            .try_get(column)
            .map_err(|e| self.1.unreadable(column, e))
    }

    /// The text column `column`.
    pub(crate) fn text(&self, column: &str) -> Result<String, StoreError> {
        self.get(column)
    }

    /// The integer column `column`.
    pub(crate) fn int(&self, column: &str) -> Result<i64, StoreError> {
        self.get(column)
    }

    fn corrupt(&self, detail: String) -> StoreError {
        self.1.corrupt(detail)
    }

    fn timestamp(&self, what: &str, text: &str) -> Result<Timestamp, StoreError> {
        text.parse()
            .map_err(|e| self.corrupt(format!("{what} has an unreadable time {text:?}: {e}")))
    }

    fn count(&self, what: &str, n: i64) -> Result<u64, StoreError> {
        u64::try_from(n).map_err(|_| self.corrupt(format!("{what} is negative ({n})")))
    }

    /// The lease recorded in a row, if any: its token, holder and expiry.
    pub(crate) fn lease(&self) -> Result<Option<(String, Holder, Timestamp)>, StoreError> {
        let Some(token) = self.get::<Option<String>>("lease_token")? else {
            return Ok(None);
        };
        let host: Option<String> = self.get("lease_host")?;
        let pid: Option<i64> = self.get("lease_pid")?;
        let pid_start: Option<i64> = self.get("lease_pid_start")?;
        let expires: Option<String> = self.get("lease_expires_at")?;
        let worker_id: Option<String> = self.get("lease_worker")?;
        let (Some(host), Some(pid), Some(expires)) = (host, pid, expires) else {
            return Err(self.corrupt("a lease is recorded without its holder or expiry".into()));
        };
        let pid =
            u32::try_from(pid).map_err(|_| self.corrupt(format!("lease pid {pid} is invalid")))?;
        let pid_start = pid_start
            .map(|s| self.count("lease pid start", s))
            .transpose()?;
        let expires_at = self.timestamp("lease expiry", &expires)?;
        Ok(Some((
            token,
            Holder {
                host,
                pid,
                pid_start,
                worker_id,
            },
            expires_at,
        )))
    }

    /// A `runs` row (selected with [`RUN_COLUMNS`]) as a summary; `alive` is judged at `now`
    /// (for PostgreSQL, the server's time).
    pub(crate) fn summary(
        &self,
        local_host: &str,
        now: Timestamp,
    ) -> Result<RunSummary, StoreError> {
        let id = self.text("id")?;
        let status = self.text("status")?;
        let Some(status) = RunStatus::parse(&status) else {
            return Err(self.corrupt(format!("run {id} has an unknown status {status:?}")));
        };
        let renewed_at = self
            .get::<Option<String>>("lease_renewed_at")?
            .map(|t| self.timestamp("lease renewal", &t))
            .transpose()?;
        let holder = self.lease()?.map(|(_, holder, expires_at)| HolderInfo {
            alive: expires_at > now && !holder_is_dead(&holder, local_host),
            holder,
            expires_at,
            renewed_at,
        });
        Ok(RunSummary {
            goal: self.text("goal")?,
            workspace: self.text("workspace")?,
            status,
            created_at: self.timestamp("run creation", &self.text("created_at")?)?,
            updated_at: self.timestamp("run update", &self.text("updated_at")?)?,
            event_count: self.count("event count", self.int("event_count")?)?,
            holder,
            queued: self.get("queued")?,
            id: RunId::from_string(id),
        })
    }

    /// The journal records with a seq in `wanted` that a `journal` row (`first_seq, encoding,
    /// body`: one commit) holds.
    pub(crate) fn commit(
        &self,
        run_id: &RunId,
        wanted: std::ops::Range<u64>,
    ) -> Result<Vec<EventRecord>, StoreError> {
        let first_seq = self.count("commit sequence number", self.int("first_seq")?)?;
        let encoding = self.int("encoding")?;
        let body: Vec<u8> = self.get("body")?;
        crate::commit::decode(run_id, first_seq, encoding, &body, wanted)
            .map_err(|e| self.corrupt(e))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::shared::ts_to_text;

    #[test]
    fn timestamps_are_fixed_width_and_round_trip() {
        for ts in [
            Timestamp::new(0, 0).unwrap(),
            Timestamp::new(1_700_000_000, 120_000).unwrap(),
        ] {
            let text = ts_to_text(ts);
            assert_eq!(text.len(), "1970-01-01T00:00:00.000000000Z".len(), "{text}");
            assert_eq!(text.parse::<Timestamp>().unwrap(), ts);
        }
        let earlier = ts_to_text(Timestamp::new(5, 900_000_000).unwrap());
        let later = ts_to_text(Timestamp::new(6, 1).unwrap());
        assert!(earlier < later);
    }
}
