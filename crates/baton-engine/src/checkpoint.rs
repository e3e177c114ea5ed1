//! State checkpoints: a resume folds the events after the run's latest checkpoint instead of
//! the whole journal (issue 20: a 10,000-turn run took 290 ms and 158 MB to resume by replaying
//! its 60,000 events).
//!
//! A checkpoint is a cache, never the truth. It is used only when it is of this build's
//! [`STATE_FORMAT`], names this run, ends where its `seq` says, and serializes back to exactly
//! what was stored (a `RunState` that gained, lost or changed a field since would not); then the
//! events after it must fold onto it. Anything else — or a store that keeps no checkpoints —
//! and the whole journal is replayed, as before. The journal writes one after a commit once
//! [`CHECKPOINT_EVERY`] events have been made durable since the last.

use baton_core::{EventRecord, RunId, RunState, STATE_FORMAT, replay};
use baton_store::{Checkpoint, Store};

use crate::EngineError;

/// Events between checkpoints: the most a resume folds beyond its checkpoint. At ~6 events a
/// turn, one write of the state (a few hundred KB) every ~170 turns.
pub(crate) const CHECKPOINT_EVERY: u64 = 1_000;

/// A run's state as its journal says, with the seq of the checkpoint it started from (0: none).
pub(crate) async fn load_state(
    store: &dyn Store,
    run_id: &RunId,
) -> Result<(RunState, u64), EngineError> {
    if let Some(loaded) = from_checkpoint(store, run_id).await {
        return Ok(loaded);
    }
    let events = store.load_events(run_id).await?;
    let state = replay(&events).map_err(|source| EngineError::Replay {
        run_id: run_id.clone(),
        source,
    })?;
    Ok((state, 0))
}

/// A run's state, folded from its journal — from its latest state checkpoint when it has a
/// usable one. For callers outside a running engine that need to know where a run stands (a
/// resume's checks before it starts the engine).
pub async fn run_state(store: &dyn Store, run_id: &RunId) -> Result<RunState, EngineError> {
    match load_state(store, run_id).await? {
        (state, _) if state.run_id.is_some() => Ok(state),
        _ => Err(EngineError::EmptyRun(run_id.clone())),
    }
}

/// The checkpoint's state with the events after it folded on, or `None` when there is no usable
/// checkpoint (the caller replays the journal, which reports any real problem).
async fn from_checkpoint(store: &dyn Store, run_id: &RunId) -> Option<(RunState, u64)> {
    let checkpoint = match store.load_checkpoint(run_id).await {
        Ok(checkpoint) => checkpoint?,
        Err(e) => {
            tracing::debug!(run = run_id.as_str(), "no state checkpoint: {e}");
            return None;
        }
    };
    let Some(mut state) = decode(run_id, &checkpoint) else {
        tracing::debug!(
            run = run_id.as_str(),
            format = checkpoint.format,
            "ignoring a state checkpoint this build cannot use"
        );
        return None;
    };
    let tail: Vec<EventRecord> = store
        .read_events(run_id, checkpoint.seq, u64::MAX)
        .await
        .ok()?;
    for record in &tail {
        state.apply(record).ok()?;
    }
    Some((state, checkpoint.seq))
}

/// The checkpoint's state, if it is one this build wrote for this run.
fn decode(run_id: &RunId, checkpoint: &Checkpoint) -> Option<RunState> {
    if checkpoint.format != STATE_FORMAT {
        return None;
    }
    let stored: serde_json::Value = serde_json::from_str(&checkpoint.state).ok()?;
    let state: RunState = serde_json::from_value(stored.clone()).ok()?;
    // A field added with a default, or one dropped, would deserialize without complaint into a
    // state the events never produced; the round trip shows it.
    let again = serde_json::to_value(&state).ok()?;
    let usable = again == stored
        && state.next_seq == checkpoint.seq
        && state.run_id.as_ref() == Some(run_id);
    usable.then_some(state)
}

/// The checkpoint of `state` (after its events `0..next_seq`).
pub(crate) fn encode(state: &RunState) -> Result<Checkpoint, serde_json::Error> {
    Ok(Checkpoint {
        seq: state.next_seq,
        format: STATE_FORMAT.to_owned(),
        state: serde_json::to_string(state)?,
    })
}
