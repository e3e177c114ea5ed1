//! The child runs of parallel tasks: what each is started with, driving one (start or resume,
//! in its worktree), and the set of them a parent drives at once.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;

use baton_core::board::DelegatedTask;
use baton_core::governance::Budget;
use baton_core::task::{Plan, TaskSpec};
use baton_core::{DelegatedResult, PauseReason, RunId, RunSettings, RunState, RunStatus, replay};
use baton_snapshot::{ShadowRepo, SnapshotId};

use crate::api::{RunOutcome, SettingsChange, SettingsOverride, StartRun};
use crate::{Engine, EngineError, Extensions};

/// How a child run ended, as the parent records it.
pub(super) enum ChildEnd {
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
pub(super) type ChildOutcome = (DelegatedTask, Result<ChildEnd, EngineError>);

/// The child runs this process drives.
#[derive(Default)]
pub(super) struct Children<'a> {
    pub(super) running: FuturesUnordered<BoxFuture<'a, ChildOutcome>>,
    /// Tasks whose child run is (or was, in this process) driven here.
    driven: HashSet<String>,
    /// Ended, not yet journaled.
    pub(super) ended: Vec<ChildOutcome>,
    /// Paused (not driven again in this process).
    pub(super) parked: Vec<(DelegatedTask, PauseReason, String)>,
}

impl<'a> Children<'a> {
    pub(super) fn started(&self, task: &str) -> bool {
        self.driven.contains(task)
    }

    pub(super) fn start(&mut self, task: &str, child: BoxFuture<'a, ChildOutcome>) {
        self.driven.insert(task.to_string());
        self.running.push(child);
    }

    pub(super) async fn wait_for_one(&mut self) {
        if let Some(outcome) = self.running.next().await {
            self.ended.push(outcome);
        }
    }

    /// Runs `step` to its end while the children keep working (their ends are kept for later).
    pub(super) async fn alongside<T>(&mut self, step: BoxFuture<'_, T>) -> T {
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

/// What a child run is started with (taken from the parent's state when it starts).
pub(super) struct ChildJob {
    delegated: DelegatedTask,
    spec: TaskSpec,
    goal: String,
    settings: RunSettings,
}

impl ChildJob {
    /// The child's plan: its one task.
    fn plan(&self) -> Plan {
        Plan {
            tasks: vec![self.spec.clone()],
            final_check: None,
        }
    }
}

/// How far a child run got before this process drives it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Started {
    No,
    /// Created, nothing journaled.
    Created,
    Yes,
}

impl Engine {
    /// Starts or resumes one child run in its worktree and reports how it ended. Boxed as a
    /// `Send` future: a child is driven by the same loop that drives its parent, and the
    /// compiler needs the recursion cut at a named type.
    pub(super) fn drive_child(&self, root: PathBuf, job: ChildJob) -> BoxFuture<'_, ChildOutcome> {
        Box::pin(async move {
            let end = match self.drive_child_now(&root, &job).await {
                // A problem with this child's worktree (often passing: a full disk) sets it
                // aside, not the run and the other children; the run pauses when nothing else
                // can go on, and a resume tries again.
                Err(EngineError::Workspace { path, detail }) => Ok(ChildEnd::Paused {
                    reason: PauseReason::Workspace,
                    detail: format!("{detail} ({path})"),
                }),
                end => end,
            };
            (job.delegated, end)
        })
    }

    /// An engine of its own for a child: the same store, model, tools and stop signal, but its
    /// own "pause for a person" slot (children's commands run at the same time). Of the
    /// extensions it keeps only snapshots (its worktree's merge needs them): the parent journals
    /// the MCP starts and the side usage, and persists the workspace the children merge into.
    fn child_engine(&self) -> Engine {
        let mut parts = self.parts.clone();
        parts.exec.pause_request = Default::default();
        parts.extensions = Extensions {
            snapshots: self.snapshots.mode,
            ..Extensions::default()
        };
        Engine::new(parts)
    }

    async fn drive_child_now(&self, root: &Path, job: &ChildJob) -> Result<ChildEnd, EngineError> {
        let child = RunId::from_string(job.delegated.child_run.clone());
        let dir = baton_state::StateDir::for_workspace(root).worktree(child.as_str());
        let started = match self.parts.store.get_run(&child).await? {
            None => Started::No,
            Some(run) if run.event_count == 0 => Started::Created,
            Some(_) => Started::Yes,
        };
        let exists = started == Started::Yes;
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
        let engine = self.child_engine();
        let request = StartRun {
            goal: job.goal.clone(),
            workspace: dir.clone(),
            settings: job.settings.clone(),
            plan: Some(job.plan()),
        };
        let outcome = match started {
            Started::No => engine.start_with_id(child.clone(), request).await,
            // Its process died between creating the run and journaling its start.
            Started::Created => engine.start_created(&child, request).await,
            Started::Yes => engine.resume(&child, &child_overrides(job)).await,
        };
        let outcome = match outcome {
            Ok(outcome) => outcome,
            // Emptied under our feet (another process started it and died at once).
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
pub(super) fn child_job(
    state: &RunState,
    delegated: DelegatedTask,
) -> Result<ChildJob, EngineError> {
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
         Change only what this task needs. The copy is not a git repository: git commands \
         fail in it.",
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
        wall_time_secs: budget
            .wall_time_secs
            .map(|limit| limit.saturating_sub(state.running_ms / 1000)),
    }
}

/// A resumed parent hands its settings (possibly raised limits, another model) to its children,
/// and the plan again: a child killed between journaling its start and its plan gets it then.
fn child_overrides(job: &ChildJob) -> SettingsOverride {
    let parents = job.settings.clone();
    SettingsOverride {
        settings: SettingsChange::Edit(Arc::new(move |settings| {
            // Running time is counted by the child itself since it started: the parent's
            // clock, which ran meanwhile, must not shrink it again.
            let wall_time_secs = settings.budget.wall_time_secs;
            *settings = parents.clone();
            settings.budget.wall_time_secs = wall_time_secs;
        })),
        plan: Some(job.plan()),
    }
}
