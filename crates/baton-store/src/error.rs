use std::path::PathBuf;

use baton_core::RunId;

/// Everything a store operation can fail with.
///
/// Callers decide between "try again" and "stop and tell the user" with
/// [`StoreError::is_retryable`]; the messages are written for the person at the terminal, so
/// they say what happened and what to do, and name the file or the server (its URL with any
/// password redacted) when one is involved.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another live process holds the run's lease.
    #[error(
        "run {run_id} is being run by {holder} (lease until {expires_at}); wait for it or stop it"
    )]
    Locked {
        run_id: RunId,
        holder: String,
        expires_at: jiff::Timestamp,
    },

    /// The lease presented is no longer the run's lease: it expired and another process took
    /// the run over. The holder must stop working on the run (its writes are refused).
    #[error(
        "lost the lease on run {run_id}: another process took the run over, so this one must \
         stop working on it"
    )]
    LeaseLost { run_id: RunId },

    #[error("no run {run_id} in this store")]
    NotFound { run_id: RunId },

    #[error("a run with id {run_id} already exists")]
    AlreadyExists { run_id: RunId },

    /// An append did not continue the journal exactly where it ends: another writer appended
    /// first, or the caller skipped or repeated an event.
    #[error(
        "journal of run {run_id} continues at event #{expected}, but the append starts at \
         #{got}; nothing was written"
    )]
    SequenceConflict {
        run_id: RunId,
        expected: u64,
        got: u64,
    },

    /// The records handed to an append are not a contiguous batch of the leased run.
    #[error("refused to append to run {run_id}: {detail}; nothing was written")]
    InvalidRecords { run_id: RunId, detail: String },

    /// The database file is damaged or is not a baton store. Opening never modifies such a
    /// file, so the user can move it aside and keep it for recovery.
    #[error(
        "the store {} is damaged or is not a baton database ({detail}); nothing was changed. \
         Move it aside (for example `mv {0} {0}.damaged`) and baton will start a new store; \
         the old file stays available for recovery",
        .path.display()
    )]
    Corrupt { path: PathBuf, detail: String },

    /// The database was migrated by a newer baton; an older one must not write to it.
    /// `store` is the file path or the server URL (password redacted).
    #[error(
        "the store {store} has schema version {found}, but this baton knows only up to \
         {supported}; nothing was changed. Upgrade baton to use this store"
    )]
    NewerSchema {
        store: String,
        found: i64,
        supported: i64,
    },

    /// A database server holds rows this crate could not have written (an unknown status, a
    /// gap in a journal). Nothing was changed; `store` is the URL with any password redacted.
    #[error("the store {store} holds data this baton cannot read ({detail}); nothing was changed")]
    CorruptData { store: String, detail: String },

    /// The database server could not be reached (nothing listening, connection dropped, server
    /// restarting). Retryable: the same call may work once the server is back.
    #[error(
        "cannot reach the store at {url}: {source}; check that the server is running and the \
         URL is right"
    )]
    Unreachable {
        url: String,
        #[source]
        source: sqlx::Error,
    },

    /// The server answered but refused us: wrong password, unknown user or database, no
    /// permission. Not retryable: the URL or the server's configuration must change.
    #[error("the store at {url} refused the connection: {detail}")]
    Refused { url: String, detail: String },

    /// `--store` / `BATON_STORE` named something that is neither a Postgres URL nor a file.
    #[error(
        "unsupported store {url}: use postgres://USER@HOST/DB (or postgresql://…), or a path \
         to a SQLite file"
    )]
    UnsupportedUrl { url: String },

    /// The operation needs the shared PostgreSQL store (the worker queue): the embedded SQLite
    /// store serves `baton run` / `baton resume` on one machine only.
    #[error(
        "{what} needs a shared PostgreSQL store (--store postgres://USER@HOST/DB); the store \
         {store} is a single-machine SQLite file: use `baton run` there instead"
    )]
    NeedsPostgres { what: String, store: String },

    #[error("database error while {context}: {source}")]
    Database {
        context: String,
        #[source]
        source: sqlx::Error,
    },

    /// A statement on the SQLite store's append connection failed (see `sqlite/appender.rs`:
    /// appends go through rusqlite, everything else through sqlx).
    #[error("database error while {context}: {source}")]
    Sqlite {
        context: String,
        #[source]
        source: rusqlite::Error,
    },

    #[error("could not serialize event #{seq} of run {run_id}: {source}")]
    Serialization {
        run_id: RunId,
        seq: u64,
        #[source]
        source: serde_json::Error,
    },

    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The workspace's state directory could not be made ready (or its old layout moved).
    #[error(transparent)]
    State(#[from] baton_state::StateError),
}

/// SQLite primary result codes that mean "another connection is in the way right now".
const SQLITE_BUSY: i64 = 5;
const SQLITE_LOCKED: i64 = 6;

impl StoreError {
    /// Whether the same call may succeed if made again a little later with nothing else
    /// changed: a database busy past its timeout, a pool that had no free connection, a
    /// database server that is unreachable or restarting, or a Postgres transaction aborted
    /// as a serialization failure or deadlock victim.
    ///
    /// [`StoreError::Locked`] is deliberately not retryable: another process is working on
    /// the run and may do so for hours, so the caller should tell the user rather than spin.
    /// Corruption, lost leases, missing runs and sequence conflicts never fix themselves.
    pub fn is_retryable(&self) -> bool {
        match self {
            StoreError::Database { source, .. } => sqlx_error_is_retryable(source),
            StoreError::Sqlite { source, .. } => matches!(
                source.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
            ),
            StoreError::Io { source, .. } => io_kind_is_retryable(source.kind()),
            StoreError::Unreachable { .. } => true,
            StoreError::State(e) => e.is_retryable(),
            StoreError::Locked { .. }
            | StoreError::LeaseLost { .. }
            | StoreError::NotFound { .. }
            | StoreError::AlreadyExists { .. }
            | StoreError::SequenceConflict { .. }
            | StoreError::InvalidRecords { .. }
            | StoreError::Corrupt { .. }
            | StoreError::NewerSchema { .. }
            | StoreError::CorruptData { .. }
            | StoreError::Refused { .. }
            | StoreError::UnsupportedUrl { .. }
            | StoreError::NeedsPostgres { .. }
            | StoreError::Serialization { .. } => false,
        }
    }
}

/// Postgres SQLSTATEs after which the same transaction, run again, may well succeed:
/// serialization failure, deadlock, lock not available, too many connections, and the server
/// shutting down or restarting (class 08 and 57P0x are matched by prefix below).
const PG_RETRYABLE_STATES: &[&str] = &[
    "40001", "40P01", "55P03", "53300", "57P01", "57P02", "57P03",
];

fn sqlx_error_is_retryable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Database(db) => match db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
        {
            Some(pg) => {
                let state = pg.code();
                state.starts_with("08") || PG_RETRYABLE_STATES.contains(&state)
            }
            None => sqlite_primary_code(db.as_ref())
                .is_some_and(|c| c == SQLITE_BUSY || c == SQLITE_LOCKED),
        },
        sqlx::Error::PoolTimedOut => true,
        sqlx::Error::Io(io) => io_kind_is_retryable(io.kind()),
        _ => false,
    }
}

fn io_kind_is_retryable(kind: std::io::ErrorKind) -> bool {
    use std::io::ErrorKind;
    matches!(
        kind,
        ErrorKind::Interrupted | ErrorKind::TimedOut | ErrorKind::WouldBlock
    )
}

/// The primary SQLite result code of a database error. sqlx reports the extended code (for
/// example 517, SQLITE_BUSY_SNAPSHOT); its low byte is the primary code.
pub(crate) fn sqlite_primary_code(db: &dyn sqlx::error::DatabaseError) -> Option<i64> {
    db.code()
        .and_then(|c| c.parse::<i64>().ok())
        .map(|c| c & 0xff)
}
