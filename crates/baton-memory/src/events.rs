//! Indexing journal events.

use std::collections::HashMap;

use baton_core::handle::{MODEL_KIND, NOTE_KIND, handle};
use baton_core::{Event, EventRecord};
use baton_index::subwords::subwords;
use sqlx::{Sqlite, Transaction};

use crate::error::db;
use crate::{GOAL_KIND, MemoryError, MemoryIndex, UNKNOWN_TOOL_KIND};

/// Tool-call arguments longer than this are cut in a tool result's title (the full arguments
/// are indexed with the assistant message that made the call).
const MAX_TITLE_ARGUMENT_CHARS: usize = 2_000;

/// One searchable piece of history.
struct HistoryDoc {
    handle: String,
    title: String,
    body: String,
}

impl MemoryIndex {
    /// Adds the journal events not indexed yet and returns how many documents were added.
    ///
    /// Incremental: the index remembers the highest `seq` indexed per run and skips events at
    /// or below it, so passing the whole journal again (or overlapping slices) adds nothing
    /// twice. Events are taken in `(run, seq)` order whatever their order in the slice; the
    /// journal has no gaps, and an event below the remembered seq is never indexed later.
    ///
    /// Indexed, each under the handle of its event's seq ([`baton_core::handle`]):
    /// - `run_started`: the goal, as `goal#SEQ`;
    /// - `model_call_finished`: the assistant text and each tool call's name and arguments, as
    ///   `model#SEQ`;
    /// - `tool_call_finished`: the result, as `TOOLNAME#SEQ`, the name (and arguments, in the
    ///   title) taken from the `tool_call_started` with the same call id — from this slice or
    ///   an earlier one; `tool#SEQ` if it was never seen;
    /// - `note_added`: the note, as `note#SEQ`.
    ///
    /// Entries from several runs may share an index; a hit names its run.
    pub async fn index_events(&self, events: &[EventRecord]) -> Result<usize, MemoryError> {
        let _writer = self.write_lock.lock().await;
        let mut sorted: Vec<&EventRecord> = events.iter().collect();
        sorted.sort_by(|a, b| (a.run_id.as_str(), a.seq).cmp(&(b.run_id.as_str(), b.seq)));

        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(db("starting to index events"))?;
        // Highest seq per run: read once per run, written back at the end.
        let mut last_seq: HashMap<&str, Option<u64>> = HashMap::new();
        let mut added = 0;
        for record in sorted {
            let run = record.run_id.as_str();
            let last = match last_seq.get(run) {
                Some(last) => *last,
                None => {
                    let stored: Option<i64> =
                        sqlx::query_scalar("SELECT last_seq FROM runs WHERE run_id = ?")
                            .bind(run)
                            .fetch_optional(&mut *tx)
                            .await
                            .map_err(db("reading the indexed position of a run"))?;
                    let stored = stored.and_then(|s| u64::try_from(s).ok());
                    last_seq.insert(run, stored);
                    stored
                }
            };
            if last.is_some_and(|last| record.seq <= last) {
                continue;
            }
            last_seq.insert(run, Some(record.seq));
            if let Some(doc) = document(&mut tx, record).await? {
                insert(&mut tx, run, &doc).await?;
                added += 1;
            }
        }
        for (run, last) in last_seq {
            let Some(last) = last.and_then(|l| i64::try_from(l).ok()) else {
                continue;
            };
            sqlx::query(
                "INSERT INTO runs (run_id, last_seq) VALUES (?1, ?2) \
                 ON CONFLICT (run_id) DO UPDATE SET last_seq = max(last_seq, ?2)",
            )
            .bind(run)
            .bind(last)
            .execute(&mut *tx)
            .await
            .map_err(db("recording the indexed position of a run"))?;
        }
        tx.commit().await.map_err(db("committing indexed events"))?;
        Ok(added)
    }
}

/// The searchable document of an event, if it has one. Records started tool calls on the way.
async fn document(
    tx: &mut Transaction<'static, Sqlite>,
    record: &EventRecord,
) -> Result<Option<HistoryDoc>, MemoryError> {
    let seq = record.seq;
    let doc = match &record.event {
        Event::RunStarted { goal, .. } => HistoryDoc {
            handle: handle(GOAL_KIND, seq),
            title: GOAL_KIND.into(),
            body: goal.clone(),
        },
        Event::ModelCallFinished { message, .. } => {
            let mut body = message.content.clone().unwrap_or_default();
            for call in &message.tool_calls {
                if !body.is_empty() {
                    body.push('\n');
                }
                body.push_str(&call.name);
                body.push(' ');
                body.push_str(&call.arguments);
            }
            HistoryDoc {
                handle: handle(MODEL_KIND, seq),
                title: String::new(),
                body,
            }
        }
        Event::ToolCallStarted {
            call_id,
            name,
            arguments,
            ..
        } => {
            let arguments: String = arguments.chars().take(MAX_TITLE_ARGUMENT_CHARS).collect();
            sqlx::query(
                "INSERT INTO tool_calls (run_id, call_id, name, arguments) VALUES (?, ?, ?, ?) \
                 ON CONFLICT (run_id, call_id) DO UPDATE \
                 SET name = excluded.name, arguments = excluded.arguments",
            )
            .bind(record.run_id.as_str())
            .bind(call_id)
            .bind(name)
            .bind(arguments)
            .execute(&mut **tx)
            .await
            .map_err(db("recording a started tool call"))?;
            return Ok(None);
        }
        Event::ToolCallFinished {
            call_id, result, ..
        } => {
            let started: Option<(String, String)> = sqlx::query_as(
                "SELECT name, arguments FROM tool_calls WHERE run_id = ? AND call_id = ?",
            )
            .bind(record.run_id.as_str())
            .bind(call_id)
            .fetch_optional(&mut **tx)
            .await
            .map_err(db("looking up a started tool call"))?;
            let (name, arguments) =
                started.unwrap_or_else(|| (UNKNOWN_TOOL_KIND.to_owned(), String::new()));
            HistoryDoc {
                handle: handle(&name, seq),
                title: format!("{name} {arguments}"),
                body: result.content.clone(),
            }
        }
        Event::NoteAdded { text } => HistoryDoc {
            handle: handle(NOTE_KIND, seq),
            title: String::new(),
            body: text.clone(),
        },
        _ => return Ok(None),
    };
    if doc.body.trim().is_empty() && doc.title.trim().is_empty() {
        return Ok(None);
    }
    Ok(Some(doc))
}

async fn insert(
    tx: &mut Transaction<'static, Sqlite>,
    run: &str,
    doc: &HistoryDoc,
) -> Result<(), MemoryError> {
    let id = sqlx::query(
        // Rowids only ever increase: FTS5 writes a new segment whenever a rowid is lower than
        // the previous one.
        "INSERT INTO doc_meta (run_id, handle) VALUES (?, ?)",
    )
    .bind(run)
    .bind(&doc.handle)
    .execute(&mut **tx)
    .await
    .map_err(db("indexing a history entry"))?
    .last_insert_rowid();
    sqlx::query("INSERT INTO docs (rowid, title, body, parts) VALUES (?, ?, ?, ?)")
        .bind(id)
        .bind(&doc.title)
        .bind(&doc.body)
        .bind(subwords(&format!("{}\n{}", doc.title, doc.body)))
        .execute(&mut **tx)
        .await
        .map_err(db("indexing a history entry"))?;
    Ok(())
}
