//! `--parallel N`: up to N ready tasks at once, each worked on by a child run (its own journal
//! in the same store, its own fresh context, verify-and-fix and rollbacks as any task) in a
//! worktree under `.baton/worktrees/CHILD_RUN` made from a snapshot of the workspace. Each task
//! is merged back as it returns verified, with a three-way merge in the shadow repository, while
//! the others work; its slot goes to the next ready task. A conflict leaves the workspace alone
//! and becomes a follow-up task.
//!
//! Crash safety comes from the journal order: `snapshot_taken` (wave start) → `task_delegated`
//! (the child's id is fixed before the child exists) → the child runs (resumed, not restarted,
//! by a resumed parent) → `task_returned` → `snapshot_taken` (before_merge: the workspace as it
//! is) → `merge_started` (the merge commit exists) → restore of the workspace (redone on
//! resume) → `task_finished`.

mod child;

use std::path::PathBuf;

use futures::future::BoxFuture;

use baton_core::board::{DelegatedTask, TaskAction};
use baton_core::task::{SnapshotReason, TaskSpec};
use baton_core::{Event, NextAction, PauseReason, RunId, next_action};
use baton_snapshot::{Change, MergeOutcome, ShadowRepo, SnapshotId};
use baton_tools::Workspace;

use crate::Engine;
use crate::EngineError;
use crate::journal::Journal;
use crate::tasks::cap_middle;
use child::{ChildEnd, Children, child_job};

/// Why tasks cannot go to worktrees.
enum Refusal {
    Git(String),
    Snapshot(baton_snapshot::SnapshotError),
}

/// The diff a conflicted task's follow-up gets, at most.
const MAX_FOLLOW_UP_DIFF: usize = 24 * 1024;

impl Engine {
    /// Snapshots the workspace as the tasks' base and journals a child run for each. Without
    /// snapshots (turned off, or git missing) there are no worktrees: the first task runs in the
    /// workspace instead.
    pub(crate) async fn delegate(
        &self,
        journal: &mut Journal,
        workspace: &Workspace,
        tasks: Vec<String>,
    ) -> Result<(), EngineError> {
        let base = match self.wave_base(journal, workspace).await {
            Ok(base) => base,
            Err(why) => {
                tracing::warn!("tasks run one at a time: {why}");
                let Some(task) = tasks.into_iter().next() else {
                    return Ok(());
                };
                return self.start_task(journal, workspace, task, 1).await;
            }
        };
        for task in tasks {
            journal
                .record(Event::TaskDelegated {
                    task,
                    child_run: RunId::new().to_string(),
                    base_snapshot: base.to_string(),
                })
                .await?;
        }
        Ok(())
    }

    /// The snapshot delegated tasks start from (journaled unless it is the last one journaled).
    async fn wave_base(
        &self,
        journal: &mut Journal,
        workspace: &Workspace,
    ) -> Result<SnapshotId, String> {
        if !self.snapshots_available() {
            return Err("parallel tasks need workspace snapshots, which are off".into());
        }
        let root = workspace.root().to_path_buf();
        let run = journal.run_id().to_string();
        let message = format!("wave_start turn {}", journal.state().turns_started);
        let at = jiff::Timestamp::now();
        let snapshot = tokio::task::spawn_blocking(move || {
            let repo = ShadowRepo::open(&root).map_err(Refusal::Snapshot)?;
            // Found out now, not after the children's work is paid for.
            repo.check_merge_support().map_err(Refusal::Git)?;
            repo.snapshot(&run, &message, at).map_err(Refusal::Snapshot)
        })
        .await
        .map_err(|e| format!("the snapshot task failed: {e}"))?
        .map_err(|refusal| match refusal {
            Refusal::Git(why) => why,
            Refusal::Snapshot(e) => {
                self.note_snapshot_error(&e);
                format!("cannot snapshot the workspace: {e}")
            }
        })?;
        let known = journal
            .state()
            .snapshots
            .last()
            .is_some_and(|s| s.snapshot == snapshot.id.as_str());
        if snapshot.change == Change::Created || !known {
            journal
                .record(Event::SnapshotTaken {
                    snapshot: snapshot.id.to_string(),
                    reason: SnapshotReason::WaveStart,
                    task: None,
                })
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(snapshot.id)
    }

    /// Drives the child runs of the delegated tasks until none is left working, and meanwhile
    /// whatever the board asks about them: each ended child is journaled (`task_returned`)
    /// as it ends, merged or failed, and a task that became ready takes its free slot — while
    /// the other children keep working. A child that pauses is parked; when only parked ones
    /// are left this run pauses with the first one's reason (a stop request: with its own).
    pub(crate) async fn await_delegated(
        &self,
        journal: &mut Journal,
        workspace: &Workspace,
    ) -> Result<(), EngineError> {
        let root = workspace.root().to_path_buf();
        let mut children = Children::default();
        loop {
            // Every await while children work polls them too: a child stalled in the middle of
            // a store transaction would hold the store's write lock against this run's append.
            // Ends that come in meanwhile are journaled in the same drain.
            while !children.ended.is_empty() {
                let (task, end) = children.ended.remove(0);
                match end? {
                    ChildEnd::Returned {
                        result,
                        cost_usd,
                        unpriced_calls,
                        prompt_tokens,
                        completion_tokens,
                        turns,
                    } => {
                        let record = Box::pin(journal.record(Event::TaskReturned {
                            task: task.task,
                            child_run: task.child_run,
                            result,
                            cost_usd,
                            unpriced_calls,
                            prompt_tokens,
                            completion_tokens,
                            turns,
                        }));
                        children.alongside(record).await?;
                    }
                    ChildEnd::Paused { reason, detail } => {
                        children.parked.push((task, reason, detail));
                    }
                }
            }
            let action = match next_action(journal.state()) {
                NextAction::Task(action) => action,
                _ => TaskAction::ContinueTurns,
            };
            match action {
                TaskAction::AwaitDelegated { tasks } => {
                    if !self.parts.stop.is_stopped() {
                        for delegated in tasks {
                            if children.started(&delegated.task) {
                                continue;
                            }
                            let task = delegated.task.clone();
                            let job = child_job(journal.state(), delegated)?;
                            children.start(&task, self.drive_child(root.clone(), job));
                        }
                    }
                    if children.running.is_empty() {
                        return self.pause_for_parked(journal, children.parked).await;
                    }
                    children.wait_for_one().await;
                }
                // Stopping: nothing new is handed out.
                TaskAction::Delegate { .. } if self.parts.stop.is_stopped() => {
                    if children.running.is_empty() {
                        return Ok(());
                    }
                    children.wait_for_one().await;
                }
                // Steps between the children's ends run while the children go on.
                action @ (TaskAction::Merge { .. }
                | TaskAction::FinishMerge { .. }
                | TaskAction::FailTask { .. }
                | TaskAction::SkipTask { .. }
                | TaskAction::Delegate { .. }) => {
                    let step = self.task_step_boxed(journal, workspace, action);
                    children.alongside(step).await?;
                }
                // Anything else is for the run loop, once no child is working (and every end is
                // journaled: the drain above ran with nothing running since).
                _ => {
                    if children.running.is_empty() {
                        return Ok(());
                    }
                    children.wait_for_one().await;
                }
            }
        }
    }

    /// At the run's end, the worktrees of verified tasks go (a merge removes its own, but a
    /// crash can cut that short, and a conflicted task's work was redone by its follow-up);
    /// those of failed tasks stay for a person to look at.
    pub(crate) async fn remove_settled_worktrees(&self, journal: &Journal, workspace: &Workspace) {
        let Some(board) = &journal.state().board else {
            return;
        };
        let dirs: Vec<PathBuf> = board
            .tasks
            .iter()
            .filter(|t| t.status == baton_core::board::TaskStatus::Verified)
            .filter_map(|t| t.delegation.as_ref())
            .map(|d| baton_state::StateDir::for_workspace(workspace.root()).worktree(&d.child_run))
            .filter(|dir| dir.exists())
            .collect();
        if dirs.is_empty() {
            return;
        }
        let removed = tokio::task::spawn_blocking(move || {
            for dir in dirs {
                if let Err(e) = std::fs::remove_dir_all(&dir) {
                    tracing::warn!("cannot remove worktree {}: {e}", dir.display());
                }
            }
        })
        .await;
        if let Err(e) = removed {
            tracing::warn!("removing worktrees failed: {e}");
        }
    }

    /// `task_step`, boxed: it is called from within a step (the compiler needs the recursion
    /// cut at a named type).
    fn task_step_boxed<'a>(
        &'a self,
        journal: &'a mut Journal,
        workspace: &'a Workspace,
        action: TaskAction,
    ) -> BoxFuture<'a, Result<(), EngineError>> {
        Box::pin(self.task_step(journal, workspace, action))
    }

    /// Every child left is paused: so is this run (a stop request pauses it in the run loop).
    async fn pause_for_parked(
        &self,
        journal: &mut Journal,
        parked: Vec<(DelegatedTask, PauseReason, String)>,
    ) -> Result<(), EngineError> {
        let Some((task, reason, detail)) = parked.into_iter().next() else {
            return Ok(());
        };
        if self.parts.stop.is_stopped() {
            return Ok(());
        }
        self.end_run(
            journal,
            Event::RunPaused {
                reason,
                detail: format!(
                    "task `{}` (parallel run {}) paused: {detail}; `baton resume` resumes it",
                    task.task, task.child_run
                ),
            },
        )
        .await
    }

    /// Three-way merges a returned task's work into the workspace's latest snapshot. Clean: the
    /// merge commit is journaled and the workspace restored to it. Conflicted: a follow-up task
    /// is added and the workspace stays as it is.
    pub(crate) async fn merge_task(
        &self,
        journal: &mut Journal,
        workspace: &Workspace,
        task: String,
        base: String,
        theirs: String,
        summary: String,
    ) -> Result<(), EngineError> {
        let state = journal.state();
        let last_journaled = state.snapshots.last().map(|s| s.snapshot.clone());
        let spec = state
            .board
            .as_ref()
            .and_then(|b| b.entry(&task))
            .map(|e| e.spec.clone())
            .ok_or_else(|| EngineError::Internal(format!("no task `{task}` to merge")))?;
        let follow_up_id = state
            .board
            .as_ref()
            .map_or_else(String::new, |b| b.unused_id(&format!("{task}-merge")));
        let root = workspace.root().to_path_buf();
        let run = journal.run_id().to_string();
        let message = format!("merge task {task}");
        let at = jiff::Timestamp::now();
        // "Ours" is the workspace as it is now, not as last journaled: whatever a person
        // changed while the run was paused is merged too, never reverted by the restore.
        let merged = tokio::task::spawn_blocking(move || {
            let (base, theirs) = (SnapshotId::parse(&base)?, SnapshotId::parse(&theirs)?);
            let repo = ShadowRepo::open(&root)?;
            let ours = repo.snapshot(&run, "before_merge", at)?.id;
            match repo.merge(&run, &base, &ours, &theirs, &message, at)? {
                MergeOutcome::Merged(id) => Ok((ours, MergeOutcome::Merged(id), String::new())),
                conflict => Ok((ours, conflict, repo.diff_snapshots(&base, &theirs)?)),
            }
        })
        .await
        .map_err(|e| EngineError::Internal(format!("the merge task failed: {e}")))?
        .map_err(|e: baton_snapshot::SnapshotError| EngineError::Workspace {
            path: workspace.root().display().to_string(),
            detail: format!("cannot merge task `{task}`: {e}"),
        })?;
        let (ours, merged, diff) = merged;
        if last_journaled.as_deref() != Some(ours.as_str()) {
            journal
                .record(Event::SnapshotTaken {
                    snapshot: ours.to_string(),
                    reason: SnapshotReason::BeforeMerge,
                    task: None,
                })
                .await?;
        }
        match (merged, diff) {
            (MergeOutcome::Merged(id), _) => {
                journal
                    .record(Event::MergeStarted {
                        task: task.clone(),
                        snapshot: id.to_string(),
                    })
                    .await?;
                self.finish_merge(journal, workspace, task, id.to_string(), Some(summary))
                    .await
            }
            (MergeOutcome::Conflict(conflicts), diff) => {
                let follow_up = TaskSpec {
                    id: follow_up_id,
                    title: format!("Redo `{task}` on the merged workspace"),
                    instructions: follow_up_instructions(&spec, &summary, &conflicts, &diff),
                    deps: Vec::new(),
                    check: spec.check.clone(),
                    risky: spec.risky,
                };
                journal
                    .record(Event::MergeConflicted {
                        task,
                        conflicts,
                        follow_up,
                    })
                    .await
            }
        }
    }

    /// Makes the workspace the merge commit (idempotent), records the task verified and removes
    /// its worktree.
    pub(crate) async fn finish_merge(
        &self,
        journal: &mut Journal,
        workspace: &Workspace,
        task: String,
        snapshot: String,
        summary: Option<String>,
    ) -> Result<(), EngineError> {
        self.restore_snapshot(journal, workspace, &snapshot).await?;
        let entry = journal.state().board.as_ref().and_then(|b| b.entry(&task));
        let summary = summary
            .or_else(|| entry.and_then(|e| e.claimed_done.clone()))
            .unwrap_or_default();
        let child = entry
            .and_then(|e| e.delegation.as_ref())
            .map(|d| d.child_run.clone());
        journal
            .record(Event::TaskFinished { task, summary })
            .await?;
        if let Some(child) = child {
            let dir = baton_state::StateDir::for_workspace(workspace.root()).worktree(&child);
            let removed = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&dir)).await;
            if let Ok(Err(e)) = removed
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!("cannot remove the worktree of merged run {child}: {e}");
            }
        }
        Ok(())
    }
}

fn follow_up_instructions(
    spec: &TaskSpec,
    summary: &str,
    conflicts: &[String],
    diff: &str,
) -> String {
    let diff = cap_middle(diff, MAX_FOLLOW_UP_DIFF);
    format!(
        "Task `{id}` ({title}) was done and verified in a separate worktree, at the same time as \
         other tasks, but its changes conflict with theirs in: {files}. The workspace has the \
         other tasks' changes and none of `{id}`'s. Make the change `{id}` made again, on top of \
         the current files, keeping the other tasks' work.\n\nThe task's instructions:\n{instructions}\n\n\
         Its summary: {summary}\n\nIts changes, as a diff against the workspace it started from:\n{diff}",
        id = spec.id,
        title = spec.title,
        files = conflicts.join(", "),
        instructions = spec.instructions.trim(),
        summary = summary.trim(),
    )
}
