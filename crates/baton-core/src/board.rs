//! The task board: where each task of a run's plan stands, folded from the task events, and what
//! the run does next about tasks. Pure, like the rest of the reducer.

mod apply;
mod delegation;

use serde::{Deserialize, Serialize};

pub use delegation::{DelegatedTask, Delegation, OpenMerge};

use crate::settings::{OnTaskFailure, Planning, TaskSettings};
use crate::task::{TaskSpec, validate_tasks};

/// Output of a check shown to the model is cut to this many bytes (head and tail kept by the
/// engine before journaling; this is only a second bound for the prompt).
const MAX_CHECK_OUTPUT_IN_PROMPT: usize = 8 * 1024;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskBoard {
    pub tasks: Vec<TaskEntry>,
    pub final_check: Option<String>,
    /// The task being worked on.
    pub current: Option<String>,
    /// A check that started and has not finished (rerun on resume).
    pub open_check: Option<OpenCheck>,
    /// A rollback that started and has not finished (redone on resume).
    pub open_rollback: Option<OpenRollback>,
    pub final_checks: u32,
    /// The last final check's outcome: `None` before the first one or after tasks were added.
    pub final_passed: Option<bool>,
    /// The last failed final check's output, for the fix task.
    pub final_output: Option<String>,
    /// Fix-task rounds added after failed final checks.
    pub fix_rounds: u32,
    /// The run paused once for a person to review the plan (`--plan-only`).
    pub plan_reviewed: bool,
    /// A parallel task's merge whose workspace restore has not finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_merge: Option<OpenMerge>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenCheck {
    pub task: Option<String>,
    pub attempt: u32,
    pub command: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenRollback {
    pub task: Option<String>,
    pub snapshot: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskEntry {
    pub spec: TaskSpec,
    pub status: TaskStatus,
    /// Approaches started (0 before the first).
    pub approach: u32,
    /// The current fix attempt within the approach (1-based; grows with each failed check).
    pub attempt: u32,
    /// The agent called `finish` for this task: its check is due.
    pub claimed_done: Option<String>,
    /// The last check of the current attempt passed.
    pub check_passed: bool,
    /// The last failed check's command and output.
    pub last_failure: Option<String>,
    /// "Approach N failed because …" notes, told to the next approach.
    pub failed_approaches: Vec<String>,
    /// The snapshot the task started from: where a rollback goes.
    pub start_snapshot: Option<String>,
    pub summary: Option<String>,
    pub reason: Option<String>,
    /// What the task's model calls (all approaches) cost, as far as priced.
    #[serde(default)]
    pub cost_usd: f64,
    /// Prompt plus completion tokens of the task's model calls.
    #[serde(default)]
    pub tokens: u64,
    /// Turns worked on the task (all approaches).
    #[serde(default)]
    pub turns: u32,
    /// Milliseconds the run spent on the task while running (all approaches).
    #[serde(default)]
    pub running_ms: u64,
    /// `--parallel`: the child run working on the task in its own worktree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation: Option<Delegation>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    #[default]
    Pending,
    Running,
    Verified,
    Failed,
    Skipped,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::Running => "running",
            TaskStatus::Verified => "verified",
            TaskStatus::Failed => "failed",
            TaskStatus::Skipped => "skipped",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Verified | TaskStatus::Failed | TaskStatus::Skipped
        )
    }
}

/// What the engine must do about tasks when no turn is in progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskAction {
    /// Work on a task continues: start (or pause at the limit of) the next turn.
    ContinueTurns,
    StartTask {
        task: String,
        approach: u32,
    },
    RunCheck {
        task: Option<String>,
        attempt: u32,
        command: String,
    },
    CompleteTask {
        task: String,
        summary: String,
    },
    Rollback {
        task: String,
        snapshot: String,
        reason: String,
    },
    /// Redo a rollback that started but did not finish.
    FinishRollback {
        task: Option<String>,
        snapshot: String,
    },
    FailTask {
        task: String,
        reason: String,
    },
    SkipTask {
        task: String,
        reason: String,
    },
    /// `--parallel`: hand these ready tasks to child runs in their own worktrees.
    Delegate {
        tasks: Vec<String>,
    },
    /// Run (or resume) the child runs of these delegated tasks until they end.
    AwaitDelegated {
        tasks: Vec<DelegatedTask>,
    },
    /// Merge a delegated task's verified work (snapshot `theirs`, made from `base`).
    Merge {
        task: String,
        base: String,
        theirs: String,
        summary: String,
    },
    /// Redo a merge's workspace restore that started but did not finish.
    FinishMerge {
        task: String,
        snapshot: String,
    },
    /// The final check failed: add a task that fixes it.
    AddFixTask {
        task: TaskSpec,
    },
    /// `--plan-only`: pause once so a person can review the plan.
    PauseForReview,
    /// Every task is settled: end the run with this report.
    End {
        report: String,
        outcome: BoardOutcome,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoardOutcome {
    AllVerified,
    SomeFailed,
}

impl TaskBoard {
    pub fn entry(&self, id: &str) -> Option<&TaskEntry> {
        self.tasks.iter().find(|t| t.spec.id == id)
    }

    fn entry_mut(&mut self, id: &str) -> Result<&mut TaskEntry, String> {
        self.tasks
            .iter_mut()
            .find(|t| t.spec.id == id)
            .ok_or_else(|| format!("there is no task `{id}`"))
    }

    pub fn current_entry(&self) -> Option<&TaskEntry> {
        self.current.as_deref().and_then(|id| self.entry(id))
    }

    /// Whether work on any task has begun (a plan may be replaced only before).
    pub fn any_started(&self) -> bool {
        self.tasks.iter().any(|t| t.approach > 0)
    }

    pub fn count(&self, status: TaskStatus) -> usize {
        self.tasks.iter().filter(|t| t.status == status).count()
    }

    fn add_tasks(
        &mut self,
        tasks: &[TaskSpec],
        final_check: Option<&String>,
    ) -> Result<(), String> {
        let existing: Vec<&str> = self.tasks.iter().map(|t| t.spec.id.as_str()).collect();
        validate_tasks(tasks, &existing).map_err(|e| e.to_string())?;
        self.tasks.extend(tasks.iter().map(|spec| TaskEntry {
            spec: spec.clone(),
            status: TaskStatus::Pending,
            approach: 0,
            attempt: 0,
            claimed_done: None,
            check_passed: false,
            last_failure: None,
            failed_approaches: Vec::new(),
            start_snapshot: None,
            summary: None,
            reason: None,
            cost_usd: 0.0,
            tokens: 0,
            turns: 0,
            running_ms: 0,
            delegation: None,
        }));
        if let Some(check) = final_check {
            self.final_check = Some(check.clone());
        }
        // New work: the final check has to pass again after it.
        self.final_passed = None;
        Ok(())
    }

    /// The entry of `task` when it may start (as itself or delegated): no task is in
    /// progress and this one is pending.
    fn startable(&mut self, task: &str) -> Result<&mut TaskEntry, String> {
        if let Some(current) = &self.current {
            return Err(format!("task `{current}` is still in progress"));
        }
        let entry = self.entry_mut(task)?;
        if entry.status != TaskStatus::Pending {
            return Err(format!("task `{task}` is {}", entry.status.as_str()));
        }
        Ok(entry)
    }

    fn start_task(
        &mut self,
        task: &str,
        approach: u32,
        snapshot: Option<String>,
    ) -> Result<(), String> {
        let entry = self.startable(task)?;
        if approach != entry.approach + 1 {
            return Err(format!("expected approach {}", entry.approach + 1));
        }
        entry.status = TaskStatus::Running;
        entry.approach = approach;
        entry.attempt = 1;
        entry.claimed_done = None;
        entry.check_passed = false;
        entry.start_snapshot = snapshot;
        self.current = Some(task.to_string());
        Ok(())
    }

    pub(crate) fn count_turn(&mut self) {
        if let Some(id) = self.current.clone()
            && let Ok(entry) = self.entry_mut(&id)
        {
            entry.turns = entry.turns.saturating_add(1);
        }
    }

    pub(crate) fn add_running_time(&mut self, task: &str, ms: u64) {
        if let Ok(entry) = self.entry_mut(task) {
            entry.running_ms = entry.running_ms.saturating_add(ms);
        }
    }

    /// Charges a finished model call to the current task, if any.
    pub(crate) fn charge(&mut self, usage: Option<&crate::message::Usage>, cost_usd: Option<f64>) {
        let Some(id) = self.current.clone() else {
            return;
        };
        if let Ok(entry) = self.entry_mut(&id) {
            if let Some(usage) = usage {
                entry.tokens = entry
                    .tokens
                    .saturating_add(usage.prompt_tokens)
                    .saturating_add(usage.completion_tokens);
            }
            if let Some(cost) = cost_usd.filter(|c| c.is_finite()) {
                entry.cost_usd += cost;
            }
        }
    }

    /// The agent called `finish` while a task is current: that claims the task done.
    pub(crate) fn claim_done(&mut self, summary: &str) -> bool {
        let Some(id) = self.current.clone() else {
            return false;
        };
        if let Ok(entry) = self.entry_mut(&id) {
            entry.claimed_done = Some(summary.to_string());
        }
        true
    }

    fn check_started(&mut self, check: OpenCheck) -> Result<(), String> {
        if self.open_check.is_some() {
            return Err("another check is still running".into());
        }
        match &check.task {
            Some(task) => {
                if self.current.as_deref() != Some(task) {
                    return Err(format!("task `{task}` is not the current task"));
                }
                let entry = self.entry_mut(task)?;
                if entry.claimed_done.is_none() {
                    return Err(format!("task `{task}` was not reported done"));
                }
                if check.attempt != entry.attempt {
                    return Err(format!("expected attempt {}", entry.attempt));
                }
            }
            None => {
                if self.current.is_some() || !self.tasks.iter().all(|t| t.status.is_terminal()) {
                    return Err("the final check runs after all tasks".into());
                }
            }
        }
        self.open_check = Some(check);
        Ok(())
    }

    /// Applies a finished check; returns the note for the model when a task's check failed.
    fn check_finished(
        &mut self,
        task: Option<&String>,
        attempt: u32,
        passed: bool,
        exit_code: Option<i32>,
        output: &str,
    ) -> Result<Option<String>, String> {
        let Some(open) = self
            .open_check
            .take_if(|o| o.task.as_ref() == task && o.attempt == attempt)
        else {
            return Err("no such check is running".into());
        };
        let failure = format!(
            "The acceptance check `{}` failed ({}). Its output:\n{}",
            open.command,
            exit_code.map_or("it did not exit normally".to_string(), |c| format!(
                "exit code {c}"
            )),
            cut(output, MAX_CHECK_OUTPUT_IN_PROMPT)
        );
        let Some(task) = task else {
            self.final_checks += 1;
            self.final_passed = Some(passed);
            self.final_output = (!passed).then_some(failure);
            return Ok(None);
        };
        let entry = self.entry_mut(task)?;
        if passed {
            entry.check_passed = true;
            return Ok(None);
        }
        entry.claimed_done = None;
        entry.attempt += 1;
        entry.last_failure = Some(failure.clone());
        Ok(Some(format!(
            "{failure}\n\nThe task is not done until this check passes. Find the cause, fix it, \
             and call `finish` again."
        )))
    }

    fn task_finished(&mut self, task: &str, summary: &str) -> Result<(), String> {
        let entry = self.entry_mut(task)?;
        if !entry.check_passed {
            return Err(format!("task `{task}` has no passed check"));
        }
        entry.status = TaskStatus::Verified;
        entry.summary = Some(summary.to_string());
        self.finish_merge(task)?;
        self.current = None;
        Ok(())
    }

    fn task_ended(&mut self, task: &str, status: TaskStatus, reason: &str) -> Result<(), String> {
        let entry = self.entry_mut(task)?;
        if entry.status.is_terminal() {
            return Err(format!(
                "task `{task}` is already {}",
                entry.status.as_str()
            ));
        }
        entry.status = status;
        entry.reason = Some(reason.to_string());
        if self.current.as_deref() == Some(task) {
            self.current = None;
        }
        Ok(())
    }

    fn rollback_started(
        &mut self,
        task: Option<&String>,
        snapshot: &str,
        reason: &str,
    ) -> Result<(), String> {
        if self.open_rollback.is_some() {
            return Err("another rollback is in progress".into());
        }
        if let Some(task) = task {
            if self.current.as_deref() != Some(task) {
                return Err(format!("task `{task}` is not the current task"));
            }
            let entry = self.entry_mut(task)?;
            let approach = entry.approach;
            entry
                .failed_approaches
                .push(format!("Approach {approach} failed: {reason}"));
        }
        self.open_rollback = Some(OpenRollback {
            task: task.cloned(),
            snapshot: snapshot.to_string(),
        });
        Ok(())
    }

    fn rollback_finished(&mut self, task: Option<&String>, snapshot: &str) -> Result<(), String> {
        if self
            .open_rollback
            .take_if(|r| r.task.as_ref() == task && r.snapshot == snapshot)
            .is_none()
        {
            return Err("no such rollback is in progress".into());
        }
        if let Some(task) = task {
            let entry = self.entry_mut(task)?;
            entry.status = TaskStatus::Pending;
            entry.claimed_done = None;
            self.current = None;
        }
        Ok(())
    }

    /// The next step about tasks, when no turn is in progress.
    pub fn next(&self, settings: &TaskSettings) -> TaskAction {
        if settings.planning == Planning::PlannerThenReview
            && !self.plan_reviewed
            && !self.any_started()
        {
            return TaskAction::PauseForReview;
        }
        if let Some(rollback) = &self.open_rollback {
            return TaskAction::FinishRollback {
                task: rollback.task.clone(),
                snapshot: rollback.snapshot.clone(),
            };
        }
        if let Some(check) = &self.open_check {
            return TaskAction::RunCheck {
                task: check.task.clone(),
                attempt: check.attempt,
                command: check.command.clone(),
            };
        }
        if let Some(entry) = self.current_entry() {
            return current_task_action(entry, settings);
        }
        let parallel = usize::try_from(settings.parallel).unwrap_or(usize::MAX);
        if let Some(action) = self.delegated_action(parallel) {
            return action;
        }
        for entry in self
            .tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Pending)
        {
            let blocked = entry.spec.deps.iter().find(|dep| {
                self.entry(dep)
                    .is_some_and(|d| matches!(d.status, TaskStatus::Failed | TaskStatus::Skipped))
            });
            if let Some(dep) = blocked {
                return TaskAction::SkipTask {
                    task: entry.spec.id.clone(),
                    reason: format!("it depends on `{dep}`, which did not succeed"),
                };
            }
        }
        let mut ready = self.ready();
        if parallel > 1 {
            let wave: Vec<String> = ready
                .clone()
                .take(parallel)
                .map(|t| t.spec.id.clone())
                .collect();
            // One ready task gains nothing from a worktree: it runs in the workspace.
            if wave.len() > 1 {
                return TaskAction::Delegate { tasks: wave };
            }
        }
        if let Some(entry) = ready.next() {
            return TaskAction::StartTask {
                task: entry.spec.id.clone(),
                approach: entry.approach + 1,
            };
        }
        self.end_action(settings)
    }

    /// Pending tasks whose dependencies are all verified, in plan order.
    fn ready(&self) -> impl Iterator<Item = &TaskEntry> + Clone {
        self.tasks.iter().filter(|t| {
            t.status == TaskStatus::Pending
                && t.spec.deps.iter().all(|dep| {
                    self.entry(dep)
                        .is_some_and(|d| d.status == TaskStatus::Verified)
                })
        })
    }

    fn end_action(&self, settings: &TaskSettings) -> TaskAction {
        let all_verified = self.tasks.iter().all(|t| t.status == TaskStatus::Verified);
        if let (true, Some(command)) = (all_verified, &self.final_check) {
            match self.final_passed {
                None => {
                    return TaskAction::RunCheck {
                        task: None,
                        attempt: self.final_checks + 1,
                        command: command.clone(),
                    };
                }
                Some(false) if self.fix_rounds < settings.final_fix_rounds => {
                    let round = self.fix_rounds + 1;
                    return TaskAction::AddFixTask {
                        task: TaskSpec {
                            id: format!("final-fix-{round}"),
                            title: format!("Make the final check pass (round {round})"),
                            instructions: format!(
                                "All planned tasks were verified, but the run's final check \
                                 fails.\n\n{}\n\nFind the cause and fix it without breaking \
                                 the finished tasks.",
                                self.final_output.as_deref().unwrap_or_default()
                            ),
                            deps: Vec::new(),
                            check: command.clone(),
                            risky: false,
                        },
                    };
                }
                _ => {}
            }
        }
        let final_ok = self.final_check.is_none() || self.final_passed == Some(true);
        let outcome = if all_verified && final_ok {
            BoardOutcome::AllVerified
        } else {
            BoardOutcome::SomeFailed
        };
        TaskAction::End {
            report: self.report(),
            outcome,
        }
    }

    /// A plain report of every task's end state.
    pub fn report(&self) -> String {
        let mut text = format!(
            "{} of {} tasks verified",
            self.count(TaskStatus::Verified),
            self.tasks.len()
        );
        let failed = self.count(TaskStatus::Failed);
        let skipped = self.count(TaskStatus::Skipped);
        if failed + skipped > 0 {
            text.push_str(&format!(", {failed} failed, {skipped} skipped"));
        }
        match (&self.final_check, self.final_passed) {
            (Some(_), Some(true)) => text.push_str("; the final check passed"),
            (Some(_), Some(false)) => text.push_str("; the final check FAILED"),
            (Some(_), None) => text.push_str("; the final check did not run"),
            (None, _) => {}
        }
        text.push('.');
        for entry in &self.tasks {
            let detail = match entry.status {
                TaskStatus::Verified => entry.summary.clone().unwrap_or_default(),
                _ => entry.reason.clone().unwrap_or_default(),
            };
            text.push_str(&format!(
                "\n- {} [{}] {}{}",
                entry.spec.id,
                entry.status.as_str(),
                entry.spec.title,
                if detail.is_empty() {
                    String::new()
                } else {
                    format!(": {}", first_line(&detail))
                }
            ));
        }
        text
    }

    /// The summaries of settled tasks, handed to the tasks after them (`None` before any).
    pub fn handoff(&self) -> Option<String> {
        let done: Vec<&TaskEntry> = self
            .tasks
            .iter()
            .filter(|t| t.status.is_terminal())
            .collect();
        if done.is_empty() {
            return None;
        }
        let mut text = String::from("Handoff from earlier tasks:");
        for t in done {
            let detail = match t.status {
                TaskStatus::Verified => t.summary.clone(),
                _ => t.reason.clone(),
            };
            text.push_str(&format!(
                "\n- {} [{}] {}: {}",
                t.spec.id,
                t.status.as_str(),
                t.spec.title,
                detail.unwrap_or_default().trim()
            ));
        }
        Some(text)
    }

    /// What a task's fresh context starts with: the handoff of the work so far and the task.
    pub fn brief(&self, task: &str) -> Option<String> {
        let entry = self.entry(task)?;
        let mut text = String::from("You are working through the goal as a list of tasks.");
        if let Some(handoff) = self.handoff() {
            text.push_str("\n\n");
            text.push_str(&handoff);
        }
        text.push_str(&format!(
            "\n\nYour current task is `{}`: {}\n\n{}\n\nIt is done when this check passes (exit \
             code 0), run from the workspace root:\n    {}\nWork only on this task. When you \
             believe it is done, call `finish` with a short summary of what you changed: baton \
             then runs the check and tells you if it fails.",
            entry.spec.id,
            entry.spec.title,
            entry.spec.instructions.trim(),
            entry.spec.check
        ));
        if !entry.failed_approaches.is_empty() {
            text.push_str(
                "\n\nEarlier approaches to this task failed and the workspace was rolled back to \
                 where the task started. Do something different this time:",
            );
            for note in &entry.failed_approaches {
                text.push_str(&format!("\n- {}", first_lines(note, 20)));
            }
        }
        Some(text)
    }
}

fn current_task_action(entry: &TaskEntry, settings: &TaskSettings) -> TaskAction {
    let task = entry.spec.id.clone();
    if entry.check_passed {
        return TaskAction::CompleteTask {
            task,
            summary: entry.claimed_done.clone().unwrap_or_default(),
        };
    }
    if entry.claimed_done.is_some() {
        return TaskAction::RunCheck {
            task: Some(task),
            attempt: entry.attempt,
            command: entry.spec.check.clone(),
        };
    }
    if entry.attempt > settings.fix_attempts.max(1) {
        let reason = format!(
            "its check still failed after {} attempts. {}",
            settings.fix_attempts.max(1),
            entry.last_failure.as_deref().unwrap_or_default()
        );
        return match (&entry.start_snapshot, entry.approach < settings.approaches) {
            (Some(snapshot), true) => TaskAction::Rollback {
                task,
                snapshot: snapshot.clone(),
                reason,
            },
            (None, true) => TaskAction::FailTask {
                task,
                reason: format!("{reason} (no snapshot to roll back to for another approach)"),
            },
            (_, false) => TaskAction::FailTask {
                task,
                reason: format!(
                    "approach {} of {}: {reason}",
                    entry.approach, settings.approaches
                ),
            },
        };
    }
    TaskAction::ContinueTurns
}

/// What the run does once tasks are settled and some failed.
pub fn failure_policy(settings: &TaskSettings) -> OnTaskFailure {
    settings.on_failure
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

fn first_lines(text: &str, n: usize) -> String {
    text.lines().take(n).collect::<Vec<_>>().join("\n  ")
}

/// At most `max` bytes of `text`, cut on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}
