//! A model call in the loop: the request assembled from the state (compaction and budgets
//! checked first), its intent journaled, the request sent under the rate limit, the call
//! timeout and the stop signal, and its outcome journaled — a reply, normalised and priced, or
//! a failure with its retry or the pause that names the cause.

use std::sync::Arc;
use std::time::Instant;

use baton_core::{
    AssistantMessage, CompactionTrigger, ErrorClass, Event, ModelReply, ModelRequest,
    RequestMetrics,
};
use baton_model::{ModelError, RetrySchedule, StreamDelta, StreamObserver};

use crate::api::RunObserver;
use crate::engine::{RequestHistory, elapsed_ms};
use crate::failure::{
    UNREACHABLE_ATTEMPTS, pause_for_failure, pause_unreachable, unreachable_retry_delay,
};
use crate::journal::Journal;
use crate::{Engine, EngineError};

impl Engine {
    /// One attempt at the model call `call` of `turn`: a compaction or a budget pause instead
    /// when the request would not fit, else the request sent and its outcome journaled.
    pub(crate) async fn call_model(
        &self,
        journal: &mut Journal,
        requests: &mut RequestHistory,
        turn: u32,
        call: u32,
        attempt: u32,
        schedule: &mut RetrySchedule,
    ) -> Result<(), EngineError> {
        let RequestHistory {
            assembler,
            encoder,
            tokens,
        } = requests;
        let assembly = assembler
            .assemble(journal.state())
            .ok_or_else(|| EngineError::Internal("no settings in run state".into()))?;
        let estimate = self.counter.estimate_since(
            journal.state(),
            assembly.request,
            assembly.unchanged,
            tokens,
        );
        if self.compact_before_call(journal, turn, estimate).await? {
            return Ok(());
        }
        if !self
            .budget_allows_call(journal, &assembly.request.model, estimate.estimated)
            .await?
        {
            return Ok(());
        }
        let request = assembly.request;
        let encoded = encoder.encode(request);
        let window_tokens = journal
            .state()
            .settings
            .as_ref()
            .map_or(0, |s| s.context.window_tokens);
        let metrics = RequestMetrics {
            estimated_prompt_tokens: estimate.estimated,
            counted_prompt_tokens: estimate.counted,
            window_tokens,
            prefix_stability: encoded.prefix_stability,
            masked_outputs: assembly.masked_outputs,
        };
        journal
            .record(Event::ModelCallStarted {
                turn,
                call,
                attempt,
                request_sha256: encoded.digest,
                context: Some(metrics),
            })
            .await?;
        let started = Instant::now();
        let Some(outcome) = self.send(request, estimate.estimated).await else {
            // Abandoned: the call stays open in the journal and is sent again on resume.
            return Ok(());
        };
        match outcome {
            Ok(reply) => {
                let cost_usd = self.price(&reply, &request.model);
                let message = self.normalize_reply(reply.message, turn);
                journal
                    .record(Event::ModelCallFinished {
                        turn,
                        call,
                        message,
                        usage: reply.usage,
                        cost_usd,
                        finish_reason: reply.finish_reason,
                        served_model: reply.served_model,
                        duration_ms: elapsed_ms(started),
                    })
                    .await
            }
            Err(error) => {
                self.model_call_failed(journal, turn, call, attempt, error, schedule)
                    .await
            }
        }
    }

    /// Sends one request under the rate limit and the call timeout; `None` if a stop abandoned
    /// it.
    pub(crate) async fn send(
        &self,
        request: &ModelRequest,
        estimated_tokens: u64,
    ) -> Option<Result<ModelReply, ModelError>> {
        let mut deltas = DeltaForwarder {
            observer: self.parts.observer.clone(),
        };
        // Wait for the client-side budget before sending (a stop abandons the wait).
        let tokens = u32::try_from(estimated_tokens).unwrap_or(u32::MAX);
        self.parts
            .stop
            .race(self.parts.rate_limiter.acquire(tokens))
            .await?;
        let deadline = self.parts.model_call_timeout;
        let bounded = async {
            tokio::time::timeout(deadline, self.parts.provider.complete(request, &mut deltas))
                .await
                .unwrap_or_else(|_| {
                    Err(ModelError::new(
                        ErrorClass::Transient,
                        format!("the model call took longer than {} s", deadline.as_secs()),
                    ))
                })
        };
        self.parts.stop.race(bounded).await
    }

    /// Prices a reply by the model the server says answered, else the one asked for.
    pub(crate) fn price(&self, reply: &ModelReply, requested_model: &str) -> Option<f64> {
        reply.usage.as_ref().and_then(|usage| {
            reply
                .served_model
                .as_deref()
                .and_then(|served| self.parts.prices.cost(served, usage))
                .or_else(|| self.parts.prices.cost(requested_model, usage))
        })
    }

    /// Journals a failed attempt and what follows: a compaction for an overflow, a retry after
    /// its delay, or the pause that says why the run cannot go on.
    async fn model_call_failed(
        &self,
        journal: &mut Journal,
        turn: u32,
        call: u32,
        attempt: u32,
        error: ModelError,
        schedule: &mut RetrySchedule,
    ) -> Result<(), EngineError> {
        let message = self.redactor.redact(&error.to_string());
        if error.class == ErrorClass::ContextOverflow
            && let Some(replaced) = self.overflow_compaction_cut(journal.state())
        {
            journal
                .record(Event::ModelCallFailed {
                    turn,
                    call,
                    attempt,
                    class: error.class,
                    message,
                    retry_in_ms: None,
                })
                .await?;
            return self
                .start_compaction(journal, turn, replaced, CompactionTrigger::Overflow, 0)
                .await;
        }
        // A first call that cannot connect at all (first of the run, or first after a resume
        // moved it to another endpoint): two quick retries, then a pause that says what to
        // check. Once the server has answered, the patient schedule below applies.
        let never_reached =
            error.class == ErrorClass::Unreachable && journal.state().calls_on_endpoint == 0;
        let failures_so_far = journal.state().consecutive_model_failures;
        let breaker_trips = failures_so_far.saturating_add(1) >= self.parts.breaker_failures;
        // The breaker stops retrying across calls too: a run never spins on a dead endpoint.
        let delay = if never_reached {
            (attempt < UNREACHABLE_ATTEMPTS).then(|| unreachable_retry_delay(attempt))
        } else if breaker_trips {
            None
        } else {
            schedule.next_delay(&error)
        };
        journal
            .record(Event::ModelCallFailed {
                turn,
                call,
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
        let event = if never_reached {
            let base_url = journal
                .state()
                .settings
                .as_ref()
                .map(|s| s.model.base_url.clone())
                .unwrap_or_default();
            pause_unreachable(&base_url, &message, attempt)
        } else {
            pause_for_failure(
                error.class,
                &message,
                attempt,
                failures_so_far,
                breaker_trips,
            )
        };
        self.end_run(journal, event).await
    }

    /// Gives every tool call a unique, non-empty id (some servers send none, or repeat them) and
    /// scrubs secrets, so that what is journaled is exactly what later prompts will contain.
    fn normalize_reply(&self, mut message: AssistantMessage, turn: u32) -> AssistantMessage {
        let mut seen = std::collections::HashSet::new();
        for (i, call) in message.tool_calls.iter_mut().enumerate() {
            if call.id.trim().is_empty() || seen.contains(&call.id) {
                let mut n = 0;
                call.id = format!("call_{turn}_{i}");
                while seen.contains(&call.id) {
                    n += 1;
                    call.id = format!("call_{turn}_{i}_{n}");
                }
            }
            seen.insert(call.id.clone());
            call.arguments = self.redactor.redact(&call.arguments);
        }
        message.content = message.content.map(|c| self.redactor.redact(&c));
        message
    }
}

struct DeltaForwarder {
    observer: Arc<dyn RunObserver>,
}

impl StreamObserver for DeltaForwarder {
    fn on_delta(&mut self, delta: &StreamDelta) {
        self.observer.on_delta(delta);
    }
}
