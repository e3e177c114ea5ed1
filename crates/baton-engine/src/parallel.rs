//! `--parallel N`: a wave of up to N ready tasks, each worked on by a child run (its own journal
//! in the same store, its own fresh context, verify-and-fix and rollbacks as any task) in a
//! worktree under `.baton/worktrees/CHILD_RUN` made from one snapshot of the workspace. When the
//! wave has ended, each verified task is merged back in plan order with a three-way merge in
//! the shadow repository; a conflict leaves the workspace alone and becomes a follow-up task.
//!
//! Crash safety comes from the journal order: `snapshot_taken` (wave start) → `task_delegated`
//! (the child's id is fixed before the child exists) → the child runs (resumed, not restarted,
//! by a resumed parent) → `task_returned` → `merge_started` (the merge commit exists) → restore
//! of the workspace (redone on resume) → `task_finished`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;

use baton_core::board::{DelegatedTask, TaskAction};
use baton_core::governance::Budget;
use baton_core::task::{Plan, SnapshotReason, TaskSpec};
use baton_core::{
    DelegatedResult, Event, NextAction, PauseReason, RunId, RunSettings, RunState, RunStatus,
    next_action, replay,
};
use baton_snapshot::{Change, MergeOutcome, ShadowRepo, SnapshotId};
use baton_tools::Workspace;

use crate::EngineError;
use crate::api::{RunOutcome, SettingsOverride, StartRun};
use crate::journal::Journal;
use crate::run_loop::Engine;

/// The diff a conflicted task's follow-up gets, at most.
const MAX_FOLLOW_UP_DIFF: usize = 24 * 1024;

/// Where the worktrees of a workspace's parallel tasks live.
pub fn worktree_dir(workspace: &Path, child_run: &str) -> PathBuf {
    workspace.join(".baton").join("worktrees").join(child_run)
}

/// How a child run ended, as the parent records it.
enum ChildEnd {
    Returned {
        result: DelegatedResult,
        cost_usd: f64,
        unpriced_calls: u32,
        prompt_tokens: u64,
        completion_tokens: u64,
        turns: u32,
    },
    Paused {
        reason: PauseReason,
        detail: String,
    },
}

/// A child's task and how its run ended (or why driving it failed).
type ChildOutcome = (DelegatedTask, Result<ChildEnd, EngineError>);

/// The child runs this process drives.
#[derive(Default)]
struct Children<'a> {
    running: FuturesUnordered<BoxFuture<'a, ChildOutcome>>,
    /// Tasks whose child run is (or was, in this process) driven here.
    driven: HashSet<String>,
    /// Ended, not yet journaled.
    ended: Vec<ChildOutcome>,
    /// Paused (not driven again in this process).
    parked: Vec<(DelegatedTask, PauseReason, String)>,
}

impl<'a> Children<'a> {
    fn started(&self, task: &str) -> bool {
        self.driven.contains(task)
    }

    fn start(&mut self, task: &str, child: BoxFuture<'a, ChildOutcome>) {
        self.driven.insert(task.to_string());
        self.running.push(child);
    }

    async fn wait_for_one(&mut self) {
        if let Some(outcome) = self.running.next().await {
            self.ended.push(outcome);
        }
    }

    /// Runs `step` to its end while the children keep working (their ends are kept for later).
    async fn alongside<T>(&mut self, step: BoxFuture<'_, T>) -> T {
        let mut step = step;
        loop {
            if self.running.is_empty() {
                return step.await;
            }
            tokio::select! {
                out = &mut step => return out,
                Some(outcome) = self.running.next() => self.ended.push(outcome),
            }
        }
    }
}

/// What a child run is started with (taken from the parent's state before the wave runs).
struct ChildJob {
    delegated: DelegatedTask,
    spec: TaskSpec,
    goal: String,
    settings: RunSettings,
}

impl Engine {
    /// Snapshots the workspace as the wave's base and journals a child run for each task. Without
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

    /// The snapshot the wave starts from (journaled unless it is the last one journaled).
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
            ShadowRepo::open(&root)?.snapshot(&run, &message, at)
        })
        .await
        .map_err(|e| format!("the snapshot task failed: {e}"))?
        .map_err(|e| {
            self.note_snapshot_error(&e);
            format!("cannot snapshot the workspace: {e}")
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
            for (task, end) in std::mem::take(&mut children.ended) {
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
                // Steps between the children's ends run while the children go on.
                action @ (TaskAction::Merge { .. }
                | TaskAction::FinishMerge { .. }
                | TaskAction::FailTask { .. }
                | TaskAction::SkipTask { .. }
                | TaskAction::Delegate { .. }) => {
                    let step = self.task_step_boxed(journal, workspace, action);
                    children.alongside(step).await?;
                    if children.running.is_empty() && self.parts.stop.is_stopped() {
                        return Ok(());
                    }
                }
                // Anything else is for the run loop, once no child is working.
                _ => {
                    if children.running.is_empty() {
                        return Ok(());
                    }
                    children.wait_for_one().await;
                }
            }
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
        journal
            .record(Event::RunPaused {
                reason,
                detail: format!(
                    "task `{}` (parallel run {}) paused: {detail}; `baton resume` resumes it",
                    task.task, task.child_run
                ),
            })
            .await
    }

    /// Starts or resumes one child run in its worktree and reports how it ended. Boxed as a
    /// `Send` future: a child is driven by the same loop that drives its parent, and the
    /// compiler needs the recursion cut at a named type.
    fn drive_child(&self, root: PathBuf, job: ChildJob) -> BoxFuture<'_, ChildOutcome> {
        Box::pin(async move {
            let end = self.drive_child_now(&root, &job).await;
            (job.delegated, end)
        })
    }

    async fn drive_child_now(&self, root: &Path, job: &ChildJob) -> Result<ChildEnd, EngineError> {
        let child = RunId::from_string(job.delegated.child_run.clone());
        let dir = worktree_dir(root, child.as_str());
        let exists = self.parts.store.get_run(&child).await?.is_some();
        let parent_root = root.to_path_buf();
        let (target, run, base) = (
            dir.clone(),
            child.to_string(),
            job.delegated.base_snapshot.clone(),
        );
        // A child that has started keeps its files (also work it has not snapshotted yet); one
        // that has not gets the base, again if a crash cut the first creation short.
        tokio::task::spawn_blocking(move || {
            let repo = ShadowRepo::open(&parent_root)?;
            if exists {
                repo.attach_worktree(&target, &run)
            } else {
                repo.create_worktree(&target, &run, &SnapshotId::parse(&base)?)
            }
        })
        .await
        .map_err(|e| EngineError::Internal(format!("the worktree task failed: {e}")))?
        .map_err(|e| EngineError::Workspace {
            path: dir.display().to_string(),
            detail: format!("cannot make the worktree of a parallel task: {e}"),
        })?;
        let outcome = if exists {
            let overrides = child_overrides(&job.settings);
            self.resume(&child, &overrides).await
        } else {
            let request = StartRun {
                goal: job.goal.clone(),
                workspace: dir.clone(),
                settings: job.settings.clone(),
                plan: Some(Plan {
                    tasks: vec![job.spec.clone()],
                    final_check: None,
                }),
            };
            self.start_with_id(child.clone(), request).await
        };
        let outcome = match outcome {
            Ok(outcome) => outcome,
            // The child's process died between creating its run and journaling its start.
            Err(EngineError::EmptyRun(_)) => {
                return Ok(returned_failure(
                    "its run was created but never started (the process died)".into(),
                ));
            }
            Err(e) => return Err(e),
        };
        let error = match outcome {
            RunOutcome::Paused { reason, detail, .. } => {
                return Ok(ChildEnd::Paused { reason, detail });
            }
            RunOutcome::Finished { .. } => None,
            RunOutcome::Failed { error, .. } => Some(error),
        };
        let state = replay(&self.parts.store.load_events(&child).await?).map_err(|source| {
            EngineError::Replay {
                run_id: child.clone(),
                source,
            }
        })?;
        let entry = state
            .board
            .as_ref()
            .and_then(|b| b.entry(&job.delegated.task));
        let verified = state.status == RunStatus::Finished
            && entry.is_some_and(|e| e.status == baton_core::board::TaskStatus::Verified);
        let result = if verified {
            let (target, run) = (dir.clone(), child.to_string());
            let at = jiff::Timestamp::now();
            // The worktree as the child left it (its verified snapshot, unless a snapshot failed).
            let theirs = tokio::task::spawn_blocking(move || {
                ShadowRepo::open(&target)?.snapshot(&run, "returned", at)
            })
            .await
            .map_err(|e| EngineError::Internal(format!("the snapshot task failed: {e}")))?
            .map_err(|e| EngineError::Workspace {
                path: dir.display().to_string(),
                detail: format!("cannot snapshot a parallel task's worktree: {e}"),
            })?;
            DelegatedResult::Verified {
                summary: entry.and_then(|e| e.summary.clone()).unwrap_or_default(),
                snapshot: theirs.id.to_string(),
            }
        } else {
            DelegatedResult::Failed {
                reason: entry
                    .and_then(|e| e.reason.clone())
                    .or(error)
                    .unwrap_or_else(|| "its run ended without verifying the task".into()),
            }
        };
        Ok(ChildEnd::Returned {
            result,
            cost_usd: state.usage.cost_usd,
            unpriced_calls: state.usage.unpriced_calls,
            prompt_tokens: state.usage.prompt_tokens,
            completion_tokens: state.usage.completion_tokens,
            turns: state.turns_finished,
        })
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
        let ours = state
            .snapshots
            .last()
            .map(|s| s.snapshot.clone())
            .unwrap_or_else(|| base.clone());
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
        let merged = tokio::task::spawn_blocking(move || {
            let (base, ours, theirs) = (
                SnapshotId::parse(&base)?,
                SnapshotId::parse(&ours)?,
                SnapshotId::parse(&theirs)?,
            );
            let repo = ShadowRepo::open(&root)?;
            match repo.merge(&run, &base, &ours, &theirs, &message, at)? {
                MergeOutcome::Merged(id) => Ok((MergeOutcome::Merged(id), String::new())),
                conflict => Ok((conflict, repo.diff_snapshots(&base, &theirs)?)),
            }
        })
        .await
        .map_err(|e| EngineError::Internal(format!("the merge task failed: {e}")))?
        .map_err(|e: baton_snapshot::SnapshotError| EngineError::Workspace {
            path: workspace.root().display().to_string(),
            detail: format!("cannot merge task `{task}`: {e}"),
        })?;
        match merged {
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
            let dir = worktree_dir(workspace.root(), &child);
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

fn returned_failure(reason: String) -> ChildEnd {
    ChildEnd::Returned {
        result: DelegatedResult::Failed { reason },
        cost_usd: 0.0,
        unpriced_calls: 0,
        prompt_tokens: 0,
        completion_tokens: 0,
        turns: 0,
    }
}

/// The child's goal, task and settings, from the parent's state now.
fn child_job(state: &RunState, delegated: DelegatedTask) -> Result<ChildJob, EngineError> {
    let board = state
        .board
        .as_ref()
        .ok_or_else(|| EngineError::Internal("a delegated task without a plan".into()))?;
    let mut spec = board
        .entry(&delegated.task)
        .map(|e| e.spec.clone())
        .ok_or_else(|| EngineError::Internal(format!("no task `{}`", delegated.task)))?;
    // Its dependencies are verified here, and the child's plan has only this task.
    spec.deps.clear();
    let settings = state
        .settings
        .as_ref()
        .ok_or_else(|| EngineError::Internal("a run without settings".into()))?;
    let mut goal = format!(
        "{}\n\nThis run works on one task of a larger plan, in its own copy of the workspace; \
         other tasks are worked on at the same time and all changes are merged afterwards. \
         Change only what this task needs.",
        state.goal.trim()
    );
    if let Some(handoff) = board.handoff() {
        goal.push_str("\n\n");
        goal.push_str(&handoff);
    }
    Ok(ChildJob {
        delegated,
        spec,
        goal,
        settings: child_settings(settings, state),
    })
}

/// A child works on one task: no planning, no waves of its own, no pause for a failed task
/// (the parent decides), and at most what is left of the parent's budget.
fn child_settings(parent: &RunSettings, state: &RunState) -> RunSettings {
    let mut settings = parent.clone();
    settings.tasks.parallel = 1;
    settings.tasks.planning = baton_core::Planning::None;
    settings.tasks.on_failure = baton_core::OnTaskFailure::Continue;
    settings.budget = remaining(&parent.budget, state);
    settings
}

fn remaining(budget: &Budget, state: &RunState) -> Budget {
    let tokens = state.usage.prompt_tokens + state.usage.completion_tokens;
    Budget {
        usd: budget
            .usd
            .map(|limit| (limit - state.usage.cost_usd).max(0.0)),
        tokens: budget.tokens.map(|limit| limit.saturating_sub(tokens)),
        wall_time_secs: budget.wall_time_secs,
    }
}

/// A resumed parent hands its (possibly raised) limits and model to its children.
fn child_overrides(settings: &RunSettings) -> SettingsOverride {
    SettingsOverride {
        provider: Some(settings.model.provider),
        base_url: Some(settings.model.base_url.clone()),
        model: Some(settings.model.model.clone()),
        max_turns: Some(settings.limits.max_turns),
        budget: Some(settings.budget),
        task_budget: Some(settings.tasks.budget),
        task_max_turns: settings.tasks.max_turns,
        ..SettingsOverride::default()
    }
}

fn follow_up_instructions(
    spec: &TaskSpec,
    summary: &str,
    conflicts: &[String],
    diff: &str,
) -> String {
    let mut diff = diff.to_string();
    if diff.len() > MAX_FOLLOW_UP_DIFF {
        let mut end = MAX_FOLLOW_UP_DIFF;
        while !diff.is_char_boundary(end) {
            end -= 1;
        }
        diff.truncate(end);
        diff.push_str("\n[... diff cut ...]\n");
    }
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
