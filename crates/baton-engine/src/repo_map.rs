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

impl Engine {
    /// Renders and journals the map for `task` (`None`: the run's start).
    pub(crate) async fn record_repo_map(
        &self,
        journal: &mut Journal,
        task: Option<String>,
    ) -> Result<(), EngineError> {
        let Some(source) = &self.parts.extensions.repo_map else {
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
