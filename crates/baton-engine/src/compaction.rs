//! Compaction in the run loop: when to start one, and running its summary call.
//!
//! The decision (which entries, why) is journaled as `compaction_started` before the summary
//! call, and the summary as `compaction_finished` after it; a crash in between repeats only the
//! summary call. Replay applies the journaled summary, so a resumed run rebuilds exactly the
//! context the live run had.

use std::time::Instant;

use baton_context::compact::{compaction_cut, compaction_request, keep_recent_turns, left_out};
use baton_context::tokens::Estimate;
use baton_core::{CompactionTrigger, ErrorClass, Event, PauseReason, RunState};
use baton_model::{ModelError, RetrySchedule};

use crate::Engine;
use crate::EngineError;
use crate::engine::elapsed_ms;
use crate::failure::pause_for_failure;
use crate::journal::Journal;

/// Overflow-driven compactions allowed before the same model call gives up: the first keeps
/// the profile's recent turns, the second keeps none.
const MAX_OVERFLOW_COMPACTIONS: u32 = 2;
/// Times a summary request may itself overflow (each leaves out more old history).
const MAX_SUMMARY_OVERFLOWS: u32 = 3;

impl Engine {
    /// Starts a compaction if the next request's estimate passes the threshold. Returns whether
    /// one started (the caller then lets the loop run it before the model call).
    pub(crate) async fn compact_before_call(
        &self,
        journal: &mut Journal,
        turn: u32,
        estimate: Estimate,
    ) -> Result<bool, EngineError> {
        let state = journal.state();
        let Some(settings) = state.settings.as_ref() else {
            return Ok(false);
        };
        if estimate.estimated <= settings.context.compaction_threshold() {
            return Ok(false);
        }
        let Some(replaced) = keep_recent_turns(state).and_then(|keep| compaction_cut(state, keep))
        else {
            // Nothing left to summarise: send it and let the server decide.
            return Ok(false);
        };
        self.start_compaction(
            journal,
            turn,
            replaced,
            CompactionTrigger::Threshold,
            estimate.estimated,
        )
        .await?;
        Ok(true)
    }

    /// The entries to replace after the server said the prompt overflowed, or `None` when
    /// compaction is off, cannot shrink the history further, or already failed to help.
    pub(crate) fn overflow_compaction_cut(&self, state: &RunState) -> Option<u32> {
        let keep = keep_recent_turns(state)?;
        match state.overflow_compactions {
            0 => compaction_cut(state, keep).or_else(|| compaction_cut(state, 0)),
            n if n < MAX_OVERFLOW_COMPACTIONS => compaction_cut(state, 0),
            _ => None,
        }
    }

    pub(crate) async fn start_compaction(
        &self,
        journal: &mut Journal,
        turn: u32,
        replaced: u32,
        trigger: CompactionTrigger,
        estimated_prompt_tokens: u64,
    ) -> Result<(), EngineError> {
        journal
            .record(Event::CompactionStarted {
                turn,
                replaced,
                trigger,
                estimated_prompt_tokens,
            })
            .await
    }

    /// Runs (one attempt of) the pending compaction's summary call.
    pub(crate) async fn compact(
        &self,
        journal: &mut Journal,
        turn: u32,
        attempt: u32,
        schedule: &mut RetrySchedule,
    ) -> Result<(), EngineError> {
        let state = journal.state();
        let Some(pending) = state.compaction.clone() else {
            return Ok(());
        };
        let left_out = left_out(&state.history, pending.replaced, pending.overflows);
        let request = compaction_request(state, pending.replaced, left_out)
            .ok_or_else(|| EngineError::Internal("no settings in run state".into()))?;
        let estimate = self.counter.estimate(state, &request).estimated;
        let count = pending.replaced as usize;
        let (first_seq, last_seq) = match (state.history.first(), state.history.get(count - 1)) {
            (Some(first), Some(last)) => (first.seq, last.seq),
            _ => {
                return Err(EngineError::Internal(
                    "compaction past the history's end".into(),
                ));
            }
        };
        let started = Instant::now();
        let Some(outcome) = self.send(&request, estimate).await else {
            return Ok(()); // abandoned by a stop: resume runs the compaction again
        };
        let outcome = outcome.and_then(|reply| {
            let summary = reply.message.content.clone().unwrap_or_default();
            if summary.trim().is_empty() {
                Err(ModelError::new(
                    ErrorClass::BadResponse,
                    "the model answered the compaction request without a summary",
                ))
            } else {
                Ok((summary, reply))
            }
        });
        match outcome {
            Ok((summary, reply)) => {
                let cost_usd = self.price(&reply, &request.model);
                journal
                    .record(Event::CompactionFinished {
                        turn,
                        summary: self.redactor.redact(&summary),
                        replaced: pending.replaced,
                        first_seq,
                        last_seq,
                        left_out,
                        usage: reply.usage,
                        cost_usd,
                        served_model: reply.served_model,
                        duration_ms: elapsed_ms(started),
                    })
                    .await
            }
            Err(error) => {
                self.compaction_failed(journal, turn, attempt, error, pending.overflows, schedule)
                    .await
            }
        }
    }

    async fn compaction_failed(
        &self,
        journal: &mut Journal,
        turn: u32,
        attempt: u32,
        error: ModelError,
        overflows: u32,
        schedule: &mut RetrySchedule,
    ) -> Result<(), EngineError> {
        let message = self.redactor.redact(&error.to_string());
        let failures_so_far = journal.state().consecutive_model_failures;
        let breaker_trips = failures_so_far.saturating_add(1) >= self.parts.breaker_failures;
        let delay = match error.class {
            // Retried at once with more of the oldest history left out.
            ErrorClass::ContextOverflow if overflows + 1 < MAX_SUMMARY_OVERFLOWS => {
                Some(std::time::Duration::ZERO)
            }
            ErrorClass::ContextOverflow => None,
            _ if breaker_trips => None,
            _ => schedule.next_delay(&error),
        };
        journal
            .record(Event::CompactionFailed {
                turn,
                attempt,
                class: error.class,
                message: message.clone(),
                retry_in_ms: delay.map(|d| d.as_millis() as u64),
            })
            .await?;
        if let Some(delay) = delay {
            self.parts.stop.race(tokio::time::sleep(delay)).await;
            return Ok(());
        }
        let event = match error.class {
            ErrorClass::ContextOverflow => Event::RunPaused {
                reason: PauseReason::ContextOverflow,
                detail: format!(
                    "the compaction's summary request overflowed {MAX_SUMMARY_OVERFLOWS} times \
                     ({message}) — `baton resume --context-window N` with the server's real window"
                ),
            },
            class => pause_for_failure(class, &message, attempt, failures_so_far, breaker_trips),
        };
        self.end_run(journal, event).await
    }
}
