//! Conversions between rows of the Postgres schema and the store's types.
//!
//! As for SQLite, everything read back is validated: a value this crate could not have written
//! is reported as [`StoreError::CorruptData`] naming the store, never papered over.

use baton_core::{Event, EventRecord, RunId, RunStatus};
use jiff::Timestamp;
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::connect::classify;
use crate::process::holder_is_dead;
use crate::{Holder, HolderInfo, RunSummary, StoreError};

/// Columns of `runs` that [`summary_from_row`] reads, in a form to paste into a SELECT.
pub(crate) const RUN_COLUMNS: &str = "id, goal, workspace, status, created_at, updated_at, \
     event_count, lease_token, lease_host, lease_pid, lease_pid_start, lease_expires_at, lease_worker, lease_renewed_at, queued";

/// The database server's clock in microseconds since the epoch, as a SELECT expression. Leases
/// are judged by this one clock, so holders on machines whose clocks disagree still agree on
/// whether a lease has expired.
pub(crate) const SERVER_NOW: &str = "(extract(epoch from clock_timestamp()) * 1000000)::bigint";

/// The server's clock as the stored text form (`ts_to_text`'s fixed width: nine fractional
/// digits, of which Postgres fills six), for columns written inside a statement.
pub(crate) const SERVER_NOW_TEXT: &str =
    "to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"000Z\"')";

pub(crate) fn corrupt(url: &str, detail: String) -> StoreError {
    StoreError::CorruptData {
        store: url.to_owned(),
        detail,
    }
}

pub(crate) fn ts_from_micros(url: &str, micros: i64) -> Result<Timestamp, StoreError> {
    Timestamp::from_microsecond(micros)
        .map_err(|e| corrupt(url, format!("the server's clock reads {micros} µs: {e}")))
}

pub(crate) fn ts_from_text(url: &str, what: &str, text: &str) -> Result<Timestamp, StoreError> {
    text.parse()
        .map_err(|e| corrupt(url, format!("{what} has an unreadable time {text:?}: {e}")))
}

pub(crate) fn from_db_int(url: &str, what: &str, n: i64) -> Result<u64, StoreError> {
    u64::try_from(n).map_err(|_| corrupt(url, format!("{what} is negative ({n})")))
}

pub(crate) fn get<'r, T>(row: &'r PgRow, url: &str, column: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    row.try_get(column)
        .map_err(|e| classify(url, &format!("reading column {column}"), e))
}

/// The lease recorded in a row, if any: its token, holder and expiry.
pub(crate) fn lease_from_row(
    row: &PgRow,
    url: &str,
) -> Result<Option<(String, Holder, Timestamp)>, StoreError> {
    let Some(token) = get::<Option<String>>(row, url, "lease_token")? else {
        return Ok(None);
    };
    let host: Option<String> = get(row, url, "lease_host")?;
    let pid: Option<i64> = get(row, url, "lease_pid")?;
    let pid_start: Option<i64> = get(row, url, "lease_pid_start")?;
    let expires: Option<String> = get(row, url, "lease_expires_at")?;
    let worker_id: Option<String> = get(row, url, "lease_worker")?;
    let (Some(host), Some(pid), Some(expires)) = (host, pid, expires) else {
        return Err(corrupt(
            url,
            "a lease is recorded without its holder or expiry".into(),
        ));
    };
    let pid =
        u32::try_from(pid).map_err(|_| corrupt(url, format!("lease pid {pid} is invalid")))?;
    let pid_start = pid_start
        .map(|s| from_db_int(url, "lease pid start", s))
        .transpose()?;
    let expires_at = ts_from_text(url, "lease expiry", &expires)?;
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

/// A `runs` row (selected with [`RUN_COLUMNS`]) as a summary; `alive` is judged at `now`, the
/// server's time.
pub(crate) fn summary_from_row(
    row: &PgRow,
    url: &str,
    local_host: &str,
    now: Timestamp,
) -> Result<RunSummary, StoreError> {
    let id: String = get(row, url, "id")?;
    let status: String = get(row, url, "status")?;
    let Some(status) = RunStatus::parse(&status) else {
        return Err(corrupt(
            url,
            format!("run {id} has an unknown status {status:?}"),
        ));
    };
    let created_at: String = get(row, url, "created_at")?;
    let updated_at: String = get(row, url, "updated_at")?;
    let event_count: i64 = get(row, url, "event_count")?;
    let renewed: Option<String> = get(row, url, "lease_renewed_at")?;
    let renewed_at = renewed
        .map(|t| ts_from_text(url, "lease renewal", &t))
        .transpose()?;
    let holder = lease_from_row(row, url)?.map(|(_, holder, expires_at)| HolderInfo {
        alive: expires_at > now && !holder_is_dead(&holder, local_host),
        holder,
        expires_at,
        renewed_at,
    });
    Ok(RunSummary {
        goal: get(row, url, "goal")?,
        workspace: get(row, url, "workspace")?,
        status,
        created_at: ts_from_text(url, "run creation", &created_at)?,
        updated_at: ts_from_text(url, "run update", &updated_at)?,
        event_count: from_db_int(url, "event count", event_count)?,
        holder,
        queued: get(row, url, "queued")?,
        id: RunId::from_string(id),
    })
}

/// An `events` row (`seq, at, payload`) as a journal record.
pub(crate) fn record_from_row(
    row: &PgRow,
    url: &str,
    run_id: &RunId,
) -> Result<EventRecord, StoreError> {
    let seq: i64 = get(row, url, "seq")?;
    let seq = from_db_int(url, "event sequence number", seq)?;
    let at: String = get(row, url, "at")?;
    let payload: &str = get(row, url, "payload")?;
    let event: Event = serde_json::from_str(payload).map_err(|e| {
        corrupt(
            url,
            format!("event #{seq} of run {run_id} cannot be read: {e}"),
        )
    })?;
    Ok(EventRecord {
        run_id: run_id.clone(),
        seq,
        at: ts_from_text(url, &format!("event #{seq} of run {run_id}"), &at)?,
        event,
    })
}
