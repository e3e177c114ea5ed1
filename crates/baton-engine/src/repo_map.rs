//! The repo map in the model's brief: rendered by a [`RepoMapSource`] when a run without a
//! plan starts and when a task starts, then journaled (`repo_map_rendered`) so the context
//! layer shows exactly that text for the rest of the task — also after a resume, whatever
//! the workspace looks like by then.

use async_trait::async_trait;
use baton_core::Event;

use crate::journal::Journal;
use crate::{Engine, EngineError};

/// Renders a repo map for a focus text (the goal, a task's title and instructions).
#[async_trait]
pub trait RepoMapSource: Send + Sync {
    /// The map, or `None` when there is nothing to show or it cannot be made now (which must
    /// not stop the run: the agent can still read and search the code).
    async fn render(&self, focus: &str) -> Option<String>;
}

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
        let Some(usage) = &self.side_usage else {
            return Ok(());
        };
        for event in usage.take() {
            journal.record(event).await?;
        }
        Ok(())
    }

    /// Renders and journals the map for `task` (`None`: the run's start).
    pub(crate) async fn record_repo_map(
        &self,
        journal: &mut Journal,
        task: Option<String>,
    ) -> Result<(), EngineError> {
        let Some(source) = &self.repo_map else {
            return Ok(());
        };
        let state = journal.state();
        let mut focus = state.goal.clone();
        if let (Some(board), Some(task)) = (&state.board, &task)
            && let Some(entry) = board.entry(task)
        {
            focus.push('\n');
            focus.push_str(&entry.spec.title);
            focus.push('\n');
            focus.push_str(&entry.spec.instructions);
        }
        let Some(map) = source.render(&focus).await else {
            return Ok(());
        };
        journal
            .record(Event::RepoMapRendered {
                task,
                map: self.redactor.redact(&map),
            })
            .await
    }
}
