//! Conversions between rows of the SQLite schema and the store's types.
//!
//! Everything read back is validated: a value this crate could not have written (an unknown
//! status, a negative count, an unparsable time) means the file was damaged or edited, and is
//! reported as [`StoreError::Corrupt`] naming the file rather than papered over.

use std::path::Path;

use baton_core::{Event, EventRecord, RunId, RunStatus};
use jiff::Timestamp;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::open::classify;
use crate::process::holder_is_dead;
use crate::{Holder, HolderInfo, RunSummary, StoreError};

/// Columns of `runs` that [`summary_from_row`] reads, in a form to paste into a SELECT.
pub(crate) const RUN_COLUMNS: &str = "id, goal, workspace, status, created_at, updated_at, \
     event_count, lease_token, lease_host, lease_pid, lease_pid_start, lease_expires_at, lease_worker, lease_renewed_at, queued";

pub(crate) fn ts_from_text(path: &Path, what: &str, text: &str) -> Result<Timestamp, StoreError> {
    text.parse()
        .map_err(|e| corrupt(path, format!("{what} has an unreadable time {text:?}: {e}")))
}

pub(crate) fn from_db_int(path: &Path, what: &str, n: i64) -> Result<u64, StoreError> {
    u64::try_from(n).map_err(|_| corrupt(path, format!("{what} is negative ({n})")))
}

pub(crate) fn corrupt(path: &Path, detail: String) -> StoreError {
    StoreError::Corrupt {
        path: path.to_owned(),
        detail,
    }
}

fn get<'r, T>(row: &'r SqliteRow, path: &Path, column: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>,
{
    row.try_get(column)
        .map_err(|e| classify(path, &format!("reading column {column}"), e))
}

/// The lease recorded in a row, if any: its token, holder and expiry.
pub(crate) fn lease_from_row(
    row: &SqliteRow,
    path: &Path,
) -> Result<Option<(String, Holder, Timestamp)>, StoreError> {
    let Some(token) = get::<Option<String>>(row, path, "lease_token")? else {
        return Ok(None);
    };
    let host: Option<String> = get(row, path, "lease_host")?;
    let pid: Option<i64> = get(row, path, "lease_pid")?;
    let pid_start: Option<i64> = get(row, path, "lease_pid_start")?;
    let expires: Option<String> = get(row, path, "lease_expires_at")?;
    let worker_id: Option<String> = get(row, path, "lease_worker")?;
    let (Some(host), Some(pid), Some(expires)) = (host, pid, expires) else {
        return Err(corrupt(
            path,
            "a lease is recorded without its holder or expiry".into(),
        ));
    };
    let pid =
        u32::try_from(pid).map_err(|_| corrupt(path, format!("lease pid {pid} is invalid")))?;
    let pid_start = pid_start
        .map(|s| from_db_int(path, "lease pid start", s))
        .transpose()?;
    let expires_at = ts_from_text(path, "lease expiry", &expires)?;
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

/// A `runs` row (selected with [`RUN_COLUMNS`]) as a summary. `alive` is judged at `now`.
pub(crate) fn summary_from_row(
    row: &SqliteRow,
    path: &Path,
    local_host: &str,
    now: Timestamp,
) -> Result<RunSummary, StoreError> {
    let id: String = get(row, path, "id")?;
    let status: String = get(row, path, "status")?;
    let Some(status) = RunStatus::parse(&status) else {
        return Err(corrupt(
            path,
            format!("run {id} has an unknown status {status:?}"),
        ));
    };
    let created_at: String = get(row, path, "created_at")?;
    let updated_at: String = get(row, path, "updated_at")?;
    let event_count: i64 = get(row, path, "event_count")?;
    let renewed: Option<String> = get(row, path, "lease_renewed_at")?;
    let renewed_at = renewed
        .map(|t| ts_from_text(path, "lease renewal", &t))
        .transpose()?;
    let holder = lease_from_row(row, path)?.map(|(_, holder, expires_at)| HolderInfo {
        alive: expires_at > now && !holder_is_dead(&holder, local_host),
        holder,
        expires_at,
        renewed_at,
    });
    Ok(RunSummary {
        goal: get(row, path, "goal")?,
        workspace: get(row, path, "workspace")?,
        status,
        created_at: ts_from_text(path, "run creation", &created_at)?,
        updated_at: ts_from_text(path, "run update", &updated_at)?,
        event_count: from_db_int(path, "event count", event_count)?,
        holder,
        queued: get(row, path, "queued")?,
        id: RunId::from_string(id),
    })
}

/// An `events` row (`seq, at, payload`) as a journal record.
pub(crate) fn record_from_row(
    row: &SqliteRow,
    path: &Path,
    run_id: &RunId,
) -> Result<EventRecord, StoreError> {
    let seq: i64 = get(row, path, "seq")?;
    let seq = from_db_int(path, "event sequence number", seq)?;
    let at: String = get(row, path, "at")?;
    let payload: &str = get(row, path, "payload")?;
    let event: Event = serde_json::from_str(payload).map_err(|e| {
        corrupt(
            path,
            format!("event #{seq} of run {run_id} cannot be read: {e}"),
        )
    })?;
    Ok(EventRecord {
        run_id: run_id.clone(),
        seq,
        at: ts_from_text(path, &format!("event #{seq} of run {run_id}"), &at)?,
        event,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::ts_to_text;

    #[test]
    fn timestamps_are_fixed_width_and_round_trip() {
        let path = Path::new("x.db");
        for ts in [
            Timestamp::new(0, 0).unwrap(),
            Timestamp::new(1_700_000_000, 120_000).unwrap(),
        ] {
            let text = ts_to_text(ts);
            assert_eq!(text.len(), "1970-01-01T00:00:00.000000000Z".len(), "{text}");
            assert_eq!(ts_from_text(path, "t", &text).unwrap(), ts);
        }
        let earlier = ts_to_text(Timestamp::new(5, 900_000_000).unwrap());
        let later = ts_to_text(Timestamp::new(6, 1).unwrap());
        assert!(earlier < later);
    }
}
