//! Where PostgreSQL rows come from, for errors: the server's URL, and the server's clock. The
//! decoding itself is shared with SQLite (`crate::rows`).

use jiff::Timestamp;

use super::connect::classify;
use crate::StoreError;
use crate::rows::Origin;

pub(crate) use crate::rows::RUN_COLUMNS;

/// Errors about a row name the store's URL.
impl Origin for &str {
    fn corrupt(&self, detail: String) -> StoreError {
        corrupt(self, detail)
    }

    fn failed(&self, context: &str, error: sqlx::Error) -> StoreError {
        classify(self, context, error)
    }
}

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
