//! The run's end: every event that finishes, fails or pauses a running run is journaled
//! through [`Engine::end_run`], never straight through the journal. Before the ending, what the
//! run spent on other services ([`crate::SideUsage`]: the code index's embeddings) is settled —
//! up to [`SETTLE_WITHIN`] for the background work the run's last change asked for, none after
//! a person's stop — and journaled: the reducer takes usage only from a running run, and a
//! process that ends with the run would lose it.
//!
//! This is the engine's job, not the journal's: the journal only writes events, it never waits
//! for a part of the run (it did once, which tied every write to the code index).

use std::time::Duration;

use baton_core::{Event, PauseReason, RunStatus};

use crate::journal::Journal;
use crate::{Engine, EngineError};

/// How long the run's ending waits for the background work it caused (a refresh of the code
/// index after its last change) before it is journaled without what that work still spends.
pub(crate) const SETTLE_WITHIN: Duration = Duration::from_secs(10);

impl Engine {
    /// Journals `ending` (`run_finished`, `run_failed`, `run_paused`), settling and journaling
    /// the side usage first when it ends a running run (see the module's doc). Any other event
    /// is simply journaled.
    pub(crate) async fn end_run(
        &self,
        journal: &mut Journal,
        ending: Event,
    ) -> Result<(), EngineError> {
        let ends_running = ending
            .status_change()
            .is_some_and(|status| status != RunStatus::Running);
        if ends_running
            && journal.state().status == RunStatus::Running
            && let Some(usage) = &self.parts.extensions.side_usage
        {
            // Durable first: the observers of the last tool calls (the code index's refresher
            // is poked by them) see them before the wait.
            journal.commit().await?;
            let interrupted = matches!(
                &ending,
                Event::RunPaused {
                    reason: PauseReason::Interrupted,
                    ..
                }
            );
            // A person who stopped the run does not wait for the index.
            let within = if interrupted {
                Duration::ZERO
            } else {
                SETTLE_WITHIN
            };
            usage.settle(within).await;
            for used in usage.take() {
                journal.record(used).await?;
            }
        }
        journal.record(ending).await
    }
}
