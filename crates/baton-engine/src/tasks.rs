//! The task graph in the loop: starting tasks in fresh contexts, running acceptance checks,
//! rolling a failed approach back, and ending the run with a report. What to do is decided by
//! the pure board (`baton_core::board`); this module journals the intent, acts, and journals the
//! outcome, so a process killed in any of these phases resumes at the same step.

use std::time::{Duration, Instant};

use baton_core::board::{BoardOutcome, TaskAction};
use baton_core::task::{PlanSource, SnapshotReason};
use baton_core::{Event, OnTaskFailure, PauseReason, ToolOutcome};
use baton_tools::{Tool, ToolContext, Workspace};

use crate::Engine;
use crate::EngineError;
use crate::engine::elapsed_ms;
use crate::journal::Journal;
use crate::snapshots::JournalUnchanged;

/// Check output journaled at most (head and tail kept): enough to fix from, bounded for the
/// journal and the prompt.
const MAX_CHECK_OUTPUT: usize = 16 * 1024;

impl Engine {
    pub(crate) async fn task_step(
        &self,
        journal: &mut Journal,
        workspace: &Workspace,
        action: TaskAction,
    ) -> Result<(), EngineError> {
        match action {
            // Handled by the turn logic (`next_action` never returns it).
            TaskAction::ContinueTurns => Ok(()),
            TaskAction::StartTask { task, approach } => {
                self.start_task(journal, workspace, task, approach).await
            }
            TaskAction::Delegate { tasks } => self.delegate(journal, workspace, tasks).await,
            TaskAction::AwaitDelegated { .. } => self.await_delegated(journal, workspace).await,
            TaskAction::Merge {
                task,
                base,
                theirs,
                summary,
            } => {
                self.merge_task(journal, workspace, task, base, theirs, summary)
                    .await
            }
            TaskAction::FinishMerge { task, snapshot } => {
                self.finish_merge(journal, workspace, task, snapshot, None)
                    .await
            }
            TaskAction::RunCheck {
                task,
                attempt,
                command,
            } => {
                let open = journal
                    .state()
                    .board
                    .as_ref()
                    .is_some_and(|b| b.open_check.is_some());
                if !open {
                    journal
                        .record(Event::CheckStarted {
                            task: task.clone(),
                            attempt,
                            command: command.clone(),
                        })
                        .await?;
                }
                self.run_check(journal, workspace, task, attempt, &command)
                    .await
            }
            TaskAction::CompleteTask { task, summary } => {
                journal
                    .record(Event::TaskFinished {
                        task: task.clone(),
                        summary,
                    })
                    .await?;
                self.take_snapshot(
                    journal,
                    workspace,
                    SnapshotReason::TaskVerified,
                    Some(task),
                    JournalUnchanged::Yes,
                )
                .await
            }
            TaskAction::Rollback {
                task,
                snapshot,
                reason,
            } => {
                journal
                    .record(Event::RollbackStarted {
                        task: Some(task.clone()),
                        snapshot: snapshot.clone(),
                        reason,
                    })
                    .await?;
                self.finish_rollback(journal, workspace, Some(task), snapshot)
                    .await
            }
            TaskAction::FinishRollback { task, snapshot } => {
                self.finish_rollback(journal, workspace, task, snapshot)
                    .await
            }
            TaskAction::FailTask { task, reason } => self.fail_task(journal, task, reason).await,
            TaskAction::SkipTask { task, reason } => {
                journal.record(Event::TaskSkipped { task, reason }).await
            }
            TaskAction::AddFixTask { task } => {
                journal
                    .record(Event::PlanSet {
                        source: PlanSource::Baton,
                        tasks: vec![task],
                        final_check: None,
                    })
                    .await
            }
            TaskAction::PauseForReview => {
                self.end_run(
                    journal,
                    Event::RunPaused {
                        reason: PauseReason::PlanReview,
                        detail: "the plan is ready for review (`baton plan` prints it); \
                                 `baton resume` works through it, `baton resume --plan FILE` \
                                 replaces it first"
                            .into(),
                    },
                )
                .await
            }
            TaskAction::End { report, outcome } => {
                self.remove_settled_worktrees(journal, workspace).await;
                match outcome {
                    BoardOutcome::AllVerified => {
                        self.end_run(
                            journal,
                            Event::RunFinished {
                                summary: report,
                                finished_by: None,
                            },
                        )
                        .await
                    }
                    BoardOutcome::SomeFailed => {
                        self.end_run(journal, Event::RunFailed { error: report })
                            .await
                    }
                }
            }
        }
    }

    /// Journals a task's failure; pauses the run there when the settings say so.
    async fn fail_task(
        &self,
        journal: &mut Journal,
        task: String,
        reason: String,
    ) -> Result<(), EngineError> {
        journal
            .record(Event::TaskFailed {
                task: task.clone(),
                reason: reason.clone(),
            })
            .await?;
        let pause = journal
            .state()
            .settings
            .as_ref()
            .is_some_and(|s| s.tasks.on_failure == OnTaskFailure::Pause);
        if pause {
            self.end_run(
                journal,
                Event::RunPaused {
                    reason: PauseReason::TaskFailed,
                    detail: format!(
                        "task `{task}` failed: {}; `baton resume` goes on with the \
                         tasks that do not depend on it",
                        first_line(&reason)
                    ),
                },
            )
            .await?;
        }
        Ok(())
    }

    /// Begins an approach to a task in a fresh context, from a journaled snapshot.
    pub(crate) async fn start_task(
        &self,
        journal: &mut Journal,
        workspace: &Workspace,
        task: String,
        approach: u32,
    ) -> Result<(), EngineError> {
        if journal.state().snapshots.is_empty() {
            self.take_snapshot(
                journal,
                workspace,
                SnapshotReason::RunStart,
                None,
                JournalUnchanged::Yes,
            )
            .await?;
        }
        journal
            .record(Event::TaskStarted {
                task: task.clone(),
                approach,
                attempt: 1,
            })
            .await?;
        self.record_repo_map(journal, Some(task)).await
    }

    /// Runs a check like the agent's commands run (sandbox, policy, timeout, redaction) and
    /// journals its outcome. Abandoned by a stop: the open check is rerun on resume.
    async fn run_check(
        &self,
        journal: &mut Journal,
        workspace: &Workspace,
        task: Option<String>,
        attempt: u32,
        command: &str,
    ) -> Result<(), EngineError> {
        let timeout_secs = journal
            .state()
            .settings
            .as_ref()
            .map_or(600, |s| s.limits.shell_timeout_secs.clamp(1, 3600));
        let ctx = ToolContext {
            workspace: workspace.clone(),
            shell_timeout: Duration::from_secs(timeout_secs),
            secret_env_vars: self.parts.secret_env_vars.clone(),
            exec: self.parts.exec.clone(),
            run: None,
        };
        let arguments = serde_json::json!({ "command": command }).to_string();
        let started = Instant::now();
        let Some(result) = self
            .parts
            .stop
            .race(baton_tools::Shell.call(&ctx, &arguments))
            .await
        else {
            return Ok(());
        };
        // A check is the plan's command, not the agent's: a policy that wants to ask a person
        // about it simply fails the check.
        let _ = self.parts.exec.take_pause_request();
        let passed = result.outcome == ToolOutcome::Success && result.exit_code == Some(0);
        let output = cap_middle(&self.redactor.redact(&result.content), MAX_CHECK_OUTPUT);
        journal
            .record(Event::CheckFinished {
                task,
                attempt,
                passed,
                exit_code: result.exit_code,
                output,
                duration_ms: elapsed_ms(started),
            })
            .await
    }

    async fn finish_rollback(
        &self,
        journal: &mut Journal,
        workspace: &Workspace,
        task: Option<String>,
        snapshot: String,
    ) -> Result<(), EngineError> {
        self.restore_snapshot(journal, workspace, &snapshot).await?;
        journal
            .record(Event::RollbackFinished { task, snapshot })
            .await
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// Keeps the head and the tail of `text` within `max` bytes (errors tend to be at the end, the
/// command's context at the start).
pub(crate) fn cap_middle(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let half = max / 2;
    let mut head = half;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - half;
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}\n[... {} bytes not shown ...]\n{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

#[cfg(test)]
mod tests {
    use super::cap_middle;

    #[test]
    fn cap_middle_keeps_both_ends_and_char_boundaries() {
        let text = format!("{}{}{}", "a".repeat(100), "é".repeat(100), "z".repeat(100));
        let capped = cap_middle(&text, 120);
        assert!(capped.starts_with(&"a".repeat(60)));
        assert!(capped.ends_with(&"z".repeat(60)));
        assert!(capped.contains("bytes not shown"));
        assert_eq!(cap_middle("short", 120), "short");
    }
}
