//! The `--json` stream: one versioned JSON object per journaled event on stdout, and the run's
//! totals after the event that ends it (docs/events.md).

use std::io::Write;
use std::sync::Mutex;

use baton_core::{Event, EventRecord, RunObserver, RunState};
use serde::Serialize;

use crate::events::parallel_task;

/// Version of the JSONL event schema (docs/events.md). Bumped on incompatible changes.
pub const EVENT_SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
struct StreamLine<'a> {
    v: u32,
    #[serde(flatten)]
    record: &'a EventRecord,
}

/// One JSON object per journaled event on stdout.
pub struct JsonLines {
    out: Mutex<std::io::Stdout>,
}

impl Default for JsonLines {
    fn default() -> Self {
        Self::new()
    }
}

impl JsonLines {
    /// Writes to this process's stdout.
    pub fn new() -> Self {
        JsonLines {
            out: Mutex::new(std::io::stdout()),
        }
    }
}

/// One event as the versioned JSON line of `--json` (docs/events.md).
pub fn json_line(record: &EventRecord) -> String {
    serde_json::to_string(&StreamLine {
        v: EVENT_SCHEMA_VERSION,
        record,
    })
    .unwrap_or_else(|e| {
        format!("{{\"v\":{EVENT_SCHEMA_VERSION},\"type\":\"encoding_error\",\"error\":\"{e}\"}}")
    })
}

impl RunObserver for JsonLines {
    fn on_event(&self, record: &EventRecord, state: &RunState) {
        if let Ok(mut out) = self.out.lock() {
            // A closed stdout (e.g. `| head`) must not stop the run.
            let _ = writeln!(out, "{}", json_line(record));
            if let Some(totals) = run_totals(record, state) {
                let _ = writeln!(out, "{totals}");
            }
            let _ = out.flush();
        }
    }
}

/// After the event that ends a run (or this process's part of it), one more line with the
/// totals: `{"v":1,"type":"run_totals","run_id":…,"end":"finished","turns":…,…}`. It is not a
/// journal event (the journal has them all); it saves a script from adding them up.
pub fn run_totals(record: &EventRecord, state: &RunState) -> Option<String> {
    let (end, reason) = match &record.event {
        Event::RunFinished { .. } => ("finished", None),
        Event::RunFailed { .. } => ("failed", None),
        Event::RunPaused { reason, .. } => ("paused", Some(reason.as_str())),
        _ => return None,
    };
    if parallel_task(state).is_some() {
        return None;
    }
    let priced = state
        .model_calls_finished
        .saturating_sub(state.usage.unpriced_calls);
    let value = serde_json::json!({
        "v": EVENT_SCHEMA_VERSION,
        "type": "run_totals",
        "run_id": record.run_id.to_string(),
        "end": end,
        "reason": reason,
        "summary": state.finish_summary,
        "turns": state.turns_started,
        "model_calls": state.model_calls_finished,
        "tokens": {
            "prompt": state.usage.prompt_tokens,
            "cached": state.usage.cached_prompt_tokens,
            "completion": state.usage.completion_tokens,
        },
        // Unknown (null) while no call is priced; a lower bound while some are not.
        "cost_usd": (priced > 0 || state.usage.unpriced_calls == 0).then_some(state.usage.cost_usd),
        "unpriced_calls": state.usage.unpriced_calls,
        "running_ms": state.running_ms,
    });
    Some(value.to_string())
}
