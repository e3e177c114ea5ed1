//! Workspace snapshots taken by the run loop: one `run_start` snapshot before the first turn,
//! an `after_tools` snapshot at the end of every turn in which a mutating tool call
//! (`write_file`, `edit_file`, `shell`) finished — journaled as `snapshot_taken` before the
//! turn's `turn_finished` (or before `run_finished` when the turn ended the run) — and a
//! `before_risky` one before a `shell` command the execution policy marks `risky` (built in:
//! `git reset --hard`, `git clean -f`, `rm -r`), journaled before its `tool_call_started`.
//!
//! Snapshots are a safety net, not part of the run's semantics: if one fails (git missing, disk
//! full) nothing is journaled, a warning is logged and the run goes on. A snapshot whose tree
//! equals the run's previous one is not journaled again (except the `run_start` one): the
//! previous one already is that state. On resume
//! the decision is re-derived from the journal: a turn whose snapshot was journaled is not
//! snapshotted twice.

use std::sync::atomic::{AtomicBool, Ordering};

use baton_core::task::SnapshotReason;
use baton_core::{Event, Message, NextAction, RunState, ToolCall, ToolEffect};
use baton_snapshot::{Change, ShadowRepo, SnapshotError};
use baton_tools::Workspace;

use crate::Engine;
use crate::EngineError;
use crate::journal::Journal;

/// Whether the engine snapshots the workspace. Off unless asked for
/// ([`crate::Extensions::snapshots`]):
/// `baton run` / `resume` turn it on; workers keep their own tar snapshots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Snapshots {
    #[default]
    Off,
    On,
}

/// The engine's snapshot switch and what it learnt in this process.
#[derive(Debug, Default)]
pub(crate) struct SnapshotHook {
    pub(crate) mode: Snapshots,
    /// git is not installed: said once, not tried again in this process.
    git_missing: AtomicBool,
}

impl SnapshotHook {
    pub(crate) fn new(mode: Snapshots) -> SnapshotHook {
        SnapshotHook {
            mode,
            git_missing: AtomicBool::new(false),
        }
    }
}

impl Engine {
    /// Called by the run loop with the action it is about to take: snapshots the workspace and
    /// journals it when that action ends a turn that changed files (or starts the first one).
    pub(crate) async fn snapshot_if_due(
        &self,
        journal: &mut Journal,
        action: &NextAction,
        workspace: &Workspace,
    ) -> Result<(), EngineError> {
        if self.snapshots.mode == Snapshots::Off
            || self.snapshots.git_missing.load(Ordering::Relaxed)
        {
            return Ok(());
        }
        let Some(reason) = snapshot_due(
            journal.state(),
            action,
            |name| self.tools.effect_of(name),
            |call| {
                self.is_risky(call)
                    || (in_risky_task(journal.state())
                        && self.tools.effect_of(&call.name) == Some(ToolEffect::Mutating))
            },
        ) else {
            return Ok(());
        };
        let journal_unchanged = if reason == SnapshotReason::RunStart {
            JournalUnchanged::Yes
        } else {
            JournalUnchanged::No
        };
        self.take_snapshot(journal, workspace, reason, None, journal_unchanged)
            .await
    }

    /// Whether snapshots are on and git was not found missing.
    pub(crate) fn snapshots_available(&self) -> bool {
        self.snapshots.mode == Snapshots::On && !self.snapshots.git_missing.load(Ordering::Relaxed)
    }

    /// Remembers a missing git, so that it is not tried again in this process.
    pub(crate) fn note_snapshot_error(&self, error: &SnapshotError) {
        if matches!(error, SnapshotError::GitMissing { .. }) {
            self.snapshots.git_missing.store(true, Ordering::Relaxed);
        }
    }

    /// Snapshots the workspace now and journals it (`task` names the task it belongs to). A
    /// failure is logged and journals nothing: the run goes on without that snapshot.
    pub(crate) async fn take_snapshot(
        &self,
        journal: &mut Journal,
        workspace: &Workspace,
        reason: SnapshotReason,
        task: Option<String>,
        journal_unchanged: JournalUnchanged,
    ) -> Result<(), EngineError> {
        if !self.snapshots_available() {
            return Ok(());
        }
        let root = workspace.root().to_path_buf();
        let run = journal.run_id().to_string();
        let message = format!(
            "{} turn {}",
            reason_name(reason),
            journal.state().turns_started
        );
        let at = jiff::Timestamp::now();
        let taken = tokio::task::spawn_blocking(move || {
            ShadowRepo::open(&root)?.snapshot(&run, &message, at)
        })
        .await
        .map_err(|e| EngineError::Internal(format!("the snapshot task failed: {e}")))?;
        let snapshot = match taken {
            Ok(snapshot) => snapshot,
            Err(e) => {
                self.note_snapshot_error(&e);
                tracing::warn!("workspace snapshot failed; the run goes on without it: {e}");
                return Ok(());
            }
        };
        for warning in &snapshot.warnings {
            tracing::warn!("workspace snapshot {}: {warning}", snapshot.id.short());
        }
        if snapshot.change == Change::Unchanged && journal_unchanged == JournalUnchanged::No {
            return Ok(());
        }
        journal
            .record(Event::SnapshotTaken {
                snapshot: snapshot.id.to_string(),
                reason,
                task,
            })
            .await
    }

    /// Makes the workspace exactly the journaled snapshot `id` (idempotent: a restore cut
    /// short by a crash is simply done again).
    pub(crate) async fn restore_snapshot(
        &self,
        journal: &Journal,
        workspace: &Workspace,
        id: &str,
    ) -> Result<(), EngineError> {
        let root = workspace.root().to_path_buf();
        let run = journal.run_id().to_string();
        let id = id.to_string();
        let restored = tokio::task::spawn_blocking(move || {
            let id = baton_snapshot::SnapshotId::parse(&id)?;
            ShadowRepo::open(&root)?.restore(&run, &id)
        })
        .await
        .map_err(|e| EngineError::Internal(format!("the restore task failed: {e}")))?;
        match restored {
            Ok(report) => {
                tracing::info!(
                    rewritten = report.rewritten.len(),
                    recreated = report.recreated.len(),
                    removed = report.removed.len(),
                    "workspace restored"
                );
                Ok(())
            }
            Err(e) => Err(EngineError::Workspace {
                path: workspace.root().display().to_string(),
                detail: format!("cannot restore a snapshot: {}", short(&e.to_string())),
            }),
        }
    }
}

/// Whether a snapshot identical to the run's previous one is journaled again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JournalUnchanged {
    /// Yes: the record itself matters (the run's start, where a task starts, a verified task).
    Yes,
    /// No: the previous record already stands for that state.
    No,
}

fn short(text: &str) -> String {
    text.chars().take(400).collect()
}

impl Engine {
    /// A `shell` call whose command line the execution policy marks `risky`.
    fn is_risky(&self, call: &ToolCall) -> bool {
        call.name == "shell"
            && serde_json::from_str::<serde_json::Value>(&call.arguments)
                .ok()
                .and_then(|args| {
                    let command = args.get("command")?.as_str()?;
                    Some(self.parts.exec.policy.decide(command).risky)
                })
                .unwrap_or(false)
    }
}

/// Whether the run is working on a task its plan marks `risky = true`: each of its mutating
/// calls gets a snapshot first.
pub(crate) fn in_risky_task(state: &RunState) -> bool {
    state
        .board
        .as_ref()
        .and_then(|board| board.current_entry())
        .is_some_and(|task| task.spec.risky)
}

/// Whether `action` calls for a snapshot first, and why (pure: decided from the journal).
pub(crate) fn snapshot_due(
    state: &RunState,
    action: &NextAction,
    effect_of: impl Fn(&str) -> Option<ToolEffect>,
    is_risky: impl Fn(&ToolCall) -> bool,
) -> Option<SnapshotReason> {
    match action {
        // A call not yet started (a resume after a crash between the snapshot and the call's
        // start snapshots again; an unchanged tree is not journaled twice).
        NextAction::RunTool { call, .. } if is_risky(call) => Some(SnapshotReason::BeforeRisky),
        NextAction::StartTurn { .. } if state.turns_started == 0 && state.snapshots.is_empty() => {
            Some(SnapshotReason::RunStart)
        }
        NextAction::FinishTurn { .. } | NextAction::Finish { .. } => {
            let turn = state.turns_started;
            // The results of this turn's mutating calls (also "interrupted" ones: a partial
            // effect is worth a snapshot too). Compaction never replaces the current turn.
            let last_mutation = state
                .history
                .iter()
                .filter(|entry| entry.turn == turn)
                .filter(|entry| {
                    matches!(&entry.message, Message::Tool { name, .. }
                        if effect_of(name) == Some(ToolEffect::Mutating))
                })
                .map(|entry| entry.seq)
                .max()?;
            let already = state
                .snapshots
                .last()
                .is_some_and(|snapshot| snapshot.seq > last_mutation);
            (!already).then_some(SnapshotReason::AfterTools)
        }
        _ => None,
    }
}

fn reason_name(reason: SnapshotReason) -> &'static str {
    match reason {
        SnapshotReason::RunStart => "run_start",
        SnapshotReason::AfterTools => "after_tools",
        SnapshotReason::TaskVerified => "task_verified",
        SnapshotReason::BeforeRisky => "before_risky",
        SnapshotReason::WaveStart => "wave_start",
        SnapshotReason::TaskMerged => "task_merged",
        SnapshotReason::BeforeMerge => "before_merge",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use baton_core::{HistoryEntry, SnapshotRecord};

    fn effect(name: &str) -> Option<ToolEffect> {
        match name {
            "write_file" | "shell" => Some(ToolEffect::Mutating),
            "read_file" | "finish" => Some(ToolEffect::ReadOnly),
            _ => None,
        }
    }

    fn never(_: &ToolCall) -> bool {
        false
    }

    #[test]
    fn only_a_task_marked_risky_makes_its_calls_risky() {
        use baton_core::board::{TaskBoard, TaskEntry, TaskStatus};
        use baton_core::task::TaskSpec;
        let entry = |id: &str, risky: bool| TaskEntry {
            spec: TaskSpec {
                id: id.into(),
                title: id.into(),
                instructions: "i".into(),
                deps: vec![],
                check: "true".into(),
                risky,
            },
            status: TaskStatus::Running,
            approach: 1,
            attempt: 1,
            claimed_done: None,
            check_passed: false,
            last_failure: None,
            failed_approaches: vec![],
            start_snapshot: None,
            summary: None,
            reason: None,
            cost_usd: 0.0,
            tokens: 0,
            turns: 0,
            running_ms: 0,
            delegation: None,
        };
        let state = |current: Option<&str>| RunState {
            board: Some(TaskBoard {
                tasks: vec![entry("safe", false), entry("wild", true)],
                current: current.map(str::to_string),
                ..TaskBoard::default()
            }),
            ..RunState::default()
        };
        assert!(in_risky_task(&state(Some("wild"))));
        assert!(!in_risky_task(&state(Some("safe"))));
        assert!(!in_risky_task(&state(None)));
        assert!(!in_risky_task(&RunState::default()));
    }

    #[test]
    fn a_risky_call_is_snapshotted_before_it_starts() {
        let call = |command: &str| ToolCall {
            id: "c".into(),
            name: "shell".into(),
            arguments: format!("{{\"command\": \"{command}\"}}"),
        };
        let risky = |c: &ToolCall| c.arguments.contains("rm -r");
        let state = RunState::default();
        let run = |command: &str| NextAction::RunTool {
            turn: 1,
            call: call(command),
        };
        assert_eq!(
            snapshot_due(&state, &run("rm -r build"), effect, risky),
            Some(SnapshotReason::BeforeRisky)
        );
        assert_eq!(snapshot_due(&state, &run("ls"), effect, risky), None);
    }

    fn tool(seq: u64, turn: u32, name: &str) -> HistoryEntry {
        HistoryEntry {
            seq,
            turn,
            message: Message::Tool {
                call_id: format!("c{seq}"),
                name: name.into(),
                content: String::new(),
            },
        }
    }

    fn snapshot(seq: u64) -> SnapshotRecord {
        SnapshotRecord {
            seq,
            snapshot: "0".repeat(40),
            reason: SnapshotReason::AfterTools,
            task: None,
        }
    }

    #[test]
    fn the_first_turn_gets_a_run_start_snapshot_once() {
        let mut state = RunState::default();
        let start = NextAction::StartTurn { turn: 1 };
        assert_eq!(
            snapshot_due(&state, &start, effect, never),
            Some(SnapshotReason::RunStart)
        );
        state.snapshots.push(snapshot(1));
        assert_eq!(snapshot_due(&state, &start, effect, never), None);
        let later = RunState {
            turns_started: 3,
            ..RunState::default()
        };
        assert_eq!(
            snapshot_due(&later, &NextAction::StartTurn { turn: 4 }, effect, never),
            None
        );
    }

    #[test]
    fn a_turn_is_snapshotted_once_and_only_after_mutating_calls() {
        let finish_turn = NextAction::FinishTurn { turn: 2 };
        let mut state = RunState {
            turns_started: 2,
            history: vec![tool(5, 1, "write_file"), tool(9, 2, "read_file")],
            ..RunState::default()
        };
        assert_eq!(
            snapshot_due(&state, &finish_turn, effect, never),
            None,
            "read-only turn"
        );
        state.history.push(tool(11, 2, "shell"));
        state.history.push(tool(13, 2, "unknown_tool"));
        assert_eq!(
            snapshot_due(&state, &finish_turn, effect, never),
            Some(SnapshotReason::AfterTools)
        );
        // An older snapshot does not count; one after the turn's last mutation does (resume).
        state.snapshots.push(snapshot(6));
        assert_eq!(
            snapshot_due(&state, &finish_turn, effect, never),
            Some(SnapshotReason::AfterTools)
        );
        state.snapshots.push(snapshot(14));
        assert_eq!(snapshot_due(&state, &finish_turn, effect, never), None);
        // A turn that ends the run is snapshotted too.
        state.snapshots.pop();
        let finish = NextAction::Finish {
            summary: "done".into(),
            finished_by: Some(baton_core::FinishedBy::Tool),
        };
        assert_eq!(
            snapshot_due(&state, &finish, effect, never),
            Some(SnapshotReason::AfterTools)
        );
        assert_eq!(
            snapshot_due(
                &state,
                &NextAction::Note {
                    text: "use the tools".into()
                },
                effect,
                never
            ),
            None
        );
    }
}
