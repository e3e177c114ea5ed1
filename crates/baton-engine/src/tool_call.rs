//! A tool call in the loop: run through the run's one registry under the sandbox, the stop
//! signal and (while planning) the read-only rule; what the tool asked to journal and what it
//! spent elsewhere are journaled before its result; then the workspace is persisted after a
//! mutating call, and a policy's request for a person pauses the run.

use std::time::{Duration, Instant};

use baton_core::ending::FINISH_WHILE_PLANNING;
use baton_core::{
    Event, FINISH_TOOL, PauseReason, ToolCall, ToolEffect, ToolResult, offered_while_planning,
};
use baton_tools::{Outbox, RunAccess, ToolContext, Workspace};

use crate::engine::elapsed_ms;
use crate::journal::Journal;
use crate::{Engine, EngineError};

impl Engine {
    /// Runs `call` (its intent already journaled) and journals its result (see the module's
    /// doc); a stop abandons it, and resume reports it interrupted or runs it again.
    pub(crate) async fn run_tool(
        &self,
        journal: &mut Journal,
        workspace: &Workspace,
        turn: u32,
        call: &ToolCall,
    ) -> Result<(), EngineError> {
        let settings = journal
            .state()
            .settings
            .clone()
            .ok_or_else(|| EngineError::Internal("no settings".into()))?;
        let planning = journal.state().is_planning();
        // The call's intent may be waiting for the next commit: its timer starts if the call
        // waits.
        let arming = journal.arming();
        let started = Instant::now();
        let outbox = Outbox::default();
        let outcome = {
            let run_journal = crate::tools::RunJournal {
                store: self.parts.store.as_ref(),
                run_id: journal.run_id(),
            };
            let ctx = ToolContext {
                workspace: workspace.clone(),
                // The shell tool caps per-call timeouts at an hour; the default is held to the
                // same bound.
                shell_timeout: Duration::from_secs(settings.limits.shell_timeout_secs.min(3600)),
                secret_env_vars: self.parts.secret_env_vars.clone(),
                // A planning run explores; its commands cannot change the workspace.
                exec: if planning {
                    self.parts.exec.read_only()
                } else {
                    self.parts.exec.clone()
                },
                run: Some(RunAccess {
                    state: journal.state(),
                    journal: &run_journal,
                    outbox: &outbox,
                }),
            };
            let execution = async {
                if planning && let Some(refusal) = self.refused_while_planning(call) {
                    return refusal;
                }
                self.tools.execute(&ctx, call).await
            };
            crate::journal::run_armed(arming, self.parts.stop.race(execution)).await
        };
        let Some(mut result) = outcome else {
            // Abandoned (the tool's process group is killed on drop): resume treats the call as
            // interrupted, and what the tool wanted journaled is dropped with it.
            return Ok(());
        };
        // What the tool changed in the run (an accepted plan) is journaled before its result,
        // and so is what it spent on other services (a search's query embedding).
        for event in outbox.take() {
            journal.record(event).await?;
        }
        self.record_side_usage(journal).await?;
        result.content = self.redactor.redact(&result.content);
        journal
            .record(Event::ToolCallFinished {
                turn,
                call_id: call.id.clone(),
                result,
                duration_ms: elapsed_ms(started),
            })
            .await?;
        if self.tools.effect_of(&call.name) == Some(ToolEffect::Mutating)
            && self.parts.extensions.persistence.is_some()
        {
            // The archive is labelled with the journal position it follows: that position
            // must be durable first.
            journal.commit().await?;
            let seq = journal.state().next_seq - 1;
            self.persist_after(journal.run_id(), seq, workspace.root())
                .await;
        }
        // The execution policy asked for a person (`ask = "pause"`): the refusal is journaled
        // above, so the resumed run simply carries on from the next step.
        if let Some(detail) = self.parts.exec.take_pause_request() {
            self.end_run(
                journal,
                Event::RunPaused {
                    reason: PauseReason::NeedsApproval,
                    detail: format!(
                        "{detail} — allow it in a policy file (or not), then `baton resume`"
                    ),
                },
            )
            .await?;
        }
        Ok(())
    }

    /// A planning run offers only read-only tools (models call others anyway): the refusal the
    /// model sees, or `None` if the call may run.
    fn refused_while_planning(&self, call: &ToolCall) -> Option<ToolResult> {
        if call.name == FINISH_TOOL {
            return Some(ToolResult::error(FINISH_WHILE_PLANNING));
        }
        let effect = self.tools.effect_of(&call.name);
        let offered = effect.is_none_or(|effect| offered_while_planning(&call.name, effect));
        (!offered).then(|| {
            ToolResult::error(format!(
                "`{}` is not available while planning: nothing may change before the plan is \
                 accepted. Explore with the read-only tools, then call `submit_plan`.",
                call.name
            ))
        })
    }
}
