//! The agent loop: decide the next action from state, journal the intent, act, journal the
//! outcome. Each arm hands its action to the module whose job it is (a model call, a tool call,
//! compaction, the task graph); an action that ends the run goes through
//! [`Engine::end_run`](crate::ending).

use baton_core::governance::LoopPattern;
use baton_core::{
    Event, LoopResponse, NextAction, PauseReason, RunStatus, ToolEffect, ToolResult, next_action,
};
use baton_model::RetrySchedule;
use baton_tools::Workspace;

use crate::api::{RunOutcome, paused_outcome, terminal_outcome};
use crate::engine::RequestHistory;
use crate::journal::Journal;
use crate::{Engine, EngineError};

impl Engine {
    /// Steps the run until it is no longer running (finished, failed, paused) or a stop
    /// abandoned the step in progress, and says how it ended.
    pub(crate) async fn drive(
        &self,
        journal: &mut Journal,
        workspace: Workspace,
    ) -> Result<RunOutcome, EngineError> {
        let mut retry: Option<(u32, RetrySchedule)> = None;
        let mut compaction_retry: Option<RetrySchedule> = None;
        let mut requests = RequestHistory::default();
        loop {
            if self.parts.stop.is_stopped() && journal.state().status == RunStatus::Running {
                self.end_run(
                    journal,
                    Event::RunPaused {
                        reason: PauseReason::Interrupted,
                        detail: "stopped on request; `baton resume` continues it".into(),
                    },
                )
                .await?;
            }
            let action = next_action(journal.state());
            self.snapshot_if_due(journal, &action, &workspace).await?;
            match action {
                NextAction::Stop => break,
                NextAction::StartTurn { turn } => {
                    self.record_side_usage(journal).await?;
                    if !self.govern_between_turns(journal).await? {
                        journal.record(Event::TurnStarted { turn }).await?
                    }
                }
                NextAction::CallModel {
                    turn,
                    call,
                    attempt,
                } => {
                    let schedule = match &mut retry {
                        Some((c, schedule)) if *c == call => schedule,
                        _ => &mut retry.insert((call, self.parts.retry.schedule())).1,
                    };
                    self.call_model(journal, &mut requests, turn, call, attempt, schedule)
                        .await?;
                }
                NextAction::Compact { turn, attempt } => {
                    if attempt == 1 || compaction_retry.is_none() {
                        compaction_retry = Some(self.parts.retry.schedule());
                    }
                    if let Some(schedule) = &mut compaction_retry {
                        self.compact(journal, turn, attempt, schedule).await?;
                    }
                }
                NextAction::RunTool { turn, call } => {
                    let effect = self
                        .parts
                        .tools
                        .effect_of(&call.name)
                        .unwrap_or(ToolEffect::ReadOnly);
                    journal
                        .record(Event::ToolCallStarted {
                            turn,
                            call_id: call.id.clone(),
                            name: call.name.clone(),
                            arguments: call.arguments.clone(),
                            effect,
                        })
                        .await?;
                    self.run_tool(journal, &workspace, turn, &call).await?;
                }
                NextAction::RerunTool { turn, call } => {
                    self.run_tool(journal, &workspace, turn, &call).await?
                }
                NextAction::ReportInterrupted { turn, call } => {
                    journal
                        .record(Event::ToolCallFinished {
                            turn,
                            call_id: call.id,
                            result: ToolResult::interrupted(),
                            duration_ms: 0,
                        })
                        .await?;
                }
                NextAction::Note { text } => journal.record(Event::NoteAdded { text }).await?,
                NextAction::AcceptTextEnd { turn, summary } => {
                    journal
                        .record(Event::TextEndAccepted { turn, summary })
                        .await?
                }
                NextAction::PauseEnding { reason, detail } => {
                    if reason == PauseReason::Loop {
                        journal
                            .record(Event::LoopDetected {
                                pattern: LoopPattern::NoToolReplies,
                                detail: detail.clone(),
                                response: LoopResponse::Pause,
                            })
                            .await?;
                    }
                    self.end_run(journal, Event::RunPaused { reason, detail })
                        .await?
                }
                NextAction::FinishTurn { turn } => {
                    journal.record(Event::TurnFinished { turn }).await?
                }
                NextAction::Finish {
                    summary,
                    finished_by,
                } => {
                    self.end_run(
                        journal,
                        Event::RunFinished {
                            summary,
                            finished_by,
                        },
                    )
                    .await?
                }
                NextAction::Task(action) => self.task_step(journal, &workspace, action).await?,
                NextAction::PauseAtTurnLimit { max_turns } => {
                    let detail = format!(
                        "reached the limit of {max_turns} turns; continue with `baton resume --max-turns {}`",
                        max_turns.saturating_mul(2).max(1)
                    );
                    self.end_run(
                        journal,
                        Event::RunPaused {
                            reason: PauseReason::MaxTurns,
                            detail,
                        },
                    )
                    .await?;
                }
            }
        }
        terminal_outcome(journal.state())
            .or_else(|| paused_outcome(journal.state()))
            .ok_or_else(|| {
                EngineError::Internal("the run loop stopped while the run was still running".into())
            })
    }
}
