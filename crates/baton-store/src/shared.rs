//! Pieces both backends share: the on-disk text form of times and counts, lease tokens, whether
//! a lease may be taken, why a fenced append was refused, a store URL without its password. (An append's batch, checked and
//! made into its row, is `commit::prepare_batch`.)

use baton_core::{EventRecord, RunId};
use jiff::Timestamp;
use jiff::fmt::temporal::DateTimePrinter;
use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

use crate::process::holder_is_dead;
use crate::{Holder, Lease, StoreError};

/// RFC 3339 in UTC with exactly nine fractional digits: fixed width, so that comparing the
/// strings (as `ORDER BY created_at` does) compares the times.
pub(crate) fn ts_to_text(ts: Timestamp) -> String {
    DateTimePrinter::new()
        .precision(Some(9))
        .timestamp_to_string(&ts)
}

/// Counts and sequence numbers are u64 in the API and BIGINT in the schema; no run gets near
/// 2^63 events, so saturating is only a guard against nonsense input.
pub(crate) fn to_db_int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// When a lease taken or renewed at `now` expires (never, for a TTL past the end of time).
pub(crate) fn lease_expiry(ttl: std::time::Duration, now: Timestamp) -> Timestamp {
    now.checked_add(ttl).unwrap_or(Timestamp::MAX)
}

/// A lease token: unique per acquisition, so a holder that lost the lease can never match the
/// new holder's token, even if it is the same process acquiring again.
pub(crate) fn new_token() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

/// Whether `run_id`'s lease, as read (`None`: no lease), may be taken at `now` by someone on
/// `local_host`: only an expired lease, or one whose holder died on this machine (no need to
/// wait out the TTL then). Not even the holding process may take it again: two engines (or
/// workers) in one process must not both drive a run.
pub(crate) fn check_lease_free(
    run_id: &RunId,
    current: Option<(String, Holder, Timestamp)>,
    now: Timestamp,
    local_host: &str,
) -> Result<(), StoreError> {
    if let Some((_, current, expires_at)) = current {
        let free = expires_at <= now || holder_is_dead(&current, local_host);
        if !free {
            return Err(StoreError::Locked {
                run_id: run_id.clone(),
                holder: current.describe(),
                expires_at,
            });
        }
    }
    Ok(())
}

/// Why a fenced append starting at `first` wrote nothing, from the run's row as read afterwards
/// (its lease token and event count; `None`: no such run): the run is gone, its lease is
/// someone else's now, or the batch does not start where the journal ends. `None` when the row
/// explains nothing; the backend then reports what it knows. The explanation of a refusal that
/// already happened, not a decision.
pub(crate) fn refusal(
    lease: &Lease,
    first: u64,
    row: Option<(Option<String>, u64)>,
) -> Option<StoreError> {
    let run_id = lease.run_id.clone();
    match row {
        None => Some(StoreError::NotFound { run_id }),
        Some((token, _)) if token.as_deref() != Some(lease.token.as_str()) => {
            Some(StoreError::LeaseLost { run_id })
        }
        Some((_, expected)) if expected != first => Some(StoreError::SequenceConflict {
            run_id,
            expected,
            got: first,
        }),
        Some(_) => None,
    }
}

/// sqlx's migrator over a backend's migrations, listed as (version, description, SQL) in the
/// order of `migrations/BACKEND/`: the SQL is compiled in, so no migration file is read at run
/// time.
pub(crate) fn migrator(migrations: &'static [(i64, &str, &str)]) -> Migrator {
    Migrator::with_migrations(
        migrations
            .iter()
            .map(|(version, description, sql)| {
                Migration::new(
                    *version,
                    (*description).into(),
                    MigrationType::Simple,
                    sql.into_sql_str(),
                    false,
                )
            })
            .collect(),
    )
}

/// `url` with the password (in the user info, or a `password=` query parameter) replaced by
/// `***`, for error messages and logs: a store URL may carry a credential.
pub(crate) fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let mut out = url[..scheme_end].to_owned();
    match authority.rfind('@') {
        Some(at) => {
            let user_info = &authority[..at];
            match user_info.split_once(':') {
                Some((user, _password)) => out.push_str(&format!("{user}:***")),
                None => out.push_str(user_info),
            }
            out.push_str(&authority[at..]);
        }
        None => out.push_str(authority),
    }
    let tail = &rest[authority_end..];
    match tail.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            let pairs: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                    _ => pair.to_owned(),
                })
                .collect();
            out.push_str(&pairs.join("&"));
        }
        None => out.push_str(tail),
    }
    out
}

/// The first sequence number missing from `records`, read as the events from `from_seq` on.
/// The primary key makes seq unique; a gap means rows were deleted behind the store's back.
pub(crate) fn journal_gap(
    run_id: &RunId,
    records: &[EventRecord],
    from_seq: u64,
) -> Option<String> {
    records.iter().enumerate().find_map(|(offset, record)| {
        let expected = from_seq.saturating_add(offset as u64);
        (record.seq != expected)
            .then(|| format!("the journal of run {run_id} has no event #{expected}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_explained_by_the_run_row_read_after_it() {
        let lease = Lease {
            run_id: RunId::new(),
            token: "mine".into(),
            expires_at: Timestamp::MAX,
        };
        let explain = |row: Option<(Option<&str>, u64)>| {
            refusal(&lease, 7, row.map(|(t, n)| (t.map(str::to_owned), n)))
        };
        assert!(matches!(explain(None), Some(StoreError::NotFound { .. })));
        for other in [None, Some("theirs")] {
            assert!(matches!(
                explain(Some((other, 7))),
                Some(StoreError::LeaseLost { .. })
            ));
        }
        assert!(matches!(
            explain(Some((Some("mine"), 9))),
            Some(StoreError::SequenceConflict {
                expected: 9,
                got: 7,
                ..
            })
        ));
        assert!(explain(Some((Some("mine"), 7))).is_none());
    }

    #[test]
    fn passwords_are_redacted_from_urls() {
        let cases = [
            (
                "postgres://baton:s3cr%3At@db.example:5432/runs?sslmode=require",
                "postgres://baton:***@db.example:5432/runs?sslmode=require",
            ),
            ("postgresql://u:p@w:rd@h/db", "postgresql://u:***@h/db"),
            (
                "postgres://postgres@127.0.0.1:5432/test",
                "postgres://postgres@127.0.0.1:5432/test",
            ),
            (
                "postgres://h/db?user=u&password=hunter2&options[search_path]=s",
                "postgres://h/db?user=u&password=***&options[search_path]=s",
            ),
            ("postgres://h", "postgres://h"),
            ("not a url", "not a url"),
        ];
        for (url, redacted) in cases {
            assert_eq!(redact_url(url), redacted, "{url}");
        }
    }
}
