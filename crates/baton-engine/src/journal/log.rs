//! One log line per journaled event.

use baton_core::{Event, EventRecord};

/// One log line per journaled event: what it was and the numbers that matter, never contents
/// (arguments, outputs and messages are in the journal; logs stay small and free of them).
pub(super) fn log_record(record: &EventRecord) {
    let run = record.run_id.as_str();
    let seq = record.seq;
    match &record.event {
        Event::ModelCallStarted {
            turn,
            call,
            attempt,
            ..
        } => tracing::info!(run, seq, turn, call, attempt, "model call started"),
        Event::ModelCallFailed {
            turn,
            call,
            attempt,
            class,
            retry_in_ms,
            ..
        } => tracing::info!(
            run,
            seq,
            turn,
            call,
            attempt,
            class = ?class,
            retry_in_ms = *retry_in_ms,
            "model call failed"
        ),
        Event::ModelCallFinished {
            turn,
            call,
            usage,
            cost_usd,
            duration_ms,
            ..
        } => tracing::info!(
            run,
            seq,
            turn,
            call,
            duration_ms,
            prompt_tokens = usage.as_ref().map(|u| u.prompt_tokens),
            completion_tokens = usage.as_ref().map(|u| u.completion_tokens),
            cost_usd = *cost_usd,
            "model call finished"
        ),
        Event::ToolCallStarted {
            turn,
            call_id,
            name,
            effect,
            ..
        } => {
            tracing::info!(run, seq, turn, call_id, tool = name, effect = ?effect, "tool call started")
        }
        Event::ToolCallFinished {
            turn,
            call_id,
            result,
            duration_ms,
        } => tracing::info!(
            run,
            seq,
            turn,
            call_id,
            outcome = ?result.outcome,
            exit_code = result.exit_code,
            duration_ms,
            "tool call finished"
        ),
        Event::CompactionStarted {
            turn,
            replaced,
            trigger,
            estimated_prompt_tokens,
        } => tracing::info!(
            run,
            seq,
            turn,
            replaced,
            trigger = ?trigger,
            estimated_prompt_tokens,
            "compaction started"
        ),
        Event::CompactionFailed {
            attempt,
            class,
            retry_in_ms,
            ..
        } => {
            tracing::info!(run, seq, attempt, class = ?class, retry_in_ms = *retry_in_ms, "compaction failed")
        }
        Event::CompactionFinished {
            replaced,
            left_out,
            duration_ms,
            ..
        } => tracing::info!(
            run,
            seq,
            replaced,
            left_out,
            duration_ms,
            "compaction finished"
        ),
        Event::RunPaused { reason, .. } => tracing::info!(run, seq, reason = ?reason, "run paused"),
        Event::RunFailed { .. } => tracing::info!(run, seq, "run failed"),
        other => tracing::info!(run, seq, kind = other.kind(), "journaled"),
    }
}
