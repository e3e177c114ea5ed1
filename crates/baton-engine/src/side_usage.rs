//! Usage of services the run uses besides the model (the code index's embedder): a host hands
//! the engine a [`SideUsage`] ([`crate::Extensions::side_usage`]) and the engine journals what
//! it reports (`embeddings_used`), so that its cost counts against the budget and shows in the
//! run's summary.

use async_trait::async_trait;
use baton_core::Event;

use crate::journal::Journal;
use crate::{Engine, EngineError};

/// Usage of services the run uses besides the model (the code index's embedder), handed to
/// the engine to journal: taken at each turn's start (before the budgets are checked), after
/// each tool call, and before the run finishes, fails or pauses.
#[async_trait]
pub trait SideUsage: Send + Sync {
    /// The events for what was used since the last call (`embeddings_used`), in order.
    fn take(&self) -> Vec<Event>;

    /// Called before the run's ending is journaled: lets background work the run asked for
    /// (the refresh after its last change) finish, for at most `within`, so that what it spends
    /// is journaled with the run. Default: nothing to wait for.
    async fn settle(&self, _within: std::time::Duration) {}
}

impl Engine {
    /// Journals what [`SideUsage`] reports.
    pub(crate) async fn record_side_usage(&self, journal: &mut Journal) -> Result<(), EngineError> {
        let Some(usage) = &self.parts.extensions.side_usage else {
            return Ok(());
        };
        for event in usage.take() {
            journal.record(event).await?;
        }
        Ok(())
    }
}
