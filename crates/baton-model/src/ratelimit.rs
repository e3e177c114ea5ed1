//! Client-side rate limiting per provider, so that parallel runs sharing one account stay under
//! its requests-per-minute and tokens-per-minute limits instead of collecting 429s.
//!
//! Both limits are token buckets (GCRA, from `governor`) that refill continuously, which is how
//! OpenAI and Anthropic describe their own enforcement. The server stays the authority: this
//! only avoids sending what would certainly be refused, and a 429 is still classified and
//! retried as usual.

use std::fmt;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::Quota;
use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use serde::{Deserialize, Serialize};

/// The limits of one provider account. `None` means no limit of that kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimit {
    pub requests_per_minute: Option<u32>,
    /// Input plus output tokens per minute, as the provider counts them.
    pub tokens_per_minute: Option<u32>,
    /// Requests that may start back to back after an idle spell. Defaults to
    /// `requests_per_minute`: a full minute's budget, like the provider's own bucket.
    pub request_burst: Option<u32>,
    /// Tokens that may be spent back to back after an idle spell; also the most one request can
    /// be charged. Defaults to `tokens_per_minute`.
    pub token_burst: Option<u32>,
}

impl RateLimit {
    /// True when neither requests nor tokens are limited.
    pub fn is_unlimited(&self) -> bool {
        self.requests_per_minute.is_none() && self.tokens_per_minute.is_none()
    }
}

/// A [`RateLimit`] that cannot be enforced.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RateLimitError {
    #[error("rate limit `{0}` must be at least 1 (leave it out for no limit)")]
    Zero(&'static str),
    #[error("`{burst}` is set but `{rate}` is not: a burst needs a rate to refill it")]
    BurstWithoutRate {
        burst: &'static str,
        rate: &'static str,
    },
}

/// Governor's view of time, read from tokio's clock so that tests with a paused runtime clock
/// are exact and instant, and so that waits are tokio sleeps.
#[derive(Clone, Debug)]
struct TokioClock {
    origin: tokio::time::Instant,
}

impl Clock for TokioClock {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        // Saturates after 584 years instead of panicking like `Nanos::from(Duration)`.
        Nanos::new(u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
}

type Bucket = governor::RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<Nanos>>;

struct Limits {
    limit: RateLimit,
    clock: TokioClock,
    requests: Option<Bucket>,
    tokens: Option<(Bucket, NonZeroU32)>,
    /// Waiters are served first come, first served (tokio's mutex is fair): without it a large
    /// request could starve while small ones keep fitting into the refilling bucket.
    queue: tokio::sync::Mutex<()>,
}

/// A shared client-side limiter. Clones share one budget, so give every task that talks to the
/// same account a clone of the same limiter.
#[derive(Clone)]
pub struct RateLimiter {
    /// `None`: unlimited, and [`acquire`](Self::acquire) returns at once.
    limits: Option<Arc<Limits>>,
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("limit", &self.limit())
            .finish()
    }
}

fn positive(value: u32, name: &'static str) -> Result<NonZeroU32, RateLimitError> {
    NonZeroU32::new(value).ok_or(RateLimitError::Zero(name))
}

/// The bucket of one limit, or `None` when it is not set.
fn bucket(
    per_minute: Option<u32>,
    burst: Option<u32>,
    names: (&'static str, &'static str),
    clock: &TokioClock,
) -> Result<Option<(Bucket, NonZeroU32)>, RateLimitError> {
    let (rate_name, burst_name) = names;
    let Some(per_minute) = per_minute else {
        return match burst {
            Some(_) => Err(RateLimitError::BurstWithoutRate {
                burst: burst_name,
                rate: rate_name,
            }),
            None => Ok(None),
        };
    };
    let per_minute = positive(per_minute, rate_name)?;
    let burst = match burst {
        Some(burst) => positive(burst, burst_name)?,
        None => per_minute,
    };
    let quota = Quota::per_minute(per_minute).allow_burst(burst);
    let bucket = governor::RateLimiter::direct_with_clock(quota, clock.clone());
    Ok(Some((bucket, burst)))
}

impl RateLimiter {
    pub fn new(limit: RateLimit) -> Result<Self, RateLimitError> {
        let clock = TokioClock {
            origin: tokio::time::Instant::now(),
        };
        let requests = bucket(
            limit.requests_per_minute,
            limit.request_burst,
            ("requests_per_minute", "request_burst"),
            &clock,
        )?;
        let tokens = bucket(
            limit.tokens_per_minute,
            limit.token_burst,
            ("tokens_per_minute", "token_burst"),
            &clock,
        )?;
        if limit.is_unlimited() {
            return Ok(Self::unlimited());
        }
        Ok(RateLimiter {
            limits: Some(Arc::new(Limits {
                limit,
                clock,
                requests: requests.map(|(bucket, _)| bucket),
                tokens,
                queue: tokio::sync::Mutex::new(()),
            })),
        })
    }

    /// A limiter that never waits.
    pub fn unlimited() -> Self {
        RateLimiter { limits: None }
    }

    /// The limits this limiter enforces.
    pub fn limit(&self) -> RateLimit {
        self.limits
            .as_ref()
            .map(|limits| limits.limit)
            .unwrap_or_default()
    }

    /// Waits until one request and `estimated_tokens` tokens fit the limits, takes them, and
    /// returns how long it waited.
    ///
    /// `estimated_tokens` is what the provider will count against the per-minute token limit
    /// (prompt plus expected completion); 0 takes no tokens. A request estimated above the token
    /// burst (by default the whole per-minute budget) could never fit, so it is charged the full
    /// burst instead: it waits for a full bucket and then goes, leaving the final word to the
    /// server, rather than waiting forever.
    ///
    /// Waiters are served in arrival order. Tokens are taken before the request slot because
    /// the token wait is usually the long one; if the future is dropped between the two, the
    /// tokens stay spent, which errs on the side of sending less.
    pub async fn acquire(&self, estimated_tokens: u32) -> Duration {
        let Some(limits) = &self.limits else {
            return Duration::ZERO;
        };
        let started = tokio::time::Instant::now();
        let _turn = limits.queue.lock().await;
        if let (Some((tokens, burst)), Some(wanted)) =
            (&limits.tokens, NonZeroU32::new(estimated_tokens))
        {
            wait_for(tokens, wanted.min(*burst), &limits.clock).await;
        }
        if let Some(requests) = &limits.requests {
            wait_for(requests, NonZeroU32::MIN, &limits.clock).await;
        }
        started.elapsed()
    }
}

/// Waits until `bucket` holds `n` cells and takes them. `n` must not exceed the bucket's burst.
async fn wait_for(bucket: &Bucket, n: NonZeroU32, clock: &TokioClock) {
    loop {
        match bucket.check_n(n) {
            Ok(Ok(())) => return,
            // Governor computes the wait exactly; the loop only covers timer rounding.
            Ok(Err(not_until)) => tokio::time::sleep(not_until.wait_time_from(clock.now())).await,
            // More than the burst can never fit. Callers clamp `n`, so this is unreachable; going
            // ahead is still better than waiting forever.
            Err(_) => return,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use tokio::time::Instant;

    const SECOND: Duration = Duration::from_secs(1);

    fn limiter(limit: RateLimit) -> RateLimiter {
        RateLimiter::new(limit).unwrap()
    }

    fn requests(per_minute: u32, burst: Option<u32>) -> RateLimit {
        RateLimit {
            requests_per_minute: Some(per_minute),
            request_burst: burst,
            ..RateLimit::default()
        }
    }

    fn tokens(per_minute: u32, burst: Option<u32>) -> RateLimit {
        RateLimit {
            tokens_per_minute: Some(per_minute),
            token_burst: burst,
            ..RateLimit::default()
        }
    }

    // All timing tests run on tokio's paused clock: time moves only when every task sleeps, and
    // then jumps to the next timer, so measured waits are exact whatever the machine's load.

    #[tokio::test(start_paused = true)]
    async fn unlimited_never_waits() {
        for limiter in [
            RateLimiter::unlimited(),
            limiter(RateLimit::default()),
            limiter(RateLimit {
                requests_per_minute: None,
                tokens_per_minute: None,
                request_burst: None,
                token_burst: None,
            }),
        ] {
            assert!(limiter.limit().is_unlimited());
            let start = Instant::now();
            for _ in 0..10_000 {
                assert_eq!(limiter.acquire(u32::MAX).await, Duration::ZERO);
            }
            assert_eq!(start.elapsed(), Duration::ZERO);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn second_request_waits_for_the_slot_to_refill() {
        let limiter = limiter(requests(60, Some(1)));
        assert_eq!(limiter.acquire(0).await, Duration::ZERO);
        let waited = limiter.acquire(0).await;
        assert!(waited >= Duration::from_millis(999), "{waited:?}");
        // Virtual time: no more than the refill interval (plus timer rounding) either.
        assert!(waited <= Duration::from_millis(1_002), "{waited:?}");
        let waited = limiter.acquire(0).await;
        assert!(waited >= Duration::from_millis(999), "{waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn default_burst_is_a_minute_s_budget() {
        let limiter = limiter(requests(60, None));
        let start = Instant::now();
        for _ in 0..60 {
            limiter.acquire(0).await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
        let waited = limiter.acquire(0).await;
        assert!(waited >= Duration::from_millis(999), "{waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_refill_at_the_per_minute_rate() {
        // 1000 tokens a minute: 600 now leaves 400; 600 more needs 200 refilled, i.e. 12 s.
        let limiter = limiter(tokens(1_000, None));
        assert_eq!(limiter.acquire(600).await, Duration::ZERO);
        let waited = limiter.acquire(600).await;
        assert!(
            waited >= 12 * SECOND - Duration::from_millis(1),
            "{waited:?}"
        );
        assert!(
            waited <= 12 * SECOND + Duration::from_millis(5),
            "{waited:?}"
        );
        // Zero tokens take nothing: with only a token limit, nothing to wait for.
        assert_eq!(limiter.acquire(0).await, Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_larger_than_the_budget_waits_for_a_full_bucket_not_forever() {
        let limiter = limiter(tokens(1_000, None));
        // Clamped to the burst: a full bucket is there, so it goes at once…
        assert_eq!(limiter.acquire(50_000).await, Duration::ZERO);
        // …and the next one waits for the whole bucket to refill, then goes.
        let waited = tokio::time::timeout(10 * 60 * SECOND, limiter.acquire(50_000))
            .await
            .expect("an oversized request must not wait forever");
        assert!(
            waited >= 60 * SECOND - Duration::from_millis(1),
            "{waited:?}"
        );
        // A smaller explicit burst caps the charge the same way.
        let limiter = self::limiter(tokens(6_000, Some(100)));
        assert_eq!(limiter.acquire(1_000).await, Duration::ZERO);
        let waited = limiter.acquire(1_000).await;
        // 100 tokens at 100 a second.
        assert!(waited >= SECOND - Duration::from_millis(1), "{waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn both_limits_apply_to_one_acquire() {
        let limiter = limiter(RateLimit {
            requests_per_minute: Some(60),
            tokens_per_minute: Some(6_000),
            request_burst: Some(1),
            token_burst: None,
        });
        assert_eq!(limiter.acquire(6_000).await, Duration::ZERO);
        // 60 tokens refill in 0.6 s, but the request slot only after 1 s.
        let waited = limiter.acquire(60).await;
        assert!(waited >= Duration::from_millis(999), "{waited:?}");
        // Now the tokens are the bottleneck. The 60 were taken at 0.6 s, so by 1 s another 40
        // refilled: 2960 more at 100 a second.
        let waited = limiter.acquire(3_000).await;
        assert!(waited >= Duration::from_millis(29_599), "{waited:?}");
        assert!(waited <= Duration::from_millis(29_605), "{waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn clones_share_one_budget_across_tasks() {
        let limiter = limiter(requests(60, Some(1)));
        let start = Instant::now();
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let limiter = limiter.clone();
                tokio::spawn(async move {
                    limiter.acquire(0).await;
                    start.elapsed()
                })
            })
            .collect();
        let mut done = Vec::new();
        for task in tasks {
            done.push(task.await.unwrap());
        }
        done.sort();
        assert_eq!(done[0], Duration::ZERO);
        for pair in done.windows(2) {
            assert!(
                pair[1] - pair[0] >= Duration::from_millis(999),
                "starts too close: {done:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn waiters_are_served_in_arrival_order() {
        let limiter = limiter(tokens(1_000, None));
        limiter.acquire(1_000).await;
        let start = Instant::now();
        let big = tokio::spawn({
            let limiter = limiter.clone();
            async move {
                limiter.acquire(1_000).await;
                start.elapsed()
            }
        });
        // Let the big request queue first.
        tokio::time::sleep(Duration::from_millis(10)).await;
        let small = tokio::spawn({
            let limiter = limiter.clone();
            async move {
                limiter.acquire(10).await;
                start.elapsed()
            }
        });
        let (big, small) = (big.await.unwrap(), small.await.unwrap());
        // The small one would have fit after 0.6 s, but must not overtake the big one.
        assert!(big >= 60 * SECOND - Duration::from_millis(1), "{big:?}");
        assert!(small >= big, "small {small:?} overtook big {big:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_abandoned_wait_does_not_block_the_queue() {
        let limiter = limiter(RateLimit {
            requests_per_minute: Some(60),
            request_burst: Some(1),
            ..RateLimit::default()
        });
        limiter.acquire(0).await;
        // Gives up after 100 ms while waiting for the slot.
        assert!(
            tokio::time::timeout(Duration::from_millis(100), limiter.acquire(0))
                .await
                .is_err()
        );
        // The next caller gets the slot when it refills, not later.
        let waited = limiter.acquire(0).await;
        assert!(waited >= Duration::from_millis(899), "{waited:?}");
        assert!(waited <= Duration::from_millis(905), "{waited:?}");
    }

    #[test]
    fn unusable_limits_are_errors() {
        let cases = [
            (
                requests(0, None),
                RateLimitError::Zero("requests_per_minute"),
            ),
            (requests(10, Some(0)), RateLimitError::Zero("request_burst")),
            (tokens(0, None), RateLimitError::Zero("tokens_per_minute")),
            (tokens(10, Some(0)), RateLimitError::Zero("token_burst")),
            (
                RateLimit {
                    request_burst: Some(5),
                    ..RateLimit::default()
                },
                RateLimitError::BurstWithoutRate {
                    burst: "request_burst",
                    rate: "requests_per_minute",
                },
            ),
            (
                RateLimit {
                    requests_per_minute: Some(5),
                    token_burst: Some(5),
                    ..RateLimit::default()
                },
                RateLimitError::BurstWithoutRate {
                    burst: "token_burst",
                    rate: "tokens_per_minute",
                },
            ),
        ];
        for (limit, expected) in cases {
            assert_eq!(RateLimiter::new(limit).unwrap_err(), expected, "{limit:?}");
        }
        assert!(
            RateLimitError::Zero("requests_per_minute")
                .to_string()
                .contains("requests_per_minute")
        );
    }

    #[test]
    fn limits_read_from_configuration() {
        let limit: RateLimit =
            serde_json::from_str(r#"{"requests_per_minute": 500, "tokens_per_minute": 30000}"#)
                .unwrap();
        assert_eq!(
            limit,
            RateLimit {
                requests_per_minute: Some(500),
                tokens_per_minute: Some(30_000),
                request_burst: None,
                token_burst: None,
            }
        );
        let limiter = RateLimiter::new(limit).unwrap();
        assert_eq!(limiter.limit(), limit);
        assert!(format!("{limiter:?}").contains("30000"));
        let empty: RateLimit = serde_json::from_str("{}").unwrap();
        assert!(empty.is_unlimited());
        assert!(serde_json::from_str::<RateLimit>(r#"{"rpm": 5}"#).is_err());
    }
}
