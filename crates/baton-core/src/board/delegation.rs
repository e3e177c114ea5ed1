//! `--parallel`: ready tasks handed to child runs in their own worktrees, and their verified
//! work merged back. The board records each step; the engine acts on what [`TaskBoard::next`]
//! asks for, so a parent killed at any point (children working, a merge half restored) resumes
//! at the same step.

use serde::{Deserialize, Serialize};

use super::{TaskAction, TaskBoard, TaskStatus};
use crate::event::DelegatedResult;
use crate::task::TaskSpec;

/// Where a delegated task is worked on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delegation {
    pub child_run: String,
    /// The snapshot its worktree was made from (the merge base).
    pub base_snapshot: String,
    /// How its child run ended (`None` while it works).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<DelegatedResult>,
}

/// A merge whose workspace restore started and has not finished (redone on resume).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenMerge {
    pub task: String,
    pub snapshot: String,
}

/// A delegated task whose child run has not ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelegatedTask {
    pub task: String,
    pub child_run: String,
    pub base_snapshot: String,
}

/// Longest task id (as the plan format allows).
const MAX_ID: usize = 64;

impl TaskBoard {
    /// What delegated work needs next, if any: finishing a merge's restore, then (in plan
    /// order) merging or failing each returned task, then handing newly ready tasks to free
    /// slots, then waiting for the child runs still working.
    pub(super) fn delegated_action(&self, parallel: usize) -> Option<TaskAction> {
        if let Some(merge) = &self.open_merge {
            return Some(TaskAction::FinishMerge {
                task: merge.task.clone(),
                snapshot: merge.snapshot.clone(),
            });
        }
        let delegated = self
            .tasks
            .iter()
            .filter(|t| t.status == TaskStatus::Running)
            .filter_map(|t| Some((t, t.delegation.as_ref()?)));
        let returned = delegated.clone().find_map(|(t, d)| {
            Some(match d.result.as_ref()? {
                DelegatedResult::Verified { summary, snapshot } => TaskAction::Merge {
                    task: t.spec.id.clone(),
                    base: d.base_snapshot.clone(),
                    theirs: snapshot.clone(),
                    summary: summary.clone(),
                },
                DelegatedResult::Failed { reason } => TaskAction::FailTask {
                    task: t.spec.id.clone(),
                    reason: format!("its parallel run {} failed: {reason}", d.child_run),
                },
            })
        });
        if returned.is_some() {
            return returned;
        }
        let working: Vec<DelegatedTask> = delegated
            .map(|(t, d)| DelegatedTask {
                task: t.spec.id.clone(),
                child_run: d.child_run.clone(),
                base_snapshot: d.base_snapshot.clone(),
            })
            .collect();
        if working.is_empty() {
            return None;
        }
        // A slot is free and a task is ready: it joins the ones working (rolling, not waves).
        let more: Vec<String> = self
            .ready()
            .take(parallel.saturating_sub(working.len()))
            .map(|t| t.spec.id.clone())
            .collect();
        if !more.is_empty() {
            return Some(TaskAction::Delegate { tasks: more });
        }
        Some(TaskAction::AwaitDelegated { tasks: working })
    }

    /// An id for a new task, starting with `stem`, that no task has.
    pub fn unused_id(&self, stem: &str) -> String {
        let stem: String = stem.chars().take(MAX_ID - 4).collect();
        let taken = |id: &str| self.tasks.iter().any(|t| t.spec.id == id);
        if !taken(&stem) {
            return stem;
        }
        (2..)
            .map(|n| format!("{stem}-{n}"))
            .find(|id| !taken(id))
            .unwrap_or(stem)
    }

    pub(super) fn delegate(
        &mut self,
        task: &str,
        child_run: &str,
        base_snapshot: &str,
    ) -> Result<(), String> {
        let entry = self.startable(task)?;
        entry.status = TaskStatus::Running;
        entry.approach += 1;
        entry.attempt = 1;
        entry.start_snapshot = Some(base_snapshot.to_string());
        entry.delegation = Some(Delegation {
            child_run: child_run.to_string(),
            base_snapshot: base_snapshot.to_string(),
            result: None,
        });
        Ok(())
    }

    pub(super) fn returned(
        &mut self,
        task: &str,
        child_run: &str,
        result: &DelegatedResult,
        tokens: u64,
        cost_usd: f64,
        turns: u32,
    ) -> Result<(), String> {
        let entry = self.entry_mut(task)?;
        let delegation = entry
            .delegation
            .as_mut()
            .filter(|d| d.child_run == child_run && d.result.is_none())
            .ok_or_else(|| format!("task `{task}` is not being worked on by run {child_run}"))?;
        delegation.result = Some(result.clone());
        entry.tokens = entry.tokens.saturating_add(tokens);
        if cost_usd.is_finite() {
            entry.cost_usd += cost_usd;
        }
        entry.turns = entry.turns.saturating_add(turns);
        Ok(())
    }

    /// The entry of a returned, verified, not yet merged task.
    fn mergeable(&mut self, task: &str) -> Result<&mut super::TaskEntry, String> {
        if self.open_merge.is_some() {
            return Err("another merge is in progress".into());
        }
        let entry = self.entry_mut(task)?;
        let verified = entry.status == TaskStatus::Running
            && matches!(
                entry.delegation.as_ref().and_then(|d| d.result.as_ref()),
                Some(DelegatedResult::Verified { .. })
            );
        if !verified {
            return Err(format!(
                "task `{task}` has no verified parallel work to merge"
            ));
        }
        Ok(entry)
    }

    pub(super) fn merge_started(&mut self, task: &str, snapshot: &str) -> Result<(), String> {
        let entry = self.mergeable(task)?;
        if let Some(DelegatedResult::Verified { summary, .. }) =
            entry.delegation.as_ref().and_then(|d| d.result.as_ref())
        {
            entry.claimed_done = Some(summary.clone());
        }
        entry.check_passed = true;
        self.open_merge = Some(OpenMerge {
            task: task.to_string(),
            snapshot: snapshot.to_string(),
        });
        Ok(())
    }

    /// A delegated task may finish only through its merge.
    pub(super) fn finish_merge(&mut self, task: &str) -> Result<(), String> {
        let delegated = self.entry(task).is_some_and(|t| t.delegation.is_some());
        if !delegated {
            return Ok(());
        }
        self.open_merge
            .take_if(|m| m.task == task)
            .map(|_| ())
            .ok_or_else(|| format!("task `{task}` was not merged"))
    }

    pub(super) fn merge_conflicted(
        &mut self,
        task: &str,
        conflicts: &[String],
        follow_up: &TaskSpec,
    ) -> Result<(), String> {
        let entry = self.mergeable(task)?;
        entry.status = TaskStatus::Verified;
        entry.summary = Some(format!(
            "verified in its own worktree, but merging it conflicted ({}): follow-up task `{}` \
             redoes it on the merged workspace",
            conflicts.join(", "),
            follow_up.id
        ));
        self.add_tasks(std::slice::from_ref(follow_up), None)?;
        // Whatever needed the task needs its changes, which only the follow-up brings.
        for dependent in &mut self.tasks {
            if dependent.status == TaskStatus::Pending
                && dependent.spec.deps.iter().any(|d| d == task)
                && dependent.spec.id != follow_up.id
            {
                dependent.spec.deps.push(follow_up.id.clone());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::settings::TaskSettings;

    fn spec(id: &str, deps: &[&str]) -> TaskSpec {
        TaskSpec {
            id: id.into(),
            title: id.into(),
            instructions: "do".into(),
            deps: deps.iter().map(|d| d.to_string()).collect(),
            check: "true".into(),
            risky: false,
        }
    }

    fn board() -> TaskBoard {
        let mut board = TaskBoard::default();
        board
            .add_tasks(
                &[
                    spec("a", &[]),
                    spec("b", &[]),
                    spec("c", &["a"]),
                    spec("d", &[]),
                ],
                None,
            )
            .unwrap();
        board
    }

    fn parallel(n: u32) -> TaskSettings {
        TaskSettings {
            parallel: n,
            ..TaskSettings::default()
        }
    }

    fn verified(summary: &str) -> DelegatedResult {
        DelegatedResult::Verified {
            summary: summary.into(),
            snapshot: "theirs".into(),
        }
    }

    #[test]
    fn a_wave_takes_up_to_n_ready_tasks_and_one_ready_task_runs_in_place() {
        let board = board();
        let wave = |n| board.next(&parallel(n));
        assert_eq!(
            wave(2),
            TaskAction::Delegate {
                tasks: vec!["a".into(), "b".into()]
            }
        );
        assert_eq!(
            wave(8),
            TaskAction::Delegate {
                tasks: vec!["a".into(), "b".into(), "d".into()]
            }
        );
        assert_eq!(
            wave(1),
            TaskAction::StartTask {
                task: "a".into(),
                approach: 1
            }
        );
        let mut single = TaskBoard::default();
        single
            .add_tasks(&[spec("x", &[]), spec("y", &["x"])], None)
            .unwrap();
        assert!(matches!(
            single.next(&parallel(4)),
            TaskAction::StartTask { .. }
        ));
    }

    #[test]
    fn ended_children_are_merged_or_failed_as_they_end_and_free_slots_are_refilled() {
        let mut board = board();
        let settings = parallel(2);
        board.delegate("a", "run-a", "base").unwrap();
        board.delegate("b", "run-b", "base").unwrap();
        assert!(
            board.delegate("a", "run-a2", "base").is_err(),
            "already out"
        );
        let TaskAction::AwaitDelegated { tasks } = board.next(&settings) else {
            panic!("both slots are taken: the children are awaited")
        };
        assert_eq!(tasks.len(), 2);
        board
            .returned(
                "b",
                "run-b",
                &DelegatedResult::Failed { reason: "x".into() },
                7,
                0.5,
                3,
            )
            .unwrap();
        assert!(
            board
                .returned("b", "run-b", &verified("again"), 0, 0.0, 0)
                .is_err(),
            "a child returns once"
        );
        // An ended child is dealt with at once, while `a` still works.
        assert!(matches!(board.next(&settings), TaskAction::FailTask { task, .. } if task == "b"));
        board.task_ended("b", TaskStatus::Failed, "x").unwrap();
        // b's slot is free and `d` is ready: it joins `a` (c waits for a).
        assert_eq!(
            board.next(&settings),
            TaskAction::Delegate {
                tasks: vec!["d".into()]
            }
        );
        board.delegate("d", "run-d", "base2").unwrap();
        assert!(
            matches!(board.next(&settings), TaskAction::AwaitDelegated { tasks } if tasks.len() == 2)
        );
        board
            .returned("a", "run-a", &verified("did a"), 7, 0.5, 3)
            .unwrap();
        assert_eq!(
            board.next(&settings),
            TaskAction::Merge {
                task: "a".into(),
                base: "base".into(),
                theirs: "theirs".into(),
                summary: "did a".into()
            }
        );
        assert!(
            board.task_finished("a", "early").is_err(),
            "not before its merge"
        );
        board.merge_started("a", "m1").unwrap();
        assert_eq!(
            board.next(&settings),
            TaskAction::FinishMerge {
                task: "a".into(),
                snapshot: "m1".into()
            }
        );
        board.task_finished("a", "did a").unwrap();
        assert!(board.open_merge.is_none());
        assert_eq!(board.entry("a").unwrap().tokens, 7);
        // `c` (ready now) joins `d`, still working.
        assert_eq!(
            board.next(&settings),
            TaskAction::Delegate {
                tasks: vec!["c".into()]
            }
        );
    }

    #[test]
    fn a_conflict_adds_a_follow_up_that_dependents_wait_for() {
        let mut board = board();
        board.delegate("a", "run-a", "base").unwrap();
        board
            .returned("a", "run-a", &verified("did a"), 0, 0.0, 0)
            .unwrap();
        let id = board.unused_id("a-merge");
        assert_eq!(id, "a-merge");
        board
            .merge_conflicted("a", &["f.txt".into()], &spec(&id, &[]))
            .unwrap();
        assert_eq!(board.entry("a").unwrap().status, TaskStatus::Verified);
        assert_eq!(board.entry("c").unwrap().spec.deps, ["a", "a-merge"]);
        assert_eq!(board.unused_id("a-merge"), "a-merge-2");
        // `c` is not ready until the follow-up is verified.
        let TaskAction::Delegate { tasks } = board.next(&parallel(4)) else {
            panic!("b, d and the follow-up are ready")
        };
        assert_eq!(tasks, ["b", "d", "a-merge"]);
        assert_eq!(board.unused_id(&"z".repeat(80)).len(), 60);
    }
}
