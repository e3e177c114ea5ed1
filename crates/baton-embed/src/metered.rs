//! Embedding calls metered like model calls: rate limit, retries, tokens, cost, a spending
//! cap, and a sink each call's usage is reported to (the engine journals it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_model::ratelimit::RateLimiter;
use baton_model::{ModelError, RetryPolicy};

use crate::{EmbedError, Embedder, Purpose};

/// What one successful embedding request cost.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbedCall {
    pub model_id: String,
    pub inputs: u64,
    pub input_tokens: u64,
    /// `None` when no price is configured (a local model costs nothing and says 0).
    pub cost_usd: Option<f64>,
    /// Attempts made, the successful one included.
    pub attempts: u32,
}

/// Sums over all calls of a [`Metered`] embedder.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UsageTotals {
    pub calls: u64,
    pub inputs: u64,
    pub input_tokens: u64,
    pub cost_usd: f64,
    /// Failed attempts that were retried.
    pub retries: u64,
}

/// Receives every successful call's usage, in order.
pub trait UsageSink: Send + Sync {
    fn record(&self, call: &EmbedCall);
}

/// An embedder with a rate limit, retries and accounting.
pub struct Metered {
    inner: Arc<dyn Embedder>,
    limiter: RateLimiter,
    retry: RetryPolicy,
    /// USD per million input tokens.
    price_per_mtok: Option<f64>,
    /// Calls stop (with an error) once the cost would pass this.
    max_cost_usd: Option<f64>,
    totals: Mutex<UsageTotals>,
    /// Set after construction too ([`Metered::set_sink`]): who meters is often built later.
    sink: Mutex<Option<Arc<dyn UsageSink>>>,
    /// While set, no new request starts ([`Metered::hold`]).
    held: AtomicBool,
}

impl std::fmt::Debug for Metered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metered")
            .field("model_id", &self.inner.model_id())
            .finish_non_exhaustive()
    }
}

impl Metered {
    pub fn new(inner: Arc<dyn Embedder>) -> Self {
        Metered {
            inner,
            limiter: RateLimiter::unlimited(),
            retry: RetryPolicy::default(),
            price_per_mtok: None,
            max_cost_usd: None,
            totals: Mutex::new(UsageTotals::default()),
            sink: Mutex::new(None),
            held: AtomicBool::new(false),
        }
    }

    pub fn with_rate_limiter(mut self, limiter: RateLimiter) -> Self {
        self.limiter = limiter;
        self
    }

    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    pub fn with_price_per_mtok(mut self, usd: f64) -> Self {
        self.price_per_mtok = Some(usd);
        self
    }

    pub fn with_max_cost_usd(mut self, usd: f64) -> Self {
        self.max_cost_usd = Some(usd);
        self
    }

    pub fn with_sink(self, sink: Arc<dyn UsageSink>) -> Self {
        self.set_sink(sink);
        self
    }

    /// Reports every later call's usage to `sink` (replacing any earlier one).
    pub fn set_sink(&self, sink: Arc<dyn UsageSink>) {
        if let Ok(mut slot) = self.sink.lock() {
            *slot = Some(sink);
        }
    }

    pub fn model_id(&self) -> String {
        self.inner.model_id()
    }

    /// Starts no new request (nor retry) until [`Metered::go_on`]: each fails with
    /// [`EmbedError::Held`]. A request already sent is answered and accounted as usual — so a
    /// run that ends can wait for it and journal everything that was spent.
    pub fn hold(&self) {
        self.held.store(true, Ordering::SeqCst);
    }

    /// Ends a [`Metered::hold`].
    pub fn go_on(&self) {
        self.held.store(false, Ordering::SeqCst);
    }

    pub fn totals(&self) -> UsageTotals {
        self.totals.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Embeds every text, in batches of the embedder's size, each batch retried per the
    /// policy. Stops at the first batch that fails for good; batches before it were reported.
    pub async fn embed_all(
        &self,
        texts: &[String],
        purpose: Purpose,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        match self.embed_prefix(texts, purpose).await {
            (vectors, None) => Ok(vectors),
            (_, Some(error)) => Err(error),
        }
    }

    /// [`Metered::embed_all`] that keeps what it got: the vectors of the leading texts (whole
    /// batches) embedded before a batch failed for good, and that failure. What was paid for
    /// can then be kept even when the rest cannot be had.
    pub async fn embed_prefix(
        &self,
        texts: &[String],
        purpose: Purpose,
    ) -> (Vec<Vec<f32>>, Option<EmbedError>) {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(self.inner.max_batch().max(1)) {
            match self.embed_batch(batch, purpose).await {
                Ok(vectors) => out.extend(vectors),
                Err(error) => return (out, Some(error)),
            }
        }
        (out, None)
    }

    async fn embed_batch(
        &self,
        batch: &[String],
        purpose: Purpose,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        if let Some(cap) = self.max_cost_usd
            && self.totals().cost_usd >= cap
        {
            return Err(EmbedError::Config(format!(
                "the embedding budget of ${cap:.4} is spent"
            )));
        }
        // A token is about four characters of code; the server counts exactly afterwards.
        let estimate = batch.iter().map(|t| t.len() / 4 + 1).sum::<usize>();
        let mut schedule = self.retry.schedule();
        loop {
            if self.held.load(Ordering::SeqCst) {
                return Err(EmbedError::Held);
            }
            self.limiter
                .acquire(u32::try_from(estimate).unwrap_or(u32::MAX))
                .await;
            match self.inner.embed(batch, purpose).await {
                Ok(embedded) => {
                    let call = EmbedCall {
                        model_id: self.inner.model_id(),
                        inputs: batch.len() as u64,
                        input_tokens: embedded.input_tokens,
                        cost_usd: self
                            .price_per_mtok
                            .map(|p| p * embedded.input_tokens as f64 / 1e6),
                        attempts: schedule.attempts() + 1,
                    };
                    self.account(&call);
                    return Ok(embedded.vectors);
                }
                Err(EmbedError::Server(error)) => match schedule.next_delay(&error) {
                    Some(delay) => {
                        self.note_retry(&error, delay);
                        tokio::time::sleep(delay).await;
                    }
                    None => return Err(EmbedError::Server(error)),
                },
                Err(other) => return Err(other),
            }
        }
    }

    fn note_retry(&self, error: &ModelError, delay: Duration) {
        tracing::warn!(%error, ?delay, "embedding request failed; retrying");
        if let Ok(mut totals) = self.totals.lock() {
            totals.retries += 1;
        }
    }

    fn account(&self, call: &EmbedCall) {
        if let Ok(mut totals) = self.totals.lock() {
            totals.calls += 1;
            totals.inputs += call.inputs;
            totals.input_tokens += call.input_tokens;
            totals.cost_usd += call.cost_usd.unwrap_or(0.0);
        }
        let sink = self.sink.lock().ok().and_then(|s| s.clone());
        if let Some(sink) = sink {
            sink.record(call);
        }
    }
}
