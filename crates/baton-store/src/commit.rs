//! How both backends store a journal: one row per commit, not per event.
//!
//! An append is one batch of events made durable together (the engine's group commit), and a
//! batch is stored as one row of the `journal` table: the run, the seq of its first event, an
//! encoding, and a body. The body is the batch's events as a JSON array of `{"at": …,
//! "event": …}` (the time as RFC 3339 with nine fractional digits, the event as
//! `baton_core::Event` serializes), compressed as one zstd frame.
//!
//! Why (issue 20: store bytes per turn ≤ 2× the turn's content): a row per event repeated the run
//! id, the kind and the time as text in every row and in the primary-key index, and an event
//! repeated what the one before it holds — a tool call's intent carries the arguments the
//! model's reply, in the same commit, already holds. One compressed frame per commit stores the
//! arguments once and the row overhead once per commit.
//!
//! Encodings:
//! - [`Encoding::Json`] (0): the array as UTF-8 text, uncompressed. What migration 0005 made of
//!   each event row of a journal written before it (a batch of one).
//! - [`Encoding::JsonZstd`] (1): the array compressed as one zstd frame with
//!   `commit-dictionary-1.json` as its dictionary. What appends write.
//!
//! The dictionary is a commit's worth of typical events, so that what every commit repeats —
//! the keys, the event kinds, the times' common prefix — costs a few bytes instead of a few
//! hundred; zstd reads it as raw content. Frames written with it can only be read with it, so
//! it never changes: a better one would be another encoding (a test pins its digest).

use std::cell::RefCell;

use baton_core::{Event, EventRecord, RunId, RunStatus};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::StoreError;
use crate::shared::ts_to_text;

/// zstd's level: 3 (its default) compresses a commit of a few kilobytes in microseconds.
const LEVEL: i32 = 3;

/// The dictionary of [`Encoding::JsonZstd`] frames (see the module's doc): never to change.
const DICTIONARY: &[u8] = include_bytes!("commit-dictionary-1.json");

/// What a commit's body holds, as the `encoding` column names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Encoding {
    Json = 0,
    JsonZstd = 1,
}

impl Encoding {
    fn from_column(value: i64) -> Option<Encoding> {
        match value {
            0 => Some(Encoding::Json),
            1 => Some(Encoding::JsonZstd),
            _ => None,
        }
    }
}

/// One event in a commit's body, as written.
#[derive(Serialize)]
struct Written<'a> {
    at: String,
    event: &'a Event,
}

/// One event in a commit's body, as read: the event is parsed on its own, so that an error
/// names its seq.
#[derive(Deserialize)]
struct Read<'a> {
    at: String,
    #[serde(borrow)]
    event: &'a RawValue,
}

/// A batch's row.
pub(crate) struct CommitRow {
    pub first_seq: i64,
    pub encoding: i64,
    pub body: Vec<u8>,
}

thread_local! {
    /// A compression context per thread: making one per commit would cost more than the
    /// compression.
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// The body of the commit holding `records` (a checked, non-empty batch of `run_id`).
pub(crate) fn encode(run_id: &RunId, records: &[EventRecord]) -> Result<CommitRow, StoreError> {
    let first = records.first().map_or(0, |r| r.seq);
    let written: Vec<Written> = records
        .iter()
        .map(|r| Written {
            at: ts_to_text(r.at),
            event: &r.event,
        })
        .collect();
    let json = serde_json::to_vec(&written).map_err(|source| StoreError::Serialization {
        run_id: run_id.clone(),
        seq: first,
        source,
    })?;
    let compressed = compress(&json);
    // zstd fails only on allocation or a bad parameter; the JSON text is then stored as it is.
    let (encoding, body) = match compressed {
        Ok(body) => (Encoding::JsonZstd, body),
        Err(_) => (Encoding::Json, json),
    };
    Ok(CommitRow {
        first_seq: crate::shared::to_db_int(first),
        encoding: encoding as i64,
        body,
    })
}

/// `bytes` as one zstd frame (with [`DICTIONARY`]), with this thread's compression context.
pub(crate) fn compress(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    COMPRESSOR.with(|cell| {
        let mut cell = cell.borrow_mut();
        let compressor = match cell.as_mut() {
            Some(compressor) => compressor,
            None => cell.insert(zstd::bulk::Compressor::with_dictionary(LEVEL, DICTIONARY)?),
        };
        compressor.compress(bytes)
    })
}

/// A frame [`compress`] wrote, with this thread's decompression context (making one per commit,
/// dictionary loaded, cost more than decompressing: a resume reads thousands of commits).
fn decompress(frame: &[u8]) -> std::io::Result<Vec<u8>> {
    // The size the frame declares, bounded: a damaged header must not ask for gigabytes.
    let size = match zstd::zstd_safe::get_frame_content_size(frame) {
        Ok(Some(size)) if size <= MAX_DECOMPRESSED => size as usize,
        Ok(Some(size)) => {
            return Err(std::io::Error::other(format!(
                "the frame declares {size} bytes, more than a commit can hold"
            )));
        }
        _ => return Err(std::io::Error::other("the frame declares no size")),
    };
    DECOMPRESSOR.with(|cell| {
        let mut cell = cell.borrow_mut();
        let decompressor = match cell.as_mut() {
            Some(decompressor) => decompressor,
            None => cell.insert(zstd::bulk::Decompressor::with_dictionary(DICTIONARY)?),
        };
        decompressor.decompress(frame, size)
    })
}

/// The most a frame may decompress to: far above any commit or state checkpoint.
const MAX_DECOMPRESSED: u64 = 1 << 30;

/// The suffix of a checkpoint's stored format when the store compressed its state.
pub(crate) const ZSTD_FORMAT_SUFFIX: &str = "+zstd";

/// A state checkpoint as stored: its state compressed, and its format marked so (a checkpoint
/// whose compression failed is stored as it is). Checkpoints are a run's state, kilobytes to
/// megabytes of JSON rewritten every thousand events.
pub(crate) fn pack_checkpoint(format: &str, state: &str) -> (String, Vec<u8>) {
    match compress(state.as_bytes()) {
        Ok(packed) => (format!("{format}{ZSTD_FORMAT_SUFFIX}"), packed),
        Err(_) => (format.to_owned(), state.as_bytes().to_vec()),
    }
}

/// A stored checkpoint's format and state as the engine wrote them; an error says what is wrong.
pub(crate) fn unpack_checkpoint(format: &str, stored: Vec<u8>) -> Result<(String, String), String> {
    let (format, bytes) = match format.strip_suffix(ZSTD_FORMAT_SUFFIX) {
        Some(format) => (
            format,
            decompress(&stored)
                .map_err(|e| format!("the state checkpoint cannot be decompressed: {e}"))?,
        ),
        None => (format, stored),
    };
    let state = String::from_utf8(bytes)
        .map_err(|_| "the state checkpoint is not UTF-8 text".to_owned())?;
    Ok((format.to_owned(), state))
}

/// The events with a seq in `wanted` of the commit of `run_id` that starts at `first_seq`; an
/// error says what is wrong with it (the caller reports it as corrupt data). Only the wanted
/// events are parsed, so a damaged event does not hide the ones before it.
pub(crate) fn decode(
    run_id: &RunId,
    first_seq: u64,
    encoding: i64,
    body: &[u8],
    wanted: std::ops::Range<u64>,
) -> Result<Vec<EventRecord>, String> {
    let commit = || format!("the commit of run {run_id} at event #{first_seq}");
    let json = match Encoding::from_column(encoding) {
        Some(Encoding::Json) => std::borrow::Cow::Borrowed(body),
        Some(Encoding::JsonZstd) => std::borrow::Cow::Owned(
            decompress(body).map_err(|e| format!("{} cannot be decompressed: {e}", commit()))?,
        ),
        None => {
            return Err(format!(
                "{} has encoding {encoding}, which this baton does not know (a newer baton \
                 wrote it?)",
                commit()
            ));
        }
    };
    let read: Vec<Read> =
        serde_json::from_slice(&json).map_err(|e| format!("{} cannot be read: {e}", commit()))?;
    if read.is_empty() {
        return Err(format!("{} holds no events", commit()));
    }
    read.into_iter()
        .enumerate()
        .map(|(i, r)| (first_seq.saturating_add(i as u64), r))
        .filter(|(seq, _)| wanted.contains(seq))
        .map(|(seq, r)| {
            let event: Event = serde_json::from_str(r.event.get())
                .map_err(|e| format!("event #{seq} of run {run_id} cannot be read: {e}"))?;
            let at: jiff::Timestamp = r.at.parse().map_err(|e: jiff::Error| {
                format!(
                    "event #{seq} of run {run_id} has an unreadable time {:?}: {e}",
                    r.at
                )
            })?;
            Ok(EventRecord {
                run_id: run_id.clone(),
                seq,
                at,
                event,
            })
        })
        .collect()
}

/// An append's batch, checked and serialized before the append takes any lock (other writers
/// wait on it).
pub(crate) struct PreparedBatch {
    /// The seq the batch starts at: where the journal must end for it to be written.
    pub first: u64,
    /// How many events the batch holds.
    pub count: u64,
    /// The run's status after the batch, when one of its events changes it.
    pub status: Option<RunStatus>,
    /// The batch as one `journal` row.
    pub row: CommitRow,
}

/// `records` as both backends append them; `None` when there is nothing to write.
pub(crate) fn prepare_batch(
    run_id: &RunId,
    records: &[EventRecord],
) -> Result<Option<PreparedBatch>, StoreError> {
    let first = check_batch(run_id, records)?;
    if records.is_empty() {
        return Ok(None);
    }
    Ok(Some(PreparedBatch {
        first,
        count: records.len() as u64,
        status: records.iter().rev().find_map(|r| r.event.status_change()),
        row: encode(run_id, records)?,
    }))
}

/// Checks that `records` are one contiguous batch of `run_id`'s journal; returns the first seq.
fn check_batch(run_id: &RunId, records: &[EventRecord]) -> Result<u64, StoreError> {
    let first = records.first().map_or(0, |r| r.seq);
    for (i, record) in records.iter().enumerate() {
        if record.run_id != *run_id {
            return Err(StoreError::InvalidRecords {
                run_id: run_id.clone(),
                detail: format!("event #{} belongs to run {}", record.seq, record.run_id),
            });
        }
        let expected = first.saturating_add(i as u64);
        if record.seq != expected {
            return Err(StoreError::SequenceConflict {
                run_id: run_id.clone(),
                expected,
                got: record.seq,
            });
        }
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use baton_core::{AssistantMessage, ToolCall, ToolEffect, ToolResult};
    use jiff::Timestamp;

    use super::*;

    fn records(run_id: &RunId, first: u64) -> Vec<EventRecord> {
        let arguments = serde_json::json!({"path": "src/main.rs", "text": "fn main() {}\n"});
        let events = vec![
            Event::ModelCallFinished {
                turn: 3,
                call: 4,
                message: AssistantMessage {
                    content: Some("Writing it — \"quoted\", \\ and é.".into()),
                    tool_calls: vec![ToolCall {
                        id: "call_1".into(),
                        name: "write_file".into(),
                        arguments: arguments.to_string(),
                    }],
                    ..Default::default()
                },
                usage: None,
                cost_usd: Some(0.1 + 0.2),
                finish_reason: Some("tool_calls".into()),
                served_model: None,
                duration_ms: 12,
            },
            Event::ToolCallStarted {
                turn: 3,
                call_id: "call_1".into(),
                name: "write_file".into(),
                arguments: arguments.to_string(),
                effect: ToolEffect::Mutating,
            },
            Event::ToolCallFinished {
                turn: 3,
                call_id: "call_1".into(),
                result: ToolResult::success("wrote 13 bytes"),
                duration_ms: 1,
            },
        ];
        events
            .into_iter()
            .enumerate()
            .map(|(i, event)| EventRecord {
                run_id: run_id.clone(),
                seq: first + i as u64,
                at: Timestamp::new(1_700_000_000 + i as i64, 123_456_789).unwrap(),
                event,
            })
            .collect()
    }

    #[test]
    fn a_commit_round_trips_exactly_and_compressed() {
        let run_id = RunId::from_string("r1");
        let written = records(&run_id, 41);
        let row = encode(&run_id, &written).unwrap();
        assert_eq!(
            (row.first_seq, row.encoding),
            (41, Encoding::JsonZstd as i64)
        );
        let read = decode(&run_id, 41, row.encoding, &row.body, 0..u64::MAX).unwrap();
        assert_eq!(read, written);
        let middle = decode(&run_id, 41, row.encoding, &row.body, 42..43).unwrap();
        assert_eq!(middle, written[1..2]);
        // The arguments the intent repeats cost next to nothing in the compressed body.
        let json = serde_json::to_vec(
            &written
                .iter()
                .map(|r| Written {
                    at: ts_to_text(r.at),
                    event: &r.event,
                })
                .collect::<Vec<_>>(),
        )
        .unwrap();
        assert!(
            row.body.len() < json.len(),
            "{} vs {}",
            row.body.len(),
            json.len()
        );
    }

    #[test]
    fn a_migrated_event_row_reads_as_a_commit_of_one() {
        let run_id = RunId::from_string("r1");
        let record = records(&run_id, 6).remove(1);
        // What migration 0005 builds from an event row: text pasted around the stored payload.
        let body = format!(
            "[{{\"at\":\"{}\",\"event\":{}}}]",
            ts_to_text(record.at),
            serde_json::to_string(&record.event).unwrap()
        );
        let read = decode(
            &run_id,
            7,
            Encoding::Json as i64,
            body.as_bytes(),
            0..u64::MAX,
        )
        .unwrap();
        assert_eq!(read, vec![record]);
    }

    /// Frames already stored can only be read with this very dictionary.
    #[test]
    fn the_dictionary_never_changes() {
        use sha2::{Digest, Sha256};
        let digest: String = Sha256::digest(DICTIONARY)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            digest,
            "c8b3cd10bcc28e3c6097ea747a919d2abc24d3750ddc7485dc8bef285decbb48"
        );
    }

    #[test]
    fn a_checkpoint_round_trips_compressed_and_a_plain_one_reads_too() {
        let state = r#"{"history":[{"seq":1,"text":"fn main() {}"}]}"#.repeat(50);
        let (format, stored) = pack_checkpoint("run-state-v2", &state);
        assert_eq!(format, "run-state-v2+zstd");
        assert!(stored.len() < state.len() / 4, "{}", stored.len());
        assert_eq!(
            unpack_checkpoint(&format, stored).unwrap(),
            ("run-state-v2".to_owned(), state.clone())
        );
        assert_eq!(
            unpack_checkpoint("run-state-v2", state.clone().into_bytes()).unwrap(),
            ("run-state-v2".to_owned(), state)
        );
        let error = unpack_checkpoint("run-state-v2+zstd", b"not zstd".to_vec()).unwrap_err();
        assert!(error.contains("cannot be decompressed"), "{error}");
    }

    #[test]
    fn damage_is_reported_with_the_commit_or_the_event() {
        let run_id = RunId::from_string("r1");
        let row = encode(&run_id, &records(&run_id, 5)).unwrap();
        let mut damaged = row.body.clone();
        let middle = damaged.len() / 2;
        damaged.truncate(middle);
        let error = decode(&run_id, 5, row.encoding, &damaged, 0..u64::MAX).unwrap_err();
        assert!(error.contains("commit of run r1 at event #5"), "{error}");
        let error = decode(&run_id, 5, 9, &row.body, 0..u64::MAX).unwrap_err();
        assert!(error.contains("encoding 9"), "{error}");
        let future =
            br#"[{"at":"2026-01-01T00:00:00.000000000Z","event":{"type":"turn_started","turn":1}},
            {"at":"2026-01-01T00:00:00.000000000Z","event":{"type":"from_the_future"}}]"#;
        let error = decode(&run_id, 5, 0, future, 0..u64::MAX).unwrap_err();
        assert!(
            error.contains("event #6 of run r1 cannot be read"),
            "{error}"
        );
        // The event before the damaged one still reads.
        assert_eq!(decode(&run_id, 5, 0, future, 5..6).unwrap().len(), 1);
        let error = decode(&run_id, 5, 0, b"[]", 0..u64::MAX).unwrap_err();
        assert!(error.contains("holds no events"), "{error}");
        let error = decode(
            &run_id,
            5,
            0,
            br#"[{"at":"yesterday","event":{"type":"turn_started","turn":1}}]"#,
            0..u64::MAX,
        )
        .unwrap_err();
        assert!(error.contains("unreadable time"), "{error}");
    }
}
