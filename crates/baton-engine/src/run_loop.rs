//! The agent loop: decide the next action from state, journal the intent, act, journal the
//! outcome.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_context::encoder::PromptEncoder;
use baton_context::tokens::TokenCounter;
use baton_context::{Assembler, SYSTEM_PROMPT};
use baton_core::Planning;
use baton_core::ending::FINISH_WHILE_PLANNING;
use baton_core::governance::LoopPattern;
use baton_core::task::PlanSource;
use baton_core::{
    AssistantMessage, CompactionTrigger, ErrorClass, Event, FINISH_TOOL, LoopResponse, ModelReply,
    ModelRequest, NextAction, PauseReason, Redactor, RequestMetrics, RunId, RunState, RunStatus,
    SUBMIT_PLAN_TOOL, ToolCall, ToolEffect, ToolResult, next_action, offered_while_planning,
};
use baton_model::{ModelError, RetrySchedule, StreamDelta, StreamObserver};
use baton_store::{Holder, NewRun};
use baton_tools::{Outbox, RunAccess, ToolContext, ToolRegistry, Workspace};

use crate::EngineError;
use crate::api::{
    EngineParts, RunObserver, RunOutcome, SettingsOverride, StartRun, paused_outcome,
    terminal_outcome,
};
use crate::checkpoint;
use crate::failure::pause_for_failure;
use crate::journal::Journal;

/// A tool choice that names a tool must name one the run offers: the standard tools, the code
/// index's, an MCP server's, a program's own. Checked by the engine, which knows them all,
/// rather than by configuration, which sees only the standard set.
fn check_tool_choice(choice: &baton_core::ToolChoice, offered: &[&str]) -> Result<(), EngineError> {
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

pub struct Engine {
    pub(crate) parts: EngineParts,
    pub(crate) redactor: Redactor,
    pub(crate) counter: TokenCounter,
    /// Every tool of a run, in the order they are offered: the parts' tools, then the run's
    /// own (memory, `submit_plan`). One registry, one dispatch path.
    pub(crate) tools: ToolRegistry,
    pub(crate) snapshots: crate::snapshots::SnapshotHook,
    pub(crate) persistence: Option<std::sync::Arc<dyn crate::WorkspacePersistence>>,
    /// MCP servers that did not start for this process (name, why): journaled when a run starts
    /// or resumes, so that `status` and the logs say which tools are missing.
    pub(crate) mcp_failures: Vec<(String, String)>,
    /// MCP servers that started (name, version, tools), journaled the same way.
    pub(crate) mcp_started: Vec<(String, String, Vec<String>)>,
    /// Renders the repo map for briefs ([`Engine::with_repo_map`]).
    pub(crate) repo_map: Option<std::sync::Arc<dyn crate::RepoMapSource>>,
    /// Other services' usage to journal ([`Engine::with_side_usage`]).
    pub(crate) side_usage: Option<std::sync::Arc<dyn crate::SideUsage>>,
    /// How long a read-only call's intent may wait for the next commit
    /// ([`Engine::with_read_only_commit_delay`]).
    pub(crate) read_only_commit_delay: std::time::Duration,
}

/// What the engine remembers between requests within one process (not journaled: it only saves
/// work — what it computes depends on each request alone).
#[derive(Default)]
pub(crate) struct RequestHistory {
    /// The previous request, which the next one is built from: building it costs only what
    /// changed.
    pub(crate) assembler: Assembler,
    /// The previous request's encoding: the digest and prefix stability of the next one cost
    /// only what changed.
    pub(crate) encoder: PromptEncoder,
    /// The previous request's token count: the next one counts only what changed.
    pub(crate) tokens: baton_context::tokens::RunningCount,
}

/// AGENTS.md larger than this is cut: it is re-sent with every request.
const MAX_PROJECT_INSTRUCTIONS: usize = 32 * 1024;

impl Engine {
    pub fn new(parts: EngineParts) -> Engine {
        let redactor = Redactor::new(parts.secrets.clone());
        let tools = crate::tools::with_run_tools(&parts.tools);
        Engine {
            parts,
            redactor,
            counter: TokenCounter::default(),
            tools,
            snapshots: Default::default(),
            persistence: None,
            mcp_failures: Vec::new(),
            mcp_started: Vec::new(),
            repo_map: None,
            side_usage: None,
            read_only_commit_delay: crate::DEFAULT_READ_ONLY_COMMIT_DELAY,
        }
    }

    /// How long the commit announcing a read-only call may wait to be written with the next
    /// commit (default [`crate::DEFAULT_READ_ONLY_COMMIT_DELAY`]): the call runs meanwhile, and a
    /// turn whose call reads quickly costs one commit instead of two. The model reply that
    /// commit carries is at risk for up to this much longer. Zero writes it at once, while the
    /// call runs.
    pub fn with_read_only_commit_delay(mut self, delay: std::time::Duration) -> Engine {
        self.read_only_commit_delay = delay;
        self
    }

    /// Where usage of other services (the code index's embedder) comes from: journaled at the
    /// start of each turn, its cost counted against the budget.
    pub fn with_side_usage(mut self, usage: std::sync::Arc<dyn crate::SideUsage>) -> Engine {
        self.side_usage = Some(usage);
        self
    }

    /// Where repo maps for briefs come from: one is rendered and journaled when a run without
    /// a plan starts and when each task starts.
    pub fn with_repo_map(mut self, source: std::sync::Arc<dyn crate::RepoMapSource>) -> Engine {
        self.repo_map = Some(source);
        self
    }

    /// The MCP servers that started for this engine's process — name, version (from the
    /// handshake) and the tools they offer — each journaled as `mcp_server_started` when a run
    /// starts or resumes.
    pub fn with_mcp_started(mut self, started: Vec<(String, String, Vec<String>)>) -> Engine {
        self.mcp_started = started;
        self
    }

    /// The MCP servers that did not start for this engine's process, with why: each is
    /// journaled as `mcp_server_failed` when a run starts or resumes (secrets redacted).
    pub fn with_mcp_failures(mut self, failures: Vec<(String, String)>) -> Engine {
        self.mcp_failures = failures;
        self
    }

    /// Journals the MCP servers' starts ([`Engine::with_mcp_started`],
    /// [`Engine::with_mcp_failures`]) for the run `journal` is writing.
    async fn record_mcp_failures(&self, journal: &mut Journal) -> Result<(), EngineError> {
        for (server, version, tools) in &self.mcp_started {
            journal
                .record(Event::McpServerStarted {
                    server: server.clone(),
                    version: version.clone(),
                    tools: tools.clone(),
                })
                .await?;
        }
        for (server, error) in &self.mcp_failures {
            journal
                .record(Event::McpServerFailed {
                    server: server.clone(),
                    error: self.redactor.redact(error),
                })
                .await?;
        }
        Ok(())
    }

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
        let mut journal = Journal::new(
            self.parts.store.clone(),
            lease,
            RunState::default(),
            self.parts.observer.clone(),
        )
        .with_side_usage(self.side_usage.clone())
        .with_read_only_delay(self.read_only_commit_delay);
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
            recorded = self.record_mcp_failures(&mut journal).await;
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
        let mut journal = Journal::new(
            self.parts.store.clone(),
            lease,
            state,
            self.parts.observer.clone(),
        )
        .with_checkpoint_at(checkpointed)
        .with_side_usage(self.side_usage.clone())
        .with_read_only_delay(self.read_only_commit_delay);
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
        self.record_mcp_failures(journal).await?;
        self.drive(journal, workspace).await
    }

    async fn drive(
        &self,
        journal: &mut Journal,
        workspace: Workspace,
    ) -> Result<RunOutcome, EngineError> {
        let mut retry: Option<(u32, RetrySchedule)> = None;
        let mut compaction_retry: Option<RetrySchedule> = None;
        let mut requests = RequestHistory::default();
        loop {
            if self.parts.stop.is_stopped() && journal.state().status == RunStatus::Running {
                journal
                    .record(Event::RunPaused {
                        reason: PauseReason::Interrupted,
                        detail: "stopped on request; `baton resume` continues it".into(),
                    })
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
                    journal.record(Event::RunPaused { reason, detail }).await?
                }
                NextAction::FinishTurn { turn } => {
                    journal.record(Event::TurnFinished { turn }).await?
                }
                NextAction::Finish {
                    summary,
                    finished_by,
                } => {
                    journal
                        .record(Event::RunFinished {
                            summary,
                            finished_by,
                        })
                        .await?
                }
                NextAction::Task(action) => self.task_step(journal, &workspace, action).await?,
                NextAction::PauseAtTurnLimit { max_turns } => {
                    let detail = format!(
                        "reached the limit of {max_turns} turns; continue with `baton resume --max-turns {}`",
                        max_turns.saturating_mul(2).max(1)
                    );
                    journal
                        .record(Event::RunPaused {
                            reason: PauseReason::MaxTurns,
                            detail,
                        })
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

    async fn call_model(
        &self,
        journal: &mut Journal,
        requests: &mut RequestHistory,
        turn: u32,
        call: u32,
        attempt: u32,
        schedule: &mut RetrySchedule,
    ) -> Result<(), EngineError> {
        let RequestHistory {
            assembler,
            encoder,
            tokens,
        } = requests;
        let assembly = assembler
            .assemble(journal.state())
            .ok_or_else(|| EngineError::Internal("no settings in run state".into()))?;
        let estimate = self.counter.estimate_since(
            journal.state(),
            assembly.request,
            assembly.unchanged,
            tokens,
        );
        if self.compact_before_call(journal, turn, estimate).await? {
            return Ok(());
        }
        if !self
            .budget_allows_call(journal, &assembly.request.model, estimate.estimated)
            .await?
        {
            return Ok(());
        }
        let request = assembly.request;
        let encoded = encoder.encode(request);
        let window_tokens = journal
            .state()
            .settings
            .as_ref()
            .map_or(0, |s| s.context.window_tokens);
        let metrics = RequestMetrics {
            estimated_prompt_tokens: estimate.estimated,
            counted_prompt_tokens: estimate.counted,
            window_tokens,
            prefix_stability: encoded.prefix_stability,
            masked_outputs: assembly.masked_outputs,
        };
        journal
            .record(Event::ModelCallStarted {
                turn,
                call,
                attempt,
                request_sha256: encoded.digest,
                context: Some(metrics),
            })
            .await?;
        let started = Instant::now();
        let Some(outcome) = self.send(request, estimate.estimated).await else {
            // Abandoned: the call stays open in the journal and is sent again on resume.
            return Ok(());
        };
        match outcome {
            Ok(reply) => {
                let cost_usd = self.price(&reply, &request.model);
                let message = self.normalize_reply(reply.message, turn);
                journal
                    .record(Event::ModelCallFinished {
                        turn,
                        call,
                        message,
                        usage: reply.usage,
                        cost_usd,
                        finish_reason: reply.finish_reason,
                        served_model: reply.served_model,
                        duration_ms: elapsed_ms(started),
                    })
                    .await
            }
            Err(error) => {
                self.model_call_failed(journal, turn, call, attempt, error, schedule)
                    .await
            }
        }
    }

    /// Sends one request under the rate limit and the call timeout; `None` if a stop abandoned
    /// it.
    pub(crate) async fn send(
        &self,
        request: &ModelRequest,
        estimated_tokens: u64,
    ) -> Option<Result<ModelReply, ModelError>> {
        let mut deltas = DeltaForwarder {
            observer: self.parts.observer.clone(),
        };
        // Wait for the client-side budget before sending (a stop abandons the wait).
        let tokens = u32::try_from(estimated_tokens).unwrap_or(u32::MAX);
        self.parts
            .stop
            .race(self.parts.rate_limiter.acquire(tokens))
            .await?;
        let deadline = self.parts.model_call_timeout;
        let bounded = async {
            tokio::time::timeout(deadline, self.parts.provider.complete(request, &mut deltas))
                .await
                .unwrap_or_else(|_| {
                    Err(ModelError::new(
                        ErrorClass::Transient,
                        format!("the model call took longer than {} s", deadline.as_secs()),
                    ))
                })
        };
        self.parts.stop.race(bounded).await
    }

    /// Prices a reply by the model the server says answered, else the one asked for.
    pub(crate) fn price(&self, reply: &ModelReply, requested_model: &str) -> Option<f64> {
        reply.usage.as_ref().and_then(|usage| {
            reply
                .served_model
                .as_deref()
                .and_then(|served| self.parts.prices.cost(served, usage))
                .or_else(|| self.parts.prices.cost(requested_model, usage))
        })
    }

    async fn model_call_failed(
        &self,
        journal: &mut Journal,
        turn: u32,
        call: u32,
        attempt: u32,
        error: ModelError,
        schedule: &mut RetrySchedule,
    ) -> Result<(), EngineError> {
        let message = self.redactor.redact(&error.to_string());
        if error.class == ErrorClass::ContextOverflow
            && let Some(replaced) = self.overflow_compaction_cut(journal.state())
        {
            journal
                .record(Event::ModelCallFailed {
                    turn,
                    call,
                    attempt,
                    class: error.class,
                    message,
                    retry_in_ms: None,
                })
                .await?;
            return self
                .start_compaction(journal, turn, replaced, CompactionTrigger::Overflow, 0)
                .await;
        }
        use crate::failure::{UNREACHABLE_ATTEMPTS, pause_unreachable, unreachable_retry_delay};
        // A first call that cannot connect at all (first of the run, or first after a resume
        // moved it to another endpoint): two quick retries, then a pause that says what to
        // check. Once the server has answered, the patient schedule below applies.
        let never_reached =
            error.class == ErrorClass::Unreachable && journal.state().calls_on_endpoint == 0;
        let failures_so_far = journal.state().consecutive_model_failures;
        let breaker_trips = failures_so_far.saturating_add(1) >= self.parts.breaker_failures;
        // The breaker stops retrying across calls too: a run never spins on a dead endpoint.
        let delay = if never_reached {
            (attempt < UNREACHABLE_ATTEMPTS).then(|| unreachable_retry_delay(attempt))
        } else if breaker_trips {
            None
        } else {
            schedule.next_delay(&error)
        };
        journal
            .record(Event::ModelCallFailed {
                turn,
                call,
                attempt,
                class: error.class,
                message: message.clone(),
                retry_in_ms: delay.map(|d| d.as_millis() as u64),
            })
            .await?;
        if let Some(delay) = delay {
            self.parts.stop.race(tokio::time::sleep(delay)).await;
            return Ok(());
        }
        let event = if never_reached {
            let base_url = journal
                .state()
                .settings
                .as_ref()
                .map(|s| s.model.base_url.clone())
                .unwrap_or_default();
            pause_unreachable(&base_url, &message, attempt)
        } else {
            pause_for_failure(
                error.class,
                &message,
                attempt,
                failures_so_far,
                breaker_trips,
            )
        };
        journal.record(event).await
    }

    async fn run_tool(
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
            && self.persistence.is_some()
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
            journal
                .record(Event::RunPaused {
                    reason: PauseReason::NeedsApproval,
                    detail: format!(
                        "{detail} — allow it in a policy file (or not), then `baton resume`"
                    ),
                })
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

    /// Gives every tool call a unique, non-empty id (some servers send none, or repeat them) and
    /// scrubs secrets, so that what is journaled is exactly what later prompts will contain.
    fn normalize_reply(&self, mut message: AssistantMessage, turn: u32) -> AssistantMessage {
        let mut seen = std::collections::HashSet::new();
        for (i, call) in message.tool_calls.iter_mut().enumerate() {
            if call.id.trim().is_empty() || seen.contains(&call.id) {
                let mut n = 0;
                call.id = format!("call_{turn}_{i}");
                while seen.contains(&call.id) {
                    n += 1;
                    call.id = format!("call_{turn}_{i}_{n}");
                }
            }
            seen.insert(call.id.clone());
            call.arguments = self.redactor.redact(&call.arguments);
        }
        message.content = message.content.map(|c| self.redactor.redact(&c));
        message
    }
}

pub(crate) fn elapsed_ms(started: Instant) -> u64 {
    started.elapsed().as_millis().try_into().unwrap_or(u64::MAX)
}

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

struct DeltaForwarder {
    observer: Arc<dyn RunObserver>,
}

impl StreamObserver for DeltaForwarder {
    fn on_delta(&mut self, delta: &StreamDelta) {
        self.observer.on_delta(delta);
    }
}
