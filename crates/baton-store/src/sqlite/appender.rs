//! The journal's appends, on SQLite connections of their own: the caller's thread when the
//! database is free, a thread of their own when it is not.
//!
//! Why not sqlx, as every other statement of the store: sqlx runs each query on its
//! connection's worker thread, reached through the pool and channels, and an append — one
//! transaction with a fsync — paid about 0.26 ms of those hand-offs on the 2-core CI machine,
//! against 0.09 ms for SQLite's own work and the fsync (a loop of the same transactions through
//! rusqlite on the same disk). Two appends a turn made that most of a journaled turn's cost
//! (`cargo bench -p baton-engine --bench overhead`).
//!
//! **On the caller's thread first.** Even one hand-off to a thread of our own — a message to
//! it, and the caller's task woken with the answer — cost about 0.08 ms an append on that
//! machine (two thread wake-ups of a virtual CPU), a third of a commit. So an append first runs
//! right where it is called, on a connection of its own whose busy timeout is zero: it blocks
//! the caller's thread for the transaction and its fsync only (the disk's commit latency), never
//! for a wait. When that cannot start at once — another append is using that connection, or
//! another connection (another run's process) holds the database's write lock — the append goes
//! to the append thread, whose connection waits for the lock up to the store's busy timeout,
//! without blocking the caller.
//!
//! Both libraries link the same SQLite (libsqlite3-sys, which sqlx builds bundled), so these
//! connections and the pool's share the file's locks and WAL as any connections do.
//!
//! An append is never cancelled halfway: on the caller's thread it runs to its end before the
//! call returns, and the thread finishes whatever it was sent — an append whose caller stopped
//! waiting still commits or rolls back whole, as it would have with the caller there.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, mpsc};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, TransactionBehavior, params};
use tokio::sync::oneshot;

use crate::commit::CommitRow;

/// The fence, and the end of the journal moved, in one statement: unless the lease token is the
/// current one and the batch starts where the journal ends, `event_count` becomes NULL, which its
/// NOT NULL constraint refuses. A run that does not exist matches no row.
const FENCE: &str = "UPDATE runs SET \
     event_count = CASE WHEN lease_token = ?1 AND event_count = ?2 THEN event_count + ?3 END, \
     status = COALESCE(?4, status), updated_at = ?5 WHERE id = ?6";

const INSERT: &str =
    "INSERT INTO journal (run_id, first_seq, encoding, body) VALUES (?1, ?2, ?3, ?4)";

/// One append: the run's row is fenced and moved on, and the commit's row inserted, in one
/// transaction.
pub(super) struct Batch {
    pub run_id: String,
    pub token: String,
    pub first: i64,
    /// How many events the batch holds.
    pub count: i64,
    /// The run's status after the batch, when one of its events changes it.
    pub status: Option<&'static str>,
    pub updated_at: String,
    pub row: CommitRow,
}

/// Why an append wrote nothing.
#[derive(Debug)]
pub(super) enum AppendFailure {
    /// The run's row or a constraint refused the batch: a lost lease, a sequence conflict, a
    /// missing run. The run's row says which; the database's error, when there was one.
    Refused(Option<rusqlite::Error>),
    /// Anything else SQLite reported (busy past the timeout, disk full, I/O).
    Failed(rusqlite::Error),
    /// The store was closed, or its append thread is gone.
    Stopped,
}

enum Message {
    Append(Batch, oneshot::Sender<Result<(), AppendFailure>>),
    Close(oneshot::Sender<()>),
}

/// The caller's-thread connection and the handle to the append thread. Dropping every handle
/// (every clone of the store) ends the thread and closes both connections, as
/// [`Appender::close`] does.
#[derive(Debug)]
pub(super) struct Appender {
    /// The connection appends use on the caller's thread (busy timeout zero): taken only when
    /// free, never waited for.
    here: Mutex<Writer>,
    sender: mpsc::Sender<Message>,
}

/// What became of an append tried on the caller's thread.
enum Here {
    /// It ran: committed, refused or failed.
    Ran(Result<(), AppendFailure>),
    /// It could not start at once (the connection is in use, or the database's write lock is
    /// held): nothing was written; the append thread takes it.
    Busy(Batch),
}

impl Appender {
    /// Opens the append connection to the (existing, migrated) database at `path` on a new
    /// thread; fails as opening it fails.
    pub(super) async fn start(
        path: &Path,
        busy_timeout: Duration,
    ) -> Result<Appender, rusqlite::Error> {
        let (sender, receiver) = mpsc::channel();
        let (opened_tx, opened) = oneshot::channel();
        let here = Mutex::new(Writer::new(path.to_owned(), Duration::ZERO));
        let path = path.to_owned();
        let spawned = std::thread::Builder::new()
            .name("baton-sqlite-append".into())
            .spawn(move || {
                let mut writer = Writer::new(path, busy_timeout);
                let first = writer.connection().map(|_| ());
                let failed = first.is_err();
                if opened_tx.send(first).is_err() || failed {
                    return;
                }
                writer.serve(&receiver);
            });
        if let Err(e) = spawned {
            return Err(thread_error(&e));
        }
        match opened.await {
            Ok(Ok(())) => Ok(Appender { here, sender }),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(thread_error(&"the append thread ended while opening")),
        }
    }

    /// Appends `batch`; returns once it is durable or was rolled back.
    pub(super) async fn append(&self, batch: Batch) -> Result<(), AppendFailure> {
        let batch = match self.append_here(batch) {
            Here::Ran(outcome) => return outcome,
            Here::Busy(batch) => batch,
        };
        let (reply, answer) = oneshot::channel();
        self.sender
            .send(Message::Append(batch, reply))
            .map_err(|_| AppendFailure::Stopped)?;
        answer.await.unwrap_or(Err(AppendFailure::Stopped))
    }

    /// Runs `batch` on the caller's thread if it can start at once (see the module's doc).
    fn append_here(&self, batch: Batch) -> Here {
        // Poisoned: a panic inside rusqlite; the thread's connection is the safe way on.
        let Ok(mut writer) = self.here.try_lock() else {
            return Here::Busy(batch);
        };
        match writer.append(&batch) {
            Err(AppendFailure::Failed(e)) if is_busy(&e) => Here::Busy(batch),
            outcome => Here::Ran(outcome),
        }
    }

    /// Closes the append connections (and ends the thread) once the appends sent before are
    /// done. Appends after this fail with [`AppendFailure::Stopped`].
    pub(super) async fn close(&self) {
        // An append running here holds the lock until it is done.
        self.here
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .close();
        let (reply, done) = oneshot::channel();
        if self.sender.send(Message::Close(reply)).is_ok() {
            // Err: the thread was already gone; either way it is closed.
            let _ = done.await;
        }
    }
}

/// A rusqlite error for a failure that is not SQLite's (the thread could not start).
fn thread_error(detail: &dyn std::fmt::Display) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
        Some(format!(
            "could not start the store's append thread: {detail}"
        )),
    )
}

/// A connection for appends, reopened after a failure left it unusable.
#[derive(Debug)]
struct Writer {
    path: PathBuf,
    busy_timeout: Duration,
    conn: Option<Connection>,
    /// Closed by [`Appender::close`]: appends fail with [`AppendFailure::Stopped`].
    closed: bool,
}

impl Writer {
    fn new(path: PathBuf, busy_timeout: Duration) -> Writer {
        Writer {
            path,
            busy_timeout,
            conn: None,
            closed: false,
        }
    }

    fn close(&mut self) {
        self.conn = None;
        self.closed = true;
    }

    fn serve(&mut self, receiver: &mpsc::Receiver<Message>) {
        while let Ok(message) = receiver.recv() {
            match message {
                Message::Append(batch, reply) => {
                    let outcome = self.append(&batch);
                    // Err: the caller stopped waiting; the append is done either way.
                    let _ = reply.send(outcome);
                }
                Message::Close(reply) => {
                    self.close();
                    let _ = reply.send(());
                    return;
                }
            }
        }
    }

    fn append(&mut self, batch: &Batch) -> Result<(), AppendFailure> {
        if self.closed {
            return Err(AppendFailure::Stopped);
        }
        let conn = self.connection().map_err(AppendFailure::Failed)?;
        let outcome = append_in(conn, batch);
        // A failed rollback (on an I/O error, say) can leave the connection inside the
        // transaction, where every later BEGIN would fail: start again on a new one.
        let stuck = outcome.is_err() && !conn.is_autocommit();
        if stuck {
            self.conn = None;
        }
        outcome
    }

    fn connection(&mut self) -> Result<&mut Connection, rusqlite::Error> {
        let conn = match self.conn.take() {
            Some(conn) => conn,
            None => open(&self.path, self.busy_timeout)?,
        };
        Ok(self.conn.insert(conn))
    }
}

/// WAL pages after which an append's commit folds the WAL back into the database file (SQLite's
/// default is 1,000). While the WAL grows, each commit's fsync also writes the file's new size
/// (on ext4 an append-and-fsync costs 0.2–0.3 ms where overwriting costs 0.12–0.17); once a
/// checkpoint has folded it in, the next commits overwrite the WAL from its start. At 100 pages
/// (~30 appends) a store reaches that regime after its first few turns rather than its first
/// ~1,300 appends, for one more fsync of the database file every ~30 appends.
const WAL_AUTOCHECKPOINT_PAGES: u32 = 100;

/// The connection with the settings every connection of the store has (see `open::connect`):
/// WAL, `synchronous = FULL` (a commit returns after its WAL frames are fsynced), foreign keys;
/// and the append connections' own WAL checkpoint threshold ([`WAL_AUTOCHECKPOINT_PAGES`]).
fn open(path: &Path, busy_timeout: Duration) -> Result<Connection, rusqlite::Error> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(busy_timeout)?;
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; \
         PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES};"
    ))?;
    Ok(conn)
}

fn append_in(conn: &mut Connection, batch: &Batch) -> Result<(), AppendFailure> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(AppendFailure::Failed)?;
    let fenced = tx
        .prepare_cached(FENCE)
        .and_then(|mut fence| {
            fence.execute(params![
                batch.token,
                batch.first,
                batch.count,
                batch.status,
                batch.updated_at,
                batch.run_id
            ])
        })
        .map_err(refused_or_failed)?;
    if fenced == 0 {
        // No such run; dropping `tx` rolls back.
        return Err(AppendFailure::Refused(None));
    }
    tx.prepare_cached(INSERT)
        .map_err(AppendFailure::Failed)?
        .execute(params![
            batch.run_id,
            batch.row.first_seq,
            batch.row.encoding,
            batch.row.body
        ])
        .map_err(refused_or_failed)?;
    // With synchronous = FULL, COMMIT returns after the WAL is fsynced.
    tx.commit().map_err(AppendFailure::Failed)
}

/// The database's write lock is held by another connection (or, opening, its schema is being
/// changed): with a busy timeout of zero, SQLite says so at once.
fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

fn refused_or_failed(error: rusqlite::Error) -> AppendFailure {
    if error.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) {
        AppendFailure::Refused(Some(error))
    } else {
        AppendFailure::Failed(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "r1";

    /// A database with the store's schema and one run whose lease token is "t".
    async fn database() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        let pool = super::super::open::connect(&path, Duration::from_secs(5))
            .await
            .unwrap();
        super::super::open::migrate(&pool, &path).await.unwrap();
        sqlx::query(
            "INSERT INTO runs (id, goal, workspace, status, created_at, updated_at, lease_token) \
             VALUES ('r1', 'g', '/w', 'running', 'c', 'u', 't')",
        )
        .execute(&pool)
        .await
        .unwrap();
        pool.close().await;
        (dir, path)
    }

    /// [`database`] with an appender started on it.
    async fn started() -> (tempfile::TempDir, PathBuf, Appender) {
        let (dir, path) = database().await;
        let appender = Appender::start(&path, Duration::from_secs(5))
            .await
            .unwrap();
        (dir, path, appender)
    }

    fn batch(token: &str, first: i64, n: i64) -> Batch {
        let run_id = baton_core::RunId::from_string(RUN);
        let records: Vec<baton_core::EventRecord> = (first..first + n)
            .map(|seq| baton_core::EventRecord {
                run_id: run_id.clone(),
                seq: seq as u64,
                at: jiff::Timestamp::now(),
                event: baton_core::Event::TurnStarted { turn: seq as u32 },
            })
            .collect();
        Batch {
            run_id: RUN.into(),
            token: token.into(),
            first,
            count: n,
            status: None,
            updated_at: "2026-12-06T00:00:00.000000000Z".into(),
            row: crate::commit::encode(&run_id, &records).unwrap(),
        }
    }

    fn journal(path: &Path) -> (i64, Vec<i64>) {
        let conn = Connection::open(path).unwrap();
        let count = conn
            .query_row("SELECT event_count FROM runs WHERE id = 'r1'", [], |r| {
                r.get(0)
            })
            .unwrap();
        let mut stmt = conn
            .prepare("SELECT first_seq, encoding, body FROM journal WHERE run_id = 'r1' ORDER BY first_seq")
            .unwrap();
        let run_id = baton_core::RunId::from_string(RUN);
        let seqs = stmt
            .query_map([], |r| {
                Ok((r.get::<_, i64>(0)?, r.get(1)?, r.get::<_, Vec<u8>>(2)?))
            })
            .unwrap()
            .map(Result::unwrap)
            .flat_map(|(first, encoding, body)| {
                crate::commit::decode(&run_id, first as u64, encoding, &body, 0..u64::MAX).unwrap()
            })
            .map(|record| record.seq as i64)
            .collect();
        (count, seqs)
    }

    #[tokio::test]
    async fn batches_land_whole_and_the_fence_refuses_the_rest() {
        let (_dir, path, appender) = started().await;
        appender.append(batch("t", 0, 3)).await.unwrap();
        appender.append(batch("t", 3, 1)).await.unwrap();
        // A stale token, a gap, a repeat: refused by the fence, nothing written.
        for (token, first) in [("old", 4), ("t", 5), ("t", 2)] {
            let refused = appender.append(batch(token, first, 2)).await;
            assert!(
                matches!(refused, Err(AppendFailure::Refused(Some(_)))),
                "{token} at {first}: {refused:?}"
            );
        }
        let mut missing = batch("t", 4, 1);
        missing.run_id = "nope".into();
        let refused = appender.append(missing).await;
        assert!(
            matches!(refused, Err(AppendFailure::Refused(None))),
            "{refused:?}"
        );
        // The connection is still good after the refusals.
        appender.append(batch("t", 4, 2)).await.unwrap();
        assert_eq!(journal(&path), (6, (0..6).collect()));
    }

    /// Durability rests on these settings being in force on the append connections too (and
    /// the turn's cost on the checkpoint threshold).
    #[tokio::test]
    async fn the_append_connection_uses_wal_full_sync_and_foreign_keys() {
        let (_dir, path) = database().await;
        let conn = open(&path, Duration::from_secs(5)).unwrap();
        let pragma = |name: &str| -> String {
            conn.query_row(&format!("PRAGMA {name}"), [], |r| {
                r.get::<_, rusqlite::types::Value>(0)
            })
            .map(|v| match v {
                rusqlite::types::Value::Integer(i) => i.to_string(),
                rusqlite::types::Value::Text(t) => t,
                other => format!("{other:?}"),
            })
            .unwrap()
        };
        assert_eq!(
            [
                pragma("journal_mode"),
                pragma("synchronous"),
                pragma("foreign_keys"),
                pragma("wal_autocheckpoint")
            ],
            ["wal", "2", "1", "100"]
        );
    }

    /// A caller that stops waiting after sending to the thread (a cancelled task) does not
    /// cancel the append: the batch lands whole. (What comes after it is ordered by the fence,
    /// not by the connections: an append that starts before it lands is refused.)
    #[tokio::test]
    async fn an_append_whose_caller_stopped_waiting_still_lands_whole() {
        let (_dir, path, appender) = started().await;
        {
            // The caller's-thread connection in use, so the append goes to the thread: polled
            // once (which sends the batch), then dropped.
            let _in_use = appender.here.lock().unwrap();
            let mut abandoned = std::pin::pin!(appender.append(batch("t", 0, 3)));
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            assert!(abandoned.as_mut().poll(&mut cx).is_pending());
        }
        let landed = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            journal(&path).0 == 3
        });
        assert!(landed, "the abandoned append never landed");
        appender.append(batch("t", 3, 2)).await.unwrap();
        appender.close().await;
        assert_eq!(journal(&path), (5, (0..5).collect()));
    }

    /// A free database: the append runs on the caller's thread.
    #[tokio::test]
    async fn an_append_on_a_free_database_runs_on_the_callers_thread() {
        let (_dir, path, appender) = started().await;
        assert!(matches!(
            appender.append_here(batch("t", 0, 2)),
            Here::Ran(Ok(()))
        ));
        assert_eq!(journal(&path), (2, vec![0, 1]));
    }

    /// While the caller's-thread connection is in use (another task's append), an append does
    /// not wait for it: it goes to the thread.
    #[tokio::test]
    async fn an_append_does_not_wait_for_the_callers_thread_connection() {
        let (_dir, path, appender) = started().await;
        {
            let _in_use = appender.here.lock().unwrap();
            assert!(matches!(
                appender.append_here(batch("t", 0, 1)),
                Here::Busy(_)
            ));
        }
        appender.append(batch("t", 0, 1)).await.unwrap();
        assert_eq!(journal(&path), (1, vec![0]));
    }

    /// Another connection (another process, say) holding the write lock: the append cannot
    /// start on the caller's thread, writes nothing there, and lands from the append thread once
    /// the lock is released, within the busy timeout.
    #[tokio::test]
    async fn an_append_waits_for_a_held_write_lock_on_its_thread() {
        let (_dir, path, appender) = started().await;
        let holder = Connection::open(&path).unwrap();
        holder.execute_batch("BEGIN IMMEDIATE").unwrap();
        assert!(matches!(
            appender.append_here(batch("t", 0, 1)),
            Here::Busy(_)
        ));
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            holder.execute_batch("COMMIT").unwrap();
        });
        appender.append(batch("t", 0, 2)).await.unwrap();
        release.join().unwrap();
        assert_eq!(journal(&path), (2, vec![0, 1]));
        // Free again: the next one runs on the caller's thread.
        assert!(matches!(
            appender.append_here(batch("t", 2, 1)),
            Here::Ran(Ok(()))
        ));
    }

    #[tokio::test]
    async fn a_closed_appender_refuses_to_append() {
        let (_dir, path, appender) = started().await;
        appender.append(batch("t", 0, 1)).await.unwrap();
        appender.close().await;
        let after = appender.append(batch("t", 1, 1)).await;
        assert!(matches!(after, Err(AppendFailure::Stopped)), "{after:?}");
        assert_eq!(journal(&path), (1, vec![0]));
    }

    #[tokio::test]
    async fn opening_a_missing_database_fails_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("absent.db");
        let error = Appender::start(&missing, Duration::from_secs(5)).await;
        assert!(error.is_err());
        assert!(
            !missing.exists(),
            "the append connection must not create a database"
        );
    }
}
