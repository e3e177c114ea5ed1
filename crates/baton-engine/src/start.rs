//! Starting a run: its `run_started` (settings, system prompt, AGENTS.md, the tools it offers),
//! its plan, how the optional parts started, and the repo map of a run without a plan — then
//! the loop. Also the start of a run already created (a parallel task's child) and the start
//! `baton submit` journals without driving.

use std::path::Path;

use baton_context::SYSTEM_PROMPT;
use baton_core::task::PlanSource;
use baton_core::{Event, Planning, RunId, RunState, SUBMIT_PLAN_TOOL};
use baton_store::{Holder, NewRun};
use baton_tools::Workspace;

use crate::api::{RunOutcome, StartRun};
use crate::journal::Journal;
use crate::{Engine, EngineError};

/// AGENTS.md larger than this is cut: it is re-sent with every request.
const MAX_PROJECT_INSTRUCTIONS: usize = 32 * 1024;

/// A tool choice that names a tool must name one the run offers: the standard tools, the code
/// index's, an MCP server's, a program's own. Checked by the engine, which knows them all,
/// rather than by configuration, which sees only the standard set.
pub(crate) fn check_tool_choice(
    choice: &baton_core::ToolChoice,
    offered: &[&str],
) -> Result<(), EngineError> {
    match choice {
        baton_core::ToolChoice::Function(name) if !offered.contains(&name.as_str()) => {
            Err(EngineError::Usage(format!(
                "tool choice '{name}' is neither auto, required nor a tool this run has ({})",
                offered.join(", ")
            )))
        }
        _ => Ok(()),
    }
}

/// Where a started run's lease comes from.
enum StartAs {
    /// A new run under this id.
    New(RunId),
    /// A run already in the store with nothing journaled.
    Created(RunId),
}

impl Engine {
    /// Starts a new run in `request.workspace` and drives it until it finishes, fails or pauses.
    pub async fn start(&self, request: StartRun) -> Result<RunOutcome, EngineError> {
        self.start_with_id(RunId::new(), request).await
    }

    /// Like [`Engine::start`], under an id chosen by the caller (a supervisor that has to know
    /// the run before its worker process creates it).
    pub async fn start_with_id(
        &self,
        run_id: RunId,
        request: StartRun,
    ) -> Result<RunOutcome, EngineError> {
        self.start_as(StartAs::New(run_id), request).await
    }

    /// Starts a run that was created but whose process died before it journaled anything (a
    /// parallel task's child run, whose id its parent journaled first).
    pub(crate) async fn start_created(
        &self,
        run_id: &RunId,
        request: StartRun,
    ) -> Result<RunOutcome, EngineError> {
        self.start_as(StartAs::Created(run_id.clone()), request)
            .await
    }

    async fn start_as(&self, start: StartAs, request: StartRun) -> Result<RunOutcome, EngineError> {
        let names = self.tools.names();
        check_tool_choice(&request.settings.model.tool_choice, &names)?;
        let workspace = Workspace::new(&request.workspace).map_err(|e| EngineError::Workspace {
            path: request.workspace.display().to_string(),
            detail: e.to_string(),
        })?;
        let (mut journal, workspace) = match start {
            StartAs::New(run_id) => self.begin_run(run_id, request, workspace).await?,
            StartAs::Created(run_id) => {
                let lease = self
                    .parts
                    .store
                    .acquire(&run_id, &Holder::this_process())
                    .await?;
                self.journal_start(lease, request, workspace).await?
            }
        };
        let result = self.drive(&mut journal, workspace).await;
        journal.close().await;
        result
    }

    /// Creates a run, journals its `RunStarted` (settings, system prompt, AGENTS.md and tool
    /// specs read from `workspace`) and hands back the journal, lease held.
    pub(crate) async fn begin_run(
        &self,
        run_id: RunId,
        request: StartRun,
        workspace: Workspace,
    ) -> Result<(Journal, Workspace), EngineError> {
        let root = workspace.root().display().to_string();
        let lease = self
            .parts
            .store
            .create_run(
                &NewRun {
                    id: run_id.clone(),
                    goal: request.goal.clone(),
                    workspace: root.clone(),
                },
                &Holder::this_process(),
            )
            .await?;
        self.journal_start(lease, request, workspace).await
    }

    /// Journals a new run's `RunStarted` (and its plan) under `lease`.
    async fn journal_start(
        &self,
        lease: baton_store::Lease,
        request: StartRun,
        workspace: Workspace,
    ) -> Result<(Journal, Workspace), EngineError> {
        let root = workspace.root().display().to_string();
        let mut journal = self.open_journal(lease, RunState::default());
        let started = Event::RunStarted {
            goal: request.goal,
            workspace: root,
            system_prompt: SYSTEM_PROMPT.to_string(),
            project_instructions: read_project_instructions(workspace.root()),
            // `submit_plan` only for a run that plans.
            tools: self
                .tools
                .specs()
                .into_iter()
                .filter(|spec| {
                    spec.name != SUBMIT_PLAN_TOOL
                        || request.settings.tasks.planning != Planning::None
                })
                .collect(),
            settings: request.settings,
        };
        let mut recorded = journal.record(started).await;
        if let (Ok(()), Some(plan)) = (&recorded, request.plan) {
            recorded = journal
                .record(Event::PlanSet {
                    source: PlanSource::User,
                    tasks: plan.tasks,
                    final_check: plan.final_check,
                })
                .await;
        }
        if recorded.is_ok() {
            recorded = self.record_part_starts(&mut journal).await;
        }
        if recorded.is_ok() && journal.state().board.is_none() {
            recorded = self.record_repo_map(&mut journal, None).await;
        }
        match recorded {
            Ok(()) => Ok((journal, workspace)),
            Err(e) => {
                journal.close().await;
                Err(e)
            }
        }
    }
}

/// The workspace's AGENTS.md, cut at [`MAX_PROJECT_INSTRUCTIONS`].
fn read_project_instructions(root: &Path) -> Option<String> {
    let text = std::fs::read(root.join("AGENTS.md")).ok()?;
    let mut text = String::from_utf8_lossy(&text).into_owned();
    if text.len() > MAX_PROJECT_INSTRUCTIONS {
        let mut cut = MAX_PROJECT_INSTRUCTIONS;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n[AGENTS.md truncated: only the first 32 KiB are shown]");
    }
    Some(text)
}
