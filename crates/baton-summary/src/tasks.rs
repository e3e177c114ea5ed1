//! A run's task graph as the dashboard and `baton status` show it: a pure fold over the journal.
//!
//! It folds the events themselves, not `RunState` or its `TaskBoard` (the engine's copy of the
//! same graph, whose rules `TaskBoard::apply` holds), and deliberately so: the board's rules need
//! the whole run around it — a task's check may start only after the model claimed the task done,
//! and that claim comes from the ending rules over replies and tool calls, so folding through the
//! board means replaying the run. This view needs no replay, shows a journal the reducer would
//! refuse (a newer baton's), and shows what the board does not keep (a task's check count, the
//! last check's exit code and duration, `checking` while a check runs). Its states are the board's
//! (`pending`, `running`, `verified`, `failed`, `skipped`) plus `checking` and a todo item's
//! `done`. A run without a plan shows the model's own todo list (`update_plan`) instead, from
//! its successful calls.

use std::collections::HashMap;

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

/// The fold state behind [`TaskGraph`].
#[derive(Clone, Debug, Default)]
pub struct TaskFold {
    tasks: Vec<TaskView>,
    index: HashMap<String, usize>,
    final_check: Option<String>,
    final_outcome: Option<CheckOutcome>,
    todo: Vec<PlanItem>,
    /// `update_plan` calls started and not finished: call id → arguments.
    open_plan_calls: HashMap<String, String>,
}

impl TaskFold {
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::PlanSet {
                tasks, final_check, ..
            } => {
                for spec in tasks {
                    // A later plan_set only adds tasks; a repeated id keeps the first one.
                    if self.index.contains_key(&spec.id) {
                        continue;
                    }
                    self.index.insert(spec.id.clone(), self.tasks.len());
                    self.tasks.push(TaskView {
                        id: spec.id.clone(),
                        title: spec.title.clone(),
                        deps: spec.deps.clone(),
                        check: Some(spec.check.clone()),
                        state: TaskState::Pending,
                        approach: 0,
                        attempt: 0,
                        checks: 0,
                        last_check: None,
                        reason: None,
                        summary: None,
                    });
                }
                if final_check.is_some() {
                    self.final_check = final_check.clone();
                }
            }
            Event::TaskStarted {
                task,
                approach,
                attempt,
            } => {
                if let Some(t) = self.task_mut(task) {
                    t.state = TaskState::Running;
                    t.approach = *approach;
                    t.attempt = *attempt;
                }
            }
            Event::CheckStarted {
                task: Some(task), ..
            } => {
                if let Some(t) = self.task_mut(task) {
                    t.state = TaskState::Checking;
                }
            }
            Event::CheckFinished {
                task,
                passed,
                exit_code,
                duration_ms,
                ..
            } => {
                let outcome = CheckOutcome {
                    passed: *passed,
                    exit_code: *exit_code,
                    duration_ms: *duration_ms,
                };
                match task {
                    Some(task) => {
                        if let Some(t) = self.task_mut(task) {
                            t.checks += 1;
                            t.last_check = Some(outcome);
                            // A failed check sends the agent back to work on the task, in
                            // its next fix attempt.
                            if t.state == TaskState::Checking && !passed {
                                t.state = TaskState::Running;
                                t.attempt += 1;
                            }
                        }
                    }
                    None => self.final_outcome = Some(outcome),
                }
            }
            Event::TaskFinished { task, summary } => {
                if let Some(t) = self.task_mut(task) {
                    t.state = TaskState::Verified;
                    t.summary = Some(summary.clone());
                }
            }
            Event::TaskFailed { task, reason } => {
                if let Some(t) = self.task_mut(task) {
                    t.state = TaskState::Failed;
                    t.reason = Some(reason.clone());
                }
            }
            Event::TaskSkipped { task, reason } => {
                if let Some(t) = self.task_mut(task) {
                    t.state = TaskState::Skipped;
                    t.reason = Some(reason.clone());
                }
            }
            Event::TaskDelegated { task, .. } => {
                if let Some(t) = self.task_mut(task) {
                    t.state = TaskState::Running;
                    t.approach += 1;
                    t.attempt = 1;
                }
            }
            Event::MergeConflicted {
                task,
                conflicts,
                follow_up,
            } => {
                if let Some(t) = self.task_mut(task) {
                    t.state = TaskState::Verified;
                    t.summary = Some(format!(
                        "verified in its worktree; merging conflicted in {}: follow-up {}",
                        conflicts.join(", "),
                        follow_up.id
                    ));
                }
                self.apply(&Event::PlanSet {
                    source: baton_core::task::PlanSource::Baton,
                    tasks: vec![follow_up.clone()],
                    final_check: None,
                });
            }
            Event::ToolCallStarted {
                call_id,
                name,
                arguments,
                ..
            } if name == UPDATE_PLAN_TOOL => {
                self.open_plan_calls
                    .insert(call_id.clone(), arguments.clone());
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
            _ => {}
        }
    }

    fn task_mut(&mut self, id: &str) -> Option<&mut TaskView> {
        self.index.get(id).and_then(|&i| self.tasks.get_mut(i))
    }

    pub fn graph(&self) -> TaskGraph {
        let (source, tasks) = if !self.tasks.is_empty() {
            (TaskSource::Plan, self.tasks.clone())
        } else if !self.todo.is_empty() {
            (TaskSource::Todo, todo_tasks(&self.todo))
        } else {
            (TaskSource::None, Vec::new())
        };
        TaskGraph {
            source,
            done: tasks.iter().filter(|t| t.state.is_done()).count(),
            total: tasks.len(),
            tasks,
            final_check: self.final_check.clone(),
            final_check_outcome: self.final_outcome.clone(),
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
            instructions: String::new(),
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
        let check = |task: &str, passed: bool| Event::CheckFinished {
            task: Some(task.into()),
            attempt: 1,
            passed,
            exit_code: Some(if passed { 0 } else { 1 }),
            output: String::new(),
            duration_ms: 5,
        };
        let graph = fold(&[
            Event::PlanSet {
                source: PlanSource::User,
                tasks: vec![spec("a", &[]), spec("b", &["a"]), spec("c", &["b"])],
                final_check: Some("make test".into()),
            },
            Event::TaskStarted {
                task: "a".into(),
                approach: 1,
                attempt: 1,
            },
            Event::CheckStarted {
                task: Some("a".into()),
                attempt: 1,
                command: "test a".into(),
            },
            check("a", false),
            Event::TaskStarted {
                task: "a".into(),
                approach: 1,
                attempt: 2,
            },
            check("a", true),
            Event::TaskFinished {
                task: "a".into(),
                summary: "did a".into(),
            },
            Event::TaskStarted {
                task: "b".into(),
                approach: 2,
                attempt: 1,
            },
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
