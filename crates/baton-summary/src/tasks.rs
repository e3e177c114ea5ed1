//! A run's task graph as the dashboard and `baton status` show it: a pure fold over the journal.
//!
//! The task events fold through the engine's own `TaskBoard` (`TaskBoard::apply`, the rules the
//! reducer uses), so the view and the engine share one vocabulary and one set of rules; no
//! replay of the whole run is needed. The board's rules that need the rest of the run are the
//! view's to supply: a task's check starts only after the model claimed the task done, and the
//! check starting is taken as that claim. An event the board refuses — a journal of a newer
//! baton with other rules — is passed over, and unknown events are not task events: the view
//! never fails. Beside the board it keeps what the board does not: each task's check count and
//! latest outcome, the final check's outcome, and the states `checking` (a task's check is
//! running) and a todo item's `done`. A run without a plan shows the model's own todo list
//! (`update_plan`) instead, from its successful calls.

use std::collections::HashMap;

use baton_core::board::{TaskBoard, TaskEntry, TaskStatus};
use baton_core::memory::{PlanItem, PlanStatus, UPDATE_PLAN_TOOL, parse_plan_update};
use baton_core::{Event, ToolOutcome};
use serde::Serialize;

/// Where a task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Pending,
    Running,
    /// Its acceptance check is running.
    Checking,
    /// Its check passed.
    Verified,
    Failed,
    Skipped,
    /// A todo item the model marked done (todo items have no check).
    Done,
}

impl TaskState {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Pending => "pending",
            TaskState::Running => "running",
            TaskState::Checking => "checking",
            TaskState::Verified => "verified",
            TaskState::Failed => "failed",
            TaskState::Skipped => "skipped",
            TaskState::Done => "done",
        }
    }

    /// Counts towards "tasks done".
    pub fn is_done(self) -> bool {
        matches!(self, TaskState::Verified | TaskState::Done)
    }
}

/// The outcome of a task's latest check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CheckOutcome {
    pub passed: bool,
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
}

/// One task (or todo item).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TaskView {
    pub id: String,
    pub title: String,
    pub deps: Vec<String>,
    /// The acceptance check command (absent for todo items).
    pub check: Option<String>,
    pub state: TaskState,
    /// Approach (1-based, grows after a rollback) and fix attempt within it; 0 before it started.
    pub approach: u32,
    pub attempt: u32,
    /// Checks run so far.
    pub checks: u32,
    pub last_check: Option<CheckOutcome>,
    /// Why it failed or was skipped.
    pub reason: Option<String>,
    /// The agent's account of the work, once verified.
    pub summary: Option<String>,
}

/// Where the tasks shown come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskSource {
    /// `plan_set` events: a real task graph.
    Plan,
    /// The model's `update_plan` todo list.
    Todo,
    /// Neither.
    None,
}

/// The tasks of a run, ready to show.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TaskGraph {
    pub source: TaskSource,
    pub tasks: Vec<TaskView>,
    pub done: usize,
    pub total: usize,
    /// The run-level check after all tasks, and its latest outcome.
    pub final_check: Option<String>,
    pub final_check_outcome: Option<CheckOutcome>,
}

/// The fold state behind [`TaskGraph`]: the engine's own [`TaskBoard`], fed the journal's task
/// events through [`TaskBoard::apply`], and what the board does not keep.
#[derive(Clone, Debug, Default)]
pub struct TaskFold {
    board: TaskBoard,
    /// Per task: the checks run so far and the latest one's outcome.
    checks: HashMap<String, (u32, CheckOutcome)>,
    final_outcome: Option<CheckOutcome>,
    todo: Vec<PlanItem>,
    /// `update_plan` calls started and not finished: call id → arguments.
    open_plan_calls: HashMap<String, String>,
}

impl TaskFold {
    /// Folds one event. An event the board refuses (a journal whose rules this baton does not
    /// know) leaves the view as it was: the view never fails.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::ToolCallStarted {
                call_id,
                name,
                arguments,
                ..
            } => {
                if name == UPDATE_PLAN_TOOL {
                    self.open_plan_calls
                        .insert(call_id.clone(), arguments.clone());
                }
            }
            Event::ToolCallFinished {
                call_id, result, ..
            } => {
                if let Some(arguments) = self.open_plan_calls.remove(call_id)
                    && result.outcome == ToolOutcome::Success
                    && let Ok(plan) = parse_plan_update(&arguments)
                {
                    self.todo = plan;
                }
            }
            Event::CheckStarted {
                task: Some(task), ..
            } => {
                // A task's check starts only once the model claimed the task done. The claim is
                // the ending rules' (a `finish` call, or a reply taken as one), which this view
                // does not replay: the check starting is its record. A check the board
                // refuses leaves no claim behind.
                let mut claimed = self.board.clone();
                if let Some(entry) = claimed.tasks.iter_mut().find(|t| t.spec.id == *task) {
                    entry.claimed_done.get_or_insert_with(String::new);
                }
                if claimed.apply(event, None).is_ok() {
                    self.board = claimed;
                }
            }
            Event::CheckFinished {
                task,
                passed,
                exit_code,
                duration_ms,
                ..
            } => {
                if self.board.apply(event, None).is_err() {
                    return;
                }
                let outcome = CheckOutcome {
                    passed: *passed,
                    exit_code: *exit_code,
                    duration_ms: *duration_ms,
                };
                match task {
                    Some(task) => {
                        let (count, last) = self
                            .checks
                            .entry(task.clone())
                            .or_insert((0, outcome.clone()));
                        *count += 1;
                        *last = outcome;
                    }
                    None => self.final_outcome = Some(outcome),
                }
            }
            // Every other task event is the board's; the rest of the journal is not.
            _ => {
                let _ = self.board.apply(event, None);
            }
        }
    }

    pub fn graph(&self) -> TaskGraph {
        let (source, tasks) = if !self.board.tasks.is_empty() {
            (
                TaskSource::Plan,
                self.board.tasks.iter().map(|t| self.view(t)).collect(),
            )
        } else if !self.todo.is_empty() {
            (TaskSource::Todo, todo_tasks(&self.todo))
        } else {
            (TaskSource::None, Vec::new())
        };
        TaskGraph {
            source,
            done: tasks
                .iter()
                .filter(|t: &&TaskView| t.state.is_done())
                .count(),
            total: tasks.len(),
            tasks,
            final_check: self.board.final_check.clone(),
            final_check_outcome: self.final_outcome.clone(),
        }
    }

    fn view(&self, entry: &TaskEntry) -> TaskView {
        let id = &entry.spec.id;
        let checking = self
            .board
            .open_check
            .as_ref()
            .is_some_and(|c| c.task.as_ref() == Some(id));
        let state = match entry.status {
            _ if checking => TaskState::Checking,
            TaskStatus::Pending => TaskState::Pending,
            TaskStatus::Running => TaskState::Running,
            TaskStatus::Verified => TaskState::Verified,
            TaskStatus::Failed => TaskState::Failed,
            TaskStatus::Skipped => TaskState::Skipped,
        };
        let checks = self.checks.get(id);
        TaskView {
            id: id.clone(),
            title: entry.spec.title.clone(),
            deps: entry.spec.deps.clone(),
            check: Some(entry.spec.check.clone()),
            state,
            approach: entry.approach,
            attempt: entry.attempt,
            checks: checks.map_or(0, |(n, _)| *n),
            last_check: checks.map(|(_, last)| last.clone()),
            reason: entry.reason.clone(),
            summary: entry.summary.clone(),
        }
    }
}

fn todo_tasks(todo: &[PlanItem]) -> Vec<TaskView> {
    todo.iter()
        .enumerate()
        .map(|(i, item)| TaskView {
            id: (i + 1).to_string(),
            title: item.step.clone(),
            deps: Vec::new(),
            check: None,
            state: match item.status {
                PlanStatus::Pending => TaskState::Pending,
                PlanStatus::InProgress => TaskState::Running,
                PlanStatus::Done => TaskState::Done,
            },
            approach: 0,
            attempt: 0,
            checks: 0,
            last_check: None,
            reason: None,
            summary: None,
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use baton_core::task::{PlanSource, TaskSpec};
    use baton_core::{ToolEffect, ToolResult};

    fn spec(id: &str, deps: &[&str]) -> TaskSpec {
        TaskSpec {
            id: id.into(),
            title: format!("title {id}"),
            instructions: format!("do {id}"),
            deps: deps.iter().map(|d| d.to_string()).collect(),
            check: format!("test {id}"),
            risky: false,
        }
    }

    fn fold(events: &[Event]) -> TaskGraph {
        let mut fold = TaskFold::default();
        for e in events {
            fold.apply(e);
        }
        fold.graph()
    }

    #[test]
    fn task_states_follow_their_events() {
        let check = |task: &str, attempt: u32, passed: bool| {
            [
                Event::CheckStarted {
                    task: Some(task.into()),
                    attempt,
                    command: format!("test {task}"),
                },
                Event::CheckFinished {
                    task: Some(task.into()),
                    attempt,
                    passed,
                    exit_code: Some(if passed { 0 } else { 1 }),
                    output: String::new(),
                    duration_ms: 5,
                },
            ]
        };
        let started = |task: &str, approach: u32| Event::TaskStarted {
            task: task.into(),
            approach,
            attempt: 1,
        };
        let mut events = vec![
            Event::PlanSet {
                source: PlanSource::User,
                tasks: vec![spec("a", &[]), spec("b", &["a"]), spec("c", &["b"])],
                final_check: Some("make test".into()),
            },
            started("a", 1),
        ];
        events.extend(check("a", 1, false));
        events.extend(check("a", 2, true));
        events.extend([
            Event::TaskFinished {
                task: "a".into(),
                summary: "did a".into(),
            },
            started("b", 1),
            // Its first approach rolled back: the second one starts from the task's snapshot.
            Event::RollbackStarted {
                task: Some("b".into()),
                snapshot: "snap-a".into(),
                reason: "stuck".into(),
            },
            Event::RollbackFinished {
                task: Some("b".into()),
                snapshot: "snap-a".into(),
            },
            started("b", 2),
            Event::TaskFailed {
                task: "b".into(),
                reason: "no luck".into(),
            },
            Event::TaskSkipped {
                task: "c".into(),
                reason: "b failed".into(),
            },
            // Unknown ids are ignored, not a panic.
            Event::TaskFinished {
                task: "zz".into(),
                summary: String::new(),
            },
        ]);
        let graph = fold(&events);
        assert_eq!(graph.source, TaskSource::Plan);
        let states: Vec<_> = graph.tasks.iter().map(|t| t.state).collect();
        assert_eq!(
            states,
            [TaskState::Verified, TaskState::Failed, TaskState::Skipped]
        );
        assert_eq!((graph.done, graph.total), (1, 3));
        let a = &graph.tasks[0];
        assert_eq!((a.attempt, a.checks), (2, 2));
        assert_eq!(a.summary.as_deref(), Some("did a"));
        assert_eq!(graph.tasks[1].approach, 2);
        assert_eq!(graph.tasks[2].reason.as_deref(), Some("b failed"));
        assert_eq!(graph.final_check.as_deref(), Some("make test"));
    }

    #[test]
    fn a_running_check_shows_and_an_event_the_board_refuses_changes_nothing() {
        let mut fold = TaskFold::default();
        let plan = Event::PlanSet {
            source: PlanSource::User,
            tasks: vec![spec("a", &[]), spec("b", &["a"])],
            final_check: None,
        };
        let started = Event::TaskStarted {
            task: "a".into(),
            approach: 1,
            attempt: 1,
        };
        for event in [plan, started] {
            fold.apply(&event);
        }
        let before = fold.graph();
        // `b` cannot start while `a` is in progress; a check of attempt 2 was never due.
        fold.apply(&Event::TaskStarted {
            task: "b".into(),
            approach: 1,
            attempt: 1,
        });
        fold.apply(&Event::CheckFinished {
            task: Some("a".into()),
            attempt: 2,
            passed: true,
            exit_code: Some(0),
            output: String::new(),
            duration_ms: 1,
        });
        assert_eq!(fold.graph(), before);
        fold.apply(&Event::CheckStarted {
            task: Some("a".into()),
            attempt: 1,
            command: "test a".into(),
        });
        let states: Vec<_> = fold.graph().tasks.iter().map(|t| t.state).collect();
        assert_eq!(states, [TaskState::Checking, TaskState::Pending]);
    }

    #[test]
    fn without_a_plan_the_latest_successful_todo_list_is_shown() {
        let call = |id: &str, args: &str| Event::ToolCallStarted {
            turn: 1,
            call_id: id.into(),
            name: UPDATE_PLAN_TOOL.into(),
            arguments: args.into(),
            effect: ToolEffect::ReadOnly,
        };
        let done = |id: &str, outcome: ToolOutcome| Event::ToolCallFinished {
            turn: 1,
            call_id: id.into(),
            result: ToolResult {
                outcome,
                content: String::new(),
                exit_code: None,
            },
            duration_ms: 1,
        };
        let graph = fold(&[
            call(
                "1",
                r#"{"items":[{"step":"read","status":"done"},{"step":"fix","status":"in_progress"}]}"#,
            ),
            done("1", ToolOutcome::Success),
            call("2", r#"{"items":[{"step":"ignored","status":"done"}]}"#),
            done("2", ToolOutcome::Error),
        ]);
        assert_eq!(graph.source, TaskSource::Todo);
        let got: Vec<_> = graph
            .tasks
            .iter()
            .map(|t| (t.title.as_str(), t.state))
            .collect();
        assert_eq!(
            got,
            [("read", TaskState::Done), ("fix", TaskState::Running)]
        );
        assert_eq!((graph.done, graph.total), (1, 2));
        assert_eq!(fold(&[]).source, TaskSource::None);
    }
}
