//! What a run does when a model call (or a compaction's summary call) fails for good: the
//! pause that names the cause and how to continue. Every such stop is a pause, never a
//! failure, because each of these causes can be fixed and the run resumed.

use baton_core::{ErrorClass, Event, PauseReason};

/// The pause event for a failure that will not be retried. `failures_so_far` counts the
/// consecutive failures before this one; `breaker_trips` says the circuit breaker opened.
pub(crate) fn pause_for_failure(
    class: ErrorClass,
    message: &str,
    attempt: u32,
    failures_so_far: u32,
    breaker_trips: bool,
) -> Event {
    match class {
        _ if breaker_trips && class.is_retryable() => Event::RunPaused {
            reason: PauseReason::ModelUnavailable,
            detail: format!(
                "circuit breaker open after {} consecutive failed model calls (last: {message}) — \
                 `baton resume` tries again",
                failures_so_far.saturating_add(1)
            ),
        },
        ErrorClass::InvalidRequest => Event::RunPaused {
            reason: PauseReason::ModelRejected,
            detail: format!(
                "the model server rejected the request: {message} — check the model name and \
                 base URL, then `baton resume --model NAME` or `--base-url URL`"
            ),
        },
        ErrorClass::Auth | ErrorClass::QuotaExhausted => Event::RunPaused {
            reason: PauseReason::ModelAuth,
            detail: format!("{message} — fix the API key or quota, then `baton resume`"),
        },
        ErrorClass::ContextOverflow => Event::RunPaused {
            reason: PauseReason::ContextOverflow,
            detail: format!(
                "{message} — the conversation no longer fits the model's context window even \
                 after compaction; `baton resume --context-window N` with the server's real \
                 window, or a model with a larger one"
            ),
        },
        ErrorClass::RateLimited
        | ErrorClass::Overloaded
        | ErrorClass::Transient
        | ErrorClass::BadResponse => Event::RunPaused {
            reason: PauseReason::ModelUnavailable,
            detail: format!(
                "gave up after {attempt} attempts: {message} — `baton resume` tries again"
            ),
        },
    }
}
