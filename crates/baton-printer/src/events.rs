//! What the user sees while a run goes on on stderr: short human progress lines (the `--json`
//! stream is `json_lines.rs`).

use std::io::Write;

use baton_core::{CompactionTrigger, Event, EventRecord, LoopResponse, RunState, ToolOutcome};
use baton_core::{RunObserver, StreamDelta};

use crate::summary::{status_line, summary_line, word};

/// Progress lines on stderr; on a terminal, a status line under them stays current (tasks
/// done, the current task and attempt, tokens and cost so far).
pub struct Human {
    /// stderr is a terminal and `NO_COLOR` is not set: a live status line, redrawn in place
    /// with escape codes. Otherwise plain lines only.
    live: bool,
    retries: std::sync::Mutex<Repeats>,
}

/// Collapses consecutive failed model calls that failed the same way into one line and a
/// count ("… 4 more attempts, same error"), shown when something else happens.
#[derive(Default)]
pub(crate) struct Repeats {
    last: Option<String>,
    more: u32,
}

impl Repeats {
    /// The lines to print for `event` (whose own line is `line`).
    pub(crate) fn lines(&mut self, event: &Event, line: Option<String>) -> Vec<String> {
        let key = match event {
            Event::ModelCallFailed { class, message, .. } => {
                Some(format!("{}: {message}", word(class)))
            }
            _ => None,
        };
        if key.is_some() && key == self.last {
            self.more += 1;
            return Vec::new();
        }
        let mut out = Vec::new();
        if self.more > 0 && line.is_some() {
            out.push(format!(
                "  … {} more attempt{}, same error",
                self.more,
                if self.more == 1 { "" } else { "s" }
            ));
            self.more = 0;
        }
        if line.is_some() {
            self.last = key;
        }
        out.extend(line);
        out
    }
}

impl Default for Human {
    fn default() -> Self {
        Self::new()
    }
}

impl Human {
    /// Writes to this process's stderr; live status line only on a terminal without `NO_COLOR`.
    pub fn new() -> Self {
        use std::io::IsTerminal;
        // https://no-color.org: any non-empty value.
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Human {
            live: std::io::stderr().is_terminal() && !no_color,
            retries: Default::default(),
        }
    }
}

impl RunObserver for Human {
    fn on_event(&self, record: &EventRecord, state: &RunState) {
        let line = progress_line(&record.event, state);
        let mut lines = match self.retries.lock() {
            Ok(mut repeats) => repeats.lines(&record.event, line),
            Err(_) => line.into_iter().collect(),
        };
        // A parallel task's child ends inside its parent, which says how it went.
        if parallel_task(state).is_none() {
            lines.extend(summary_line(&record.event, state));
        }
        let mut err = std::io::stderr().lock();
        // `baton run 2>&1 | head` closes the pipe: keep running, just stop printing.
        if !self.live {
            for line in lines {
                let _ = writeln!(err, "{line}");
            }
            return;
        }
        let _ = write!(err, "\r\x1b[2K");
        for line in lines {
            let _ = writeln!(err, "{line}");
        }
        // A parallel child's state is not the run's: the status line waits for the parent.
        if parallel_task(state).is_none()
            && record
                .event
                .status_change()
                .is_none_or(|s| s == baton_core::RunStatus::Running)
        {
            let _ = write!(err, "\x1b[7m {} \x1b[0m", status_line(state));
        }
        let _ = err.flush();
    }

    fn on_delta(&self, _delta: &StreamDelta) {}
}

/// The line for `event`; a `--parallel` child run's lines are marked with its task, since they
/// come between the parent's.
pub fn progress_line(event: &Event, state: &RunState) -> Option<String> {
    let Some(task) = parallel_task(state) else {
        return run_progress_line(event, state);
    };
    let line = match event {
        Event::RunStarted { .. } => format!(
            "run {} started in its worktree",
            state.run_id.as_ref().map_or("?", |id| id.short())
        ),
        // The parent reports the plan, the task's end and the run's end.
        Event::PlanSet { .. } | Event::RunFinished { .. } | Event::RunFailed { .. } => {
            return None;
        }
        _ => run_progress_line(event, state)?,
    };
    Some(
        line.lines()
            .map(|l| format!("  ┆ {task}: {}", l.trim_start()))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// The task a `--parallel` child run works on (its workspace is a worktree of the parent's).
pub(crate) fn parallel_task(state: &RunState) -> Option<&str> {
    if !baton_state::is_worktree(std::path::Path::new(&state.workspace)) {
        return None;
    }
    state
        .board
        .as_ref()
        .and_then(|b| b.tasks.first())
        .map(|t| t.spec.id.as_str())
        .or(Some("task"))
}

fn run_progress_line(event: &Event, state: &RunState) -> Option<String> {
    Some(match event {
        Event::RunStarted {
            goal,
            workspace,
            settings,
            ..
        } => format!(
            "▶ run {} started in {workspace}\n  goal: {}\n  model: {} at {}",
            state
                .run_id
                .as_ref()
                .map(|r| r.short().to_string())
                .unwrap_or_default(),
            one_line(goal, 200),
            settings.model.model,
            settings.model.base_url
        ),
        Event::SupervisorRestarted {
            attempt,
            cause,
            backoff_ms,
        } => format!(
            "↻ the agent process {cause}; restart {attempt} in {:.1} s (it resumes by replay)",
            *backoff_ms as f64 / 1000.0
        ),
        Event::RunResumed { .. } => format!(
            "▶ run resumed at turn {} ({} model calls already done)",
            state.turns_finished, state.model_calls_finished
        ),
        Event::TurnStarted { turn } => match &state.board {
            Some(_) => format!("── turn {turn} · {}", status_line(state)),
            None => format!("── turn {turn}"),
        },
        Event::NoteAdded { text } => format!("  note to model: {}", one_line(text, 160)),
        Event::RunPaused { detail, .. } => format!("⏸ paused: {detail}"),
        Event::TextEndAccepted { summary, .. } => {
            format!("  ✔ text reply taken as done: {}", one_line(summary, 160))
        }
        Event::RunFinished { summary, .. } => format!("✔ finished: {}", one_line(summary, 500)),
        Event::RunFailed { error } => format!("✘ failed: {error}"),
        Event::ModelCallFailed { .. }
        | Event::ModelCallFinished { .. }
        | Event::ToolCallStarted { .. }
        | Event::ToolCallFinished { .. }
        | Event::CompactionStarted { .. }
        | Event::CompactionFailed { .. }
        | Event::CompactionFinished { .. }
        | Event::BudgetWarning { .. }
        | Event::LoopDetected { .. } => return call_progress_line(event),
        Event::ModelCallStarted { .. } | Event::TurnFinished { .. } => return None,
        other => task_line(other)?,
    })
}

/// The lines of model calls, tool calls, compactions, budgets and loops.
fn call_progress_line(event: &Event) -> Option<String> {
    Some(match event {
        Event::ModelCallFailed {
            attempt,
            class,
            message,
            retry_in_ms,
            ..
        } => match retry_in_ms {
            Some(ms) => format!(
                "  ! model call attempt {attempt} failed ({}): {} — retrying in {:.1}s",
                word(class),
                one_line(message, 200),
                *ms as f64 / 1000.0
            ),
            None => format!(
                "  ! model call attempt {attempt} failed ({}): {}",
                word(class),
                one_line(message, 300)
            ),
        },
        Event::ModelCallFinished {
            message,
            usage,
            duration_ms,
            ..
        } => {
            let tokens = match usage {
                Some(u) => format!(
                    "{} prompt + {} completion tokens",
                    u.prompt_tokens, u.completion_tokens
                ),
                None => "usage not reported".to_string(),
            };
            let mut line = format!("  model: {tokens} in {:.1}s", *duration_ms as f64 / 1000.0);
            let reasoning = message.reasoning_text();
            if !reasoning.trim().is_empty() {
                line.push_str(&format!("\n  thinks: {}", one_line(&reasoning, 200)));
            }
            if let Some(text) = message.content.as_deref().filter(|t| !t.trim().is_empty()) {
                line.push_str(&format!("\n  says: {}", one_line(text, 300)));
            }
            line
        }
        Event::ToolCallStarted {
            name, arguments, ..
        } => format!("  → {name} {}", one_line(arguments, 160)),
        Event::CompactionStarted {
            replaced,
            trigger,
            estimated_prompt_tokens,
            ..
        } => format!(
            "  ⟲ compacting {replaced} history entries ({}; prompt ≈ {estimated_prompt_tokens} tokens)",
            match trigger {
                CompactionTrigger::Threshold => "over the threshold",
                CompactionTrigger::Overflow => "the server said it overflowed",
            }
        ),
        Event::BudgetWarning {
            resource,
            used,
            limit,
            ..
        } => format!(
            "  ! budget: {} used ({:.0}%)",
            resource.describe(*used, *limit),
            100.0 * used / limit
        ),
        Event::LoopDetected {
            detail, response, ..
        } => match response {
            LoopResponse::Nudge => {
                format!("  ! loop: {detail} — the agent is told to change approach")
            }
            LoopResponse::Pause => format!("  ! loop again: {detail}"),
        },
        Event::CompactionFailed {
            attempt,
            class,
            message,
            ..
        } => format!(
            "  ! compaction attempt {attempt} failed ({}): {}",
            word(class),
            one_line(message, 200)
        ),
        Event::CompactionFinished {
            summary, replaced, ..
        } => format!(
            "  ⟲ compacted {replaced} entries into a {}-line handoff summary",
            summary.lines().count()
        ),
        Event::ToolCallFinished {
            result,
            duration_ms,
            ..
        } => {
            let mark = match result.outcome {
                ToolOutcome::Success => "ok",
                ToolOutcome::Error => "error",
                ToolOutcome::Interrupted => "interrupted",
            };
            format!(
                "    {mark} ({:.1}s): {}",
                *duration_ms as f64 / 1000.0,
                one_line(&result.content, 160)
            )
        }
        _ => return None,
    })
}

/// One line for the task-graph events (shared by the terminal and the transcript).
pub fn task_line(event: &Event) -> Option<String> {
    Some(match event {
        Event::PlanSet { tasks, .. } => {
            let ids: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
            format!("▤ plan: {} tasks ({})", tasks.len(), ids.join(", "))
        }
        Event::TaskStarted {
            task,
            approach,
            attempt,
        } => format!("▶ task {task} (approach {approach}, attempt {attempt})"),
        Event::CheckStarted { task, command, .. } => format!(
            "  ? check{}: {}",
            task.as_deref()
                .map(|t| format!(" of {t}"))
                .unwrap_or_default(),
            one_line(command, 160)
        ),
        Event::CheckFinished {
            passed,
            exit_code,
            output,
            ..
        } => format!(
            "  {} check (exit {}): {}",
            if *passed { "✔ passed" } else { "✘ failed" },
            exit_code.map_or("none".to_string(), |c| c.to_string()),
            one_line(output, 160)
        ),
        Event::TaskFinished { task, summary } => {
            format!("✔ task {task} verified: {}", one_line(summary, 200))
        }
        Event::TaskFailed { task, reason } => {
            format!("✘ task {task} failed: {}", one_line(reason, 200))
        }
        Event::TaskSkipped { task, reason } => format!("– task {task} skipped: {reason}"),
        Event::SnapshotTaken {
            snapshot, reason, ..
        } => format!("  ◉ snapshot {} ({})", short_id(snapshot), word(reason)),
        Event::RollbackStarted {
            task,
            snapshot,
            reason,
        } => format!(
            "  ↶ rolling back{} to {}: {}",
            task.as_deref()
                .map(|t| format!(" task {t}"))
                .unwrap_or_default(),
            short_id(snapshot),
            one_line(reason, 160)
        ),
        Event::RollbackFinished { snapshot, .. } => {
            format!("  ↶ workspace restored to {}", short_id(snapshot))
        }
        Event::TaskDelegated {
            task, child_run, ..
        } => format!(
            "▶ task {task} in parallel run {} (worktree {child_run})",
            short_id(child_run)
        ),
        Event::TaskReturned { task, result, .. } => match result {
            baton_core::DelegatedResult::Verified { .. } => {
                format!("  ⇠ task {task} verified in its worktree; merging")
            }
            baton_core::DelegatedResult::Failed { reason } => {
                format!(
                    "  ⇠ task {task} failed in its worktree: {}",
                    one_line(reason, 160)
                )
            }
        },
        Event::MergeStarted { task, snapshot } => {
            format!("  ⇄ merging task {task} ({})", short_id(snapshot))
        }
        Event::MergeConflicted {
            task,
            conflicts,
            follow_up,
        } => format!(
            "  ⚠ task {task} conflicts with merged work in {}: follow-up task {} redoes it",
            one_line(&conflicts.join(", "), 160),
            follow_up.id
        ),
        _ => return None,
    })
}

fn short_id(snapshot: &str) -> &str {
    snapshot.get(..12).unwrap_or(snapshot)
}

/// Collapses whitespace and cuts to `max` characters, for one-line display.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    }
}

#[cfg(test)]
mod repeat_tests {
    use super::*;

    #[test]
    fn the_same_failure_again_and_again_is_one_line_and_a_count() {
        let failed = |attempt: u32, message: &str| Event::ModelCallFailed {
            turn: 1,
            call: 1,
            attempt,
            class: baton_core::ErrorClass::Transient,
            message: message.into(),
            retry_in_ms: Some(1000),
        };
        let mut r = Repeats::default();
        let mut shown = Vec::new();
        for attempt in 1..=5 {
            shown.extend(r.lines(&failed(attempt, "refused"), Some(format!("fail {attempt}"))));
        }
        shown.extend(r.lines(&failed(6, "reset"), Some("fail 6".into())));
        shown.extend(r.lines(&Event::TurnStarted { turn: 2 }, None));
        shown.extend(r.lines(&Event::TurnStarted { turn: 2 }, Some("turn 2".into())));
        assert_eq!(
            shown,
            [
                "fail 1",
                "  … 4 more attempts, same error",
                "fail 6",
                "turn 2"
            ]
        );
    }
}
