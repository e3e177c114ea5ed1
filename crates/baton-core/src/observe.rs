//! Watching a run: the journaled events as they are recorded and the model's output as it
//! streams. Observers are for display (a terminal, the JSONL stream, traces); what the run does
//! never depends on them.

use std::sync::Arc;

use crate::{EventRecord, RunState};

/// Incremental output of a streamed response, for live display only: what is journaled is the
/// final [`ModelReply`], never a partial stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StreamDelta {
    Text(String),
    /// A piece of the model's readable reasoning (shown abridged; journaled whole with the
    /// reply).
    Reasoning(String),
    /// A piece of the tool call at `index`: `name` when this piece carries it (usually the
    /// first), and the next fragment of its arguments text (possibly empty).
    ToolCall {
        index: u32,
        name: Option<String>,
        arguments: String,
    },
}

/// Receives every journaled event (for the JSONL stream and the terminal) and live stream deltas.
pub trait RunObserver: Send + Sync {
    /// `record` was journaled; `state` is the run's state after it.
    fn on_event(&self, record: &EventRecord, state: &RunState);
    /// A piece of a streamed reply arrived (never journaled: the finished reply is).
    fn on_delta(&self, _delta: &StreamDelta) {}
}

/// Several observers as one: each gets every event and delta, in the order given.
pub struct Fanout(pub Vec<Arc<dyn RunObserver>>);

impl RunObserver for Fanout {
    fn on_event(&self, record: &EventRecord, state: &RunState) {
        for observer in &self.0 {
            observer.on_event(record, state);
        }
    }
    fn on_delta(&self, delta: &StreamDelta) {
        for observer in &self.0 {
            observer.on_delta(delta);
        }
    }
}
