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
        | ErrorClass::BadResponse
        | ErrorClass::Unreachable => Event::RunPaused {
            reason: PauseReason::ModelUnavailable,
            detail: format!(
                "gave up after {attempt} attempts: {message} — `baton resume` tries again"
            ),
        },
    }
}

/// Attempts at a first model call that cannot connect before the run pauses (two quick
/// retries): nothing has ever answered at that address, so waiting minutes helps nobody.
pub(crate) const UNREACHABLE_ATTEMPTS: u32 = 3;

/// The quick retries' delay before attempt `attempt + 1`.
pub(crate) fn unreachable_retry_delay(attempt: u32) -> std::time::Duration {
    std::time::Duration::from_millis(500 * u64::from(attempt.max(1)))
}

/// The pause of a run whose first model call cannot connect, with what to check.
pub(crate) fn pause_unreachable(base_url: &str, message: &str, attempts: u32) -> Event {
    Event::RunPaused {
        reason: PauseReason::Unreachable,
        detail: format!(
            "cannot reach the model server at {base_url} ({attempts} attempts: {message}) — is \
             the server running, and is --base-url right? `baton doctor` checks it; then \
             `baton resume` (with --base-url URL to change it)"
        ),
    }
}
