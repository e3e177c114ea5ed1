//! Resuming a run: its state from the latest checkpoint and the events after it, the settings
//! and plan a resume changes, how the optional parts started in this process — then the loop,
//! from where the journal says the run stopped.

use std::path::Path;

use baton_core::task::PlanSource;
use baton_core::{Event, RunId};
use baton_store::Holder;
use baton_tools::Workspace;

use crate::api::{RunOutcome, SettingsOverride, terminal_outcome};
use crate::checkpoint;
use crate::journal::Journal;
use crate::start::check_tool_choice;
use crate::{Engine, EngineError};

impl Engine {
    /// Replays a run's journal and keeps going from where it stopped.
    pub async fn resume(
        &self,
        run_id: &RunId,
        overrides: &SettingsOverride,
    ) -> Result<RunOutcome, EngineError> {
        let lease = self
            .parts
            .store
            .acquire(run_id, &Holder::this_process())
            .await?;
        self.resume_leased(lease, None, overrides).await
    }

    /// [`Engine::resume`] with the lease already held (a worker's claim), optionally working in
    /// `workspace` instead of the directory the run recorded (a worker's own copy). The lease is
    /// renewed while the run is driven and released at the end, as in `resume`.
    pub(crate) async fn resume_leased(
        &self,
        lease: baton_store::Lease,
        workspace: Option<&Path>,
        overrides: &SettingsOverride,
    ) -> Result<RunOutcome, EngineError> {
        let run_id = &lease.run_id.clone();
        let loaded = checkpoint::load_state(self.parts.store.as_ref(), run_id).await;
        let (state, checkpointed) = match loaded {
            Ok((state, seq)) if state.run_id.is_some() => (state, seq),
            Ok(_) => {
                let _ = self.parts.store.release(&lease).await;
                return Err(EngineError::EmptyRun(run_id.clone()));
            }
            Err(failure) => {
                let _ = self.parts.store.release(&lease).await;
                return Err(failure);
            }
        };
        let mut journal = self
            .open_journal(lease, state)
            .with_checkpoint_at(checkpointed);
        let result = self
            .resume_journal(&mut journal, workspace, overrides)
            .await;
        journal.close().await;
        result
    }

    async fn resume_journal(
        &self,
        journal: &mut Journal,
        workspace: Option<&Path>,
        overrides: &SettingsOverride,
    ) -> Result<RunOutcome, EngineError> {
        let state = journal.state();
        if let Some(outcome) = terminal_outcome(state) {
            return Ok(outcome);
        }
        let dir = workspace.unwrap_or(Path::new(&state.workspace));
        let workspace = Workspace::new(dir).map_err(|e| EngineError::Workspace {
            path: dir.display().to_string(),
            detail: e.to_string(),
        })?;
        let settings = state
            .settings
            .clone()
            .ok_or_else(|| EngineError::EmptyRun(journal.run_id().clone()))?;
        // The same plan again (a supervisor's restarted child) changes nothing.
        let plan = overrides.plan.clone().filter(|plan| {
            state.board.as_ref().is_none_or(|b| {
                b.final_check != plan.final_check
                    || !b.tasks.iter().map(|t| &t.spec).eq(plan.tasks.iter())
            })
        });
        if plan.is_some() && state.board.as_ref().is_some_and(|b| b.any_started()) {
            return Err(EngineError::Usage(
                "the run has already started working on its plan: a new plan can only replace \
                 one before its first task"
                    .into(),
            ));
        }
        let resumed = overrides.apply(settings.clone());
        // A resumed run offers the tools it journaled when it started.
        if resumed.model.tool_choice != settings.model.tool_choice {
            let names: Vec<&str> = state.tools.iter().map(|t| t.name.as_str()).collect();
            check_tool_choice(&resumed.model.tool_choice, &names)?;
        }
        journal
            .record(Event::RunResumed { settings: resumed })
            .await?;
        if let Some(plan) = plan {
            journal
                .record(Event::PlanSet {
                    source: PlanSource::User,
                    tasks: plan.tasks,
                    final_check: plan.final_check,
                })
                .await?;
        }
        self.record_part_starts(journal).await?;
        self.drive(journal, workspace).await
    }
}
