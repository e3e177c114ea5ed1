//! The board's side of the reducer: what an event of the task-graph families (plans, tasks and
//! their checks, parallel delegation and merges, a task's rollback) does to the board, with the
//! rules that refuse an event the board cannot be in. `RunState` keeps what the run around it
//! must allow (the run is running, no turn is in progress) and what the event does outside the
//! board (the conversation, the snapshots, the run's usage).

use super::{OpenCheck, TaskBoard, TaskStatus};
use crate::event::Event;
use crate::task::PlanSource;

impl TaskBoard {
    /// Applies `event` to the board; `latest_snapshot` is the run's newest workspace snapshot
    /// (where a task that starts now rolls back to). Returns the note for the model that a
    /// failed task check leaves; an error says why the board refuses the event. An event of
    /// another family (a turn, a model or tool call, …) is refused.
    pub fn apply(
        &mut self,
        event: &Event,
        latest_snapshot: Option<&str>,
    ) -> Result<Option<String>, String> {
        match event {
            Event::PlanSet {
                tasks,
                final_check,
                source,
            } => {
                // A person's plan replaces one no task has started on (`resume --plan`).
                if *source == PlanSource::User && !self.any_started() {
                    *self = TaskBoard {
                        plan_reviewed: self.plan_reviewed,
                        ..TaskBoard::default()
                    };
                }
                self.add_tasks(tasks, final_check.as_ref())?;
                if *source == PlanSource::Baton {
                    self.fix_rounds += 1;
                }
            }
            Event::TaskStarted { task, approach, .. } => {
                self.start_task(task, *approach, latest_snapshot.map(str::to_owned))?;
            }
            Event::CheckStarted {
                task,
                attempt,
                command,
            } => self.check_started(OpenCheck {
                task: task.clone(),
                attempt: *attempt,
                command: command.clone(),
            })?,
            Event::CheckFinished {
                task,
                attempt,
                passed,
                exit_code,
                output,
                ..
            } => return self.check_finished(task.as_ref(), *attempt, *passed, *exit_code, output),
            Event::TaskFinished { task, summary } => self.task_finished(task, summary)?,
            Event::TaskFailed { task, reason } => {
                self.task_ended(task, TaskStatus::Failed, reason)?;
            }
            Event::TaskSkipped { task, reason } => {
                self.task_ended(task, TaskStatus::Skipped, reason)?;
            }
            Event::TaskDelegated {
                task,
                child_run,
                base_snapshot,
            } => self.delegate(task, child_run, base_snapshot)?,
            Event::TaskReturned {
                task,
                child_run,
                result,
                cost_usd,
                prompt_tokens,
                completion_tokens,
                turns,
                ..
            } => {
                let tokens = prompt_tokens.saturating_add(*completion_tokens);
                self.returned(task, child_run, result, tokens, *cost_usd, *turns)?;
            }
            Event::MergeStarted { task, snapshot } => self.merge_started(task, snapshot)?,
            Event::MergeConflicted {
                task,
                conflicts,
                follow_up,
            } => self.merge_conflicted(task, conflicts, follow_up)?,
            Event::RollbackStarted {
                task: Some(task),
                snapshot,
                reason,
            } => self.rollback_started(Some(task), snapshot, reason)?,
            Event::RollbackFinished {
                task: Some(task),
                snapshot,
            } => self.rollback_finished(Some(task), snapshot)?,
            other => {
                return Err(format!(
                    "`{}` is not an event of the task board",
                    other.kind()
                ));
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::task::TaskSpec;

    fn plan(source: PlanSource, ids: &[&str]) -> Event {
        Event::PlanSet {
            source,
            tasks: ids
                .iter()
                .map(|id| TaskSpec {
                    id: (*id).into(),
                    title: format!("title {id}"),
                    instructions: format!("do {id}"),
                    deps: vec![],
                    check: "true".into(),
                    risky: false,
                })
                .collect(),
            final_check: None,
        }
    }

    fn ids(board: &TaskBoard) -> Vec<&str> {
        board.tasks.iter().map(|t| t.spec.id.as_str()).collect()
    }

    #[test]
    fn a_persons_plan_replaces_one_no_task_started_on_and_keeps_the_review() {
        let mut board = TaskBoard {
            plan_reviewed: true,
            ..TaskBoard::default()
        };
        board
            .apply(&plan(PlanSource::Planner, &["a"]), None)
            .unwrap();
        board.apply(&plan(PlanSource::User, &["b"]), None).unwrap();
        assert_eq!(ids(&board), ["b"]);
        assert!(board.plan_reviewed);
        let start = Event::TaskStarted {
            task: "b".into(),
            approach: 1,
            attempt: 1,
        };
        board.apply(&start, Some("snap-1")).unwrap();
        assert_eq!(board.tasks[0].start_snapshot.as_deref(), Some("snap-1"));
        // Once work has begun, a person's plan adds to it.
        board.apply(&plan(PlanSource::User, &["c"]), None).unwrap();
        assert_eq!(ids(&board), ["b", "c"]);
        board
            .apply(&plan(PlanSource::Baton, &["fix"]), None)
            .unwrap();
        assert_eq!(board.fix_rounds, 1);
    }

    #[test]
    fn events_the_board_cannot_be_in_and_other_families_are_refused() {
        let mut board = TaskBoard::default();
        board
            .apply(&plan(PlanSource::Planner, &["a"]), None)
            .unwrap();
        let before = board.clone();
        let finished = Event::TaskFinished {
            task: "a".into(),
            summary: "done".into(),
        };
        let err = board.apply(&finished, None).unwrap_err();
        assert!(err.contains("no passed check"), "{err}");
        let turn = Event::TurnStarted { turn: 1 };
        let err = board.apply(&turn, None).unwrap_err();
        assert!(err.contains("turn_started"), "{err}");
        assert_eq!(board, before, "a refused event changes nothing");
    }
}
