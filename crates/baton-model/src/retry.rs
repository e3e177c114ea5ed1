//! When to send a failed model request again, and after how long.
//!
//! Providers make one attempt per call; the caller drives retries with a [`RetrySchedule`] so
//! that every attempt (and every wait) can be journaled.

use std::time::Duration;

use crate::ModelError;

/// Limits of retrying one model call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first one included.
    pub max_attempts: u32,
    /// Sum of all waits between attempts.
    pub max_total_wait: Duration,
    /// Backoff ceiling of the first retry; doubles with each further one.
    pub base_delay: Duration,
    /// Backoff ceiling of any retry. A wait the server asks for may be longer.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 10,
            max_total_wait: Duration::from_secs(10 * 60),
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// A fresh schedule for one call, with randomly seeded jitter.
    pub fn schedule(&self) -> RetrySchedule {
        RetrySchedule::new(self.clone(), fastrand::Rng::new())
    }

    /// A schedule whose jitter is reproducible, for tests and simulations.
    pub fn schedule_seeded(&self, seed: u64) -> RetrySchedule {
        RetrySchedule::new(self.clone(), fastrand::Rng::with_seed(seed))
    }
}

/// The retry state of one call: how many attempts failed and how long was waited so far.
#[derive(Clone, Debug)]
pub struct RetrySchedule {
    policy: RetryPolicy,
    failures: u32,
    waited: Duration,
    rng: fastrand::Rng,
}

impl RetrySchedule {
    fn new(policy: RetryPolicy, rng: fastrand::Rng) -> Self {
        RetrySchedule {
            policy,
            failures: 0,
            waited: Duration::ZERO,
            rng,
        }
    }

    /// Records a failed attempt and returns how long to wait before the next one, or `None` to
    /// give up: the error is permanent, the attempts are used up, or the wait would overrun
    /// the total budget.
    ///
    /// A wait the server asked for is honoured exactly (even above `max_delay`), and if it does
    /// not fit the remaining budget the schedule gives up rather than retry too early. Otherwise
    /// the wait is exponential backoff with full jitter — uniform in `[0, min(max_delay,
    /// base_delay * 2^retry)]` — so that many runs hitting the same limit do not retry in step;
    /// it is shortened to fit the remaining budget.
    pub fn next_delay(&mut self, error: &ModelError) -> Option<Duration> {
        self.failures = self.failures.saturating_add(1);
        if !error.is_retryable() || self.failures >= self.policy.max_attempts {
            return None;
        }
        let remaining = self.policy.max_total_wait.saturating_sub(self.waited);
        let delay = match error.retry_after {
            Some(asked) if asked > remaining => return None,
            Some(asked) => asked,
            None if remaining.is_zero() => return None,
            None => self.backoff(self.failures - 1).min(remaining),
        };
        self.waited += delay;
        Some(delay)
    }

    /// Attempts that failed so far.
    pub fn attempts(&self) -> u32 {
        self.failures
    }

    /// Sum of the delays handed out so far.
    pub fn total_wait(&self) -> Duration {
        self.waited
    }

    fn backoff(&mut self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.min(31));
        let ceiling = self
            .policy
            .base_delay
            .saturating_mul(factor)
            .min(self.policy.max_delay);
        let ceiling_nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(self.rng.u64(0..=ceiling_nanos))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use baton_core::ErrorClass;

    fn transient() -> ModelError {
        ModelError::new(ErrorClass::Transient, "reset")
    }

    fn asked(secs: u64) -> ModelError {
        ModelError::new(ErrorClass::RateLimited, "slow down")
            .with_retry_after(Duration::from_secs(secs))
    }

    #[test]
    fn default_policy_matches_the_documented_values() {
        let p = RetryPolicy::default();
        assert_eq!(p.max_attempts, 10);
        assert_eq!(p.max_total_wait, Duration::from_secs(600));
        assert_eq!(p.base_delay, Duration::from_secs(1));
        assert_eq!(p.max_delay, Duration::from_secs(60));
    }

    #[test]
    fn permanent_errors_are_not_retried() {
        for class in [
            ErrorClass::Auth,
            ErrorClass::InvalidRequest,
            ErrorClass::QuotaExhausted,
            ErrorClass::ContextOverflow,
        ] {
            let mut s = RetryPolicy::default().schedule();
            assert_eq!(
                s.next_delay(&ModelError::new(class, "no")),
                None,
                "{class:?}"
            );
            // Even when the server named a wait.
            let mut s = RetryPolicy::default().schedule();
            let err = ModelError::new(class, "no").with_retry_after(Duration::from_secs(1));
            assert_eq!(s.next_delay(&err), None, "{class:?}");
        }
    }

    #[test]
    fn attempt_count_is_exact() {
        for max_attempts in 0..15 {
            let policy = RetryPolicy {
                max_attempts,
                max_total_wait: Duration::from_secs(1_000_000),
                base_delay: Duration::from_millis(1),
                max_delay: Duration::from_millis(5),
            };
            let mut s = policy.schedule_seeded(u64::from(max_attempts));
            let mut retries = 0;
            while s.next_delay(&transient()).is_some() {
                retries += 1;
                assert!(retries < 100, "runaway schedule");
            }
            // `max_attempts` attempts in all means one fewer retries.
            assert_eq!(
                retries,
                max_attempts.saturating_sub(1),
                "max_attempts {max_attempts}"
            );
            assert_eq!(s.next_delay(&transient()), None, "stays exhausted");
        }
    }

    #[test]
    fn backoff_stays_within_its_exponential_ceiling() {
        let policy = RetryPolicy {
            max_attempts: 40,
            max_total_wait: Duration::from_secs(1_000_000),
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
        };
        let mut seen_nonzero_spread = false;
        for seed in 0..200 {
            let mut s = policy.schedule_seeded(seed);
            for retry in 0..39u32 {
                let delay = s.next_delay(&transient()).unwrap();
                let ceiling =
                    (policy.base_delay * 2u32.saturating_pow(retry.min(31))).min(policy.max_delay);
                assert!(
                    delay <= ceiling,
                    "seed {seed} retry {retry}: {delay:?} > {ceiling:?}"
                );
                assert!(delay <= policy.max_delay);
                if retry > 5 && delay < policy.max_delay / 2 {
                    seen_nonzero_spread = true;
                }
            }
        }
        // Full jitter spreads delays over the whole range, not just near the ceiling.
        assert!(seen_nonzero_spread);
    }

    #[test]
    fn huge_base_and_attempts_do_not_overflow() {
        let policy = RetryPolicy {
            max_attempts: u32::MAX,
            max_total_wait: Duration::MAX,
            base_delay: Duration::MAX,
            max_delay: Duration::MAX,
        };
        let mut s = policy.schedule_seeded(7);
        for _ in 0..100 {
            assert!(s.next_delay(&transient()).is_some());
        }
    }

    #[test]
    fn total_wait_never_exceeds_the_budget() {
        let policy = RetryPolicy {
            max_attempts: 1_000,
            max_total_wait: Duration::from_secs(30),
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(20),
        };
        for seed in 0..100 {
            let mut s = policy.schedule_seeded(seed);
            let mut sum = Duration::ZERO;
            while let Some(d) = s.next_delay(&transient()) {
                sum += d;
                assert!(s.attempts() < 1_000);
            }
            assert_eq!(sum, s.total_wait());
            assert!(sum <= policy.max_total_wait, "seed {seed}: {sum:?}");
            // Backoff is trimmed to the remaining budget, so the budget is used up exactly.
            assert_eq!(sum, policy.max_total_wait, "seed {seed}");
        }
    }

    #[test]
    fn server_asked_wait_is_honoured_even_above_max_delay() {
        let policy = RetryPolicy {
            max_delay: Duration::from_secs(5),
            ..RetryPolicy::default()
        };
        let mut s = policy.schedule_seeded(1);
        assert_eq!(s.next_delay(&asked(7)), Some(Duration::from_secs(7)));
        assert_eq!(s.next_delay(&asked(0)), Some(Duration::ZERO));
        assert_eq!(s.total_wait(), Duration::from_secs(7));
        assert_eq!(s.attempts(), 2);
    }

    #[test]
    fn server_asked_wait_beyond_the_budget_gives_up() {
        let policy = RetryPolicy {
            max_total_wait: Duration::from_secs(10),
            ..RetryPolicy::default()
        };
        let mut s = policy.schedule_seeded(1);
        assert_eq!(s.next_delay(&asked(6)), Some(Duration::from_secs(6)));
        assert_eq!(s.next_delay(&asked(4)), Some(Duration::from_secs(4)));
        // The budget is spent: a zero wait still fits, anything more does not.
        assert_eq!(s.next_delay(&asked(0)), Some(Duration::ZERO));
        assert_eq!(s.next_delay(&asked(1)), None);
        assert_eq!(s.next_delay(&transient()), None);

        let mut s = policy.schedule_seeded(1);
        assert_eq!(s.next_delay(&asked(11)), None);
    }

    #[test]
    fn seeded_schedules_repeat_and_unseeded_ones_work() {
        let policy = RetryPolicy::default();
        let run = |seed| {
            let mut s = policy.schedule_seeded(seed);
            (0..5)
                .map(|_| s.next_delay(&transient()))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
        let mut s = policy.schedule();
        assert!(
            s.next_delay(&transient())
                .is_some_and(|d| d <= policy.base_delay)
        );
    }
}
