//! The subcommands. Each returns the process exit code or a [`CliError`] carrying one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use baton::settings::check_budget_is_priced;
use baton_core::{RunSettings, replay};
use baton_engine::{RunObserver, RunOutcome, SettingsChange, SettingsOverride, Snapshots};
use baton_summary::{RunAggregate, RunView};

use crate::config::ConfigLayer;
use crate::output::{self, Human, JsonLines};
use crate::plan_cmd::{self, PlanRequest};
use crate::store::{
    latest_resumable_run, open_existing_store, open_store_for_run, resolve_run, run_journal,
};
use crate::store_error;
use crate::{CliError, ModelFlags, ResumeArgs, RunArgs, exit, transcript};

type CliResult = Result<u8, CliError>;

/// `println!` that ignores a closed stdout (`baton logs | head`) instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

macro_rules! out {
    ($($arg:tt)*) => {{
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

pub(crate) fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

pub(crate) fn workspace_dir(path: &Path) -> Result<PathBuf, CliError> {
    Ok(baton::settings::workspace_dir(path)?)
}

pub(crate) use baton::settings::{file_and_env_layers, keep_state_out_of_git};

/// The settings of a new run (or a doctor check): files, environment and these flags layered.
pub(crate) fn resolve_settings(
    workspace: &Path,
    flags: &ModelFlags,
) -> Result<(RunSettings, ConfigLayer), CliError> {
    Ok(baton::settings::resolve(
        workspace,
        flags_layer_checked(flags)?,
    )?)
}

/// How long a run's end may wait for the trace receiver.
pub(crate) const TRACE_FLUSH: Duration = Duration::from_secs(3);

/// The runtime of `run` / `resume`: pauses on Ctrl-C, snapshots unless turned off, with the
/// configured MCP servers' tools (a server that fails to start is reported on stderr and left
/// out). The servers' sessions end with [`baton::Runtime::shutdown`] or when it is dropped.
async fn runtime(
    workspace: &Path,
    (settings, layer): (RunSettings, ConfigLayer),
    opened: baton::store::Opened,
    observer: Arc<dyn RunObserver>,
    exec: baton_tools::ExecEnv,
    no_snapshots: bool,
) -> Result<baton::Runtime, CliError> {
    let mut builder = baton::Runtime::builder()
        .workspace(workspace)
        .resolved(settings, layer)
        .opened_store(opened)
        .observer(observer)
        .stop_signal(baton_app::signals::stop_on_signals(
            "stopping: pausing the run cleanly (send the signal again to quit at once)",
        ))
        .exec(exec)
        // The secrets (the servers' own among them) reach the redactor before anything that
        // may echo one is logged: a server's stderr in its failure, say.
        .on_secrets(Arc::new(|secrets: &[String]| {
            crate::logging::redact_also(secrets)
        }));
    if no_snapshots {
        builder = builder.snapshots(Snapshots::Off);
    }
    let runtime = builder.build().await?;
    for line in runtime.notices() {
        eprintln!("baton: {}", crate::logging::redacted(line));
    }
    Ok(runtime)
}

/// The output stream (JSONL or human) and, when the environment asks for it, the trace.
fn observer(json: bool, trace: Option<baton_telemetry::TraceObserver>) -> Arc<dyn RunObserver> {
    let output: Arc<dyn RunObserver> = if json {
        Arc::new(JsonLines::new())
    } else {
        Arc::new(Human::new())
    };
    match trace {
        Some(trace) => Arc::new(baton_core::Fanout(vec![output, Arc::new(trace)])),
        None => output,
    }
}

/// The flags' layer over the layer a supervisor passed.
pub(crate) fn flags_layer_checked(flags: &ModelFlags) -> Result<ConfigLayer, CliError> {
    let passed = match &flags.settings_layer {
        Some(json) => serde_json::from_str::<ConfigLayer>(json)
            .map_err(|e| CliError::usage(anyhow!("--settings-layer is not a config layer: {e}")))?,
        None => ConfigLayer::default(),
    };
    Ok(passed
        .overlay(flags.keys.clone().into())
        .overlay(flags.mcp.layer()?))
}

/// What `run` checks before anything starts (a supervisor checks it before its first child).
pub(crate) fn check_run(
    workspace: &Path,
    args: &RunArgs,
) -> Result<(RunSettings, ConfigLayer), CliError> {
    if args.goal().trim().is_empty() {
        return Err(CliError::usage(anyhow!(
            "the goal is empty: say what the agent should do"
        )));
    }
    let (settings, layer) = resolve_settings(workspace, &args.model)?;
    baton_app::goal::check_size(args.goal(), settings.context.window_tokens)?;
    check_budget_is_priced(&settings, &layer)?;
    Ok((settings, layer))
}

pub async fn run(workspace: &Path, store: Option<&str>, args: RunArgs) -> CliResult {
    let workspace = workspace_dir(workspace)?;
    let (mut settings, layer) = check_run(&workspace, &args)?;
    let plan = match args.tasks.resolve(&mut settings)? {
        PlanRequest::CheckOnly(plan) => {
            plan_cmd::print_checked(&plan);
            return Ok(exit::FINISHED);
        }
        PlanRequest::File(plan) => Some(plan),
        PlanRequest::None | PlanRequest::Planner(_) => None,
    };
    let exec = crate::sandbox_cmd::exec_env(&workspace, &layer, &args.sandbox)?;
    let run_id = args
        .run_id
        .clone()
        .map_or_else(baton_core::RunId::new, baton_core::RunId::from_string);
    crate::logging::attach_run(&workspace, &run_id);
    let opened = open_store_for_run(&workspace, store).await?;
    keep_state_out_of_git(&workspace);
    let telemetry = baton_telemetry::Telemetry::from_env();
    let trace = telemetry.as_ref().map(|t| t.observer(&run_id, &[]));
    let runtime = runtime(
        &workspace,
        (settings, layer),
        opened,
        observer(args.json, trace),
        exec,
        args.no_snapshots,
    )
    .await?;
    tracing::info!(run_id = %run_id, "starting the run");
    let request = runtime.request(args.goal().to_string(), plan);
    let result = runtime.start_with_id(run_id, request).await;
    runtime.shutdown().await;
    if let Some(telemetry) = &telemetry {
        telemetry.flush(TRACE_FLUSH).await;
    }
    // Closing checkpoints the WAL into the main file; committed events are durable either way.
    let outcome = result?;
    let store = runtime.store();
    let code = after_run(&workspace, store.as_ref(), &outcome).await;
    store.close().await;
    write_last_message(args.output_last_message.as_deref(), &outcome)?;
    Ok(code.unwrap_or_else(|| report(&outcome, args.json)))
}

/// `--output-last-message FILE`: the model's final summary of a finished run (nothing is
/// written for a run that paused or failed, so a script can tell).
fn write_last_message(file: Option<&Path>, outcome: &RunOutcome) -> Result<(), CliError> {
    if let (Some(file), RunOutcome::Finished { summary, .. }) = (file, outcome) {
        std::fs::write(file, format!("{summary}\n"))
            .map_err(|e| anyhow!("cannot write the last message to {}: {e}", file.display()))?;
    }
    Ok(())
}

/// A run paused for plan review gets its plan written out for editing; prints where and
/// returns the exit code (paused).
async fn after_run(
    workspace: &Path,
    store: &dyn baton_store::Store,
    outcome: &RunOutcome,
) -> Option<u8> {
    let RunOutcome::Paused {
        run_id,
        reason: baton_core::PauseReason::PlanReview,
        ..
    } = outcome
    else {
        return None;
    };
    let state = replay(&store.load_events(run_id).await.ok()?).ok()?;
    match plan_cmd::write_review_file(workspace, &state) {
        Ok(path) => {
            out!("{}", baton_printer::plan::render(&state));
            eprintln!(
                "the plan is in {}: edit it if you like, then `baton resume {} --plan {}` (or \
                 `baton resume {}` to work through it as it is)",
                path.display(),
                run_id.short(),
                path.display(),
                run_id.short()
            );
            Some(exit::PAUSED)
        }
        Err(e) => {
            eprintln!("error: {e}");
            None
        }
    }
}

pub async fn plan(
    workspace: &Path,
    store: Option<&str>,
    run: Option<&str>,
    json: bool,
) -> CliResult {
    let (_, summary, events) = read_run(workspace, store, run).await?;
    if json {
        // The task graph as the API's run detail has it (`tasks`).
        let detail = baton_summary::RunDetail::new(&summary, &RunAggregate::from_events(&events));
        print_json(&serde_json::json!({ "run": summary.id.to_string(), "tasks": detail.tasks }))?;
        return Ok(exit::FINISHED);
    }
    let state = replay(&events)
        .map_err(|e| anyhow!("the journal of run {} cannot be replayed: {e}", summary.id))?;
    outln!("run {}", summary.id);
    out!("{}", baton_printer::plan::render(&state));
    Ok(exit::FINISHED)
}

pub async fn cost(
    workspace: &Path,
    store: Option<&str>,
    run: Option<&str>,
    json: bool,
) -> CliResult {
    let (_, summary, events) = read_run(workspace, store, run).await?;
    if json {
        let agg = RunAggregate::from_events(&events);
        let view = RunView::new(&summary, &agg);
        print_json(&serde_json::json!({
            "run": summary.id.to_string(),
            "calls": agg.calls,
            "embeddings": agg.embeddings,
            "tokens": view.tokens,
            "cost": view.cost,
        }))?;
        return Ok(exit::FINISHED);
    }
    outln!("run {}", summary.id);
    out!(
        "{}",
        crate::cost::render(&RunAggregate::from_events(&events))
    );
    Ok(exit::FINISHED)
}

pub async fn doctor(workspace: &Path, flags: &ModelFlags, json: bool) -> CliResult {
    let workspace = workspace_dir(workspace)?;
    let sandbox = baton_app::doctor::sandbox_report(&workspace, &file_and_env_layers(&workspace)?);
    let lines = |text: &str| text.lines().map(str::to_string).collect::<Vec<_>>();
    let (settings, layer) = match resolve_settings(&workspace, flags) {
        Ok(resolved) => resolved,
        Err(e) if json => {
            print_json(&serde_json::json!({
                "ok": false,
                "model": lines(&format!("{:#}", e.error)),
                "sandbox": lines(&sandbox),
            }))?;
            return Ok(e.code);
        }
        Err(e) => {
            outln!("{sandbox}");
            return Err(e);
        }
    };
    let (model_ok, report) = baton_app::doctor::model_check(&settings, &layer).await?;
    // What a server is given must not come back out in what is printed (its stderr, say).
    crate::logging::redact_also(&baton::mcp::secret_values(&layer));
    let mcp = baton_app::doctor::mcp_report(&workspace, &layer)
        .await
        .map(|(ok, text)| (ok, crate::logging::redacted(&text)));
    let (code_ok, code) = baton_app::doctor::code_index_report(&workspace, &layer).await;
    let ok = model_ok && code_ok && mcp.as_ref().is_none_or(|(mcp_ok, _)| *mcp_ok);
    let mcp_text = mcp.map(|(_, text)| text).unwrap_or_default();
    if json {
        print_json(&serde_json::json!({
            "ok": ok,
            "model": lines(&report),
            "sandbox": lines(&sandbox),
            "mcp": lines(&mcp_text),
            "code_index": lines(&code),
        }))?;
    } else {
        outln!("{report}");
        outln!("{sandbox}");
        outln!("{code}");
        if !mcp_text.is_empty() {
            outln!("{mcp_text}");
        }
    }
    Ok(if ok { exit::FINISHED } else { exit::FAILED })
}

pub fn sandbox(workspace: &Path, args: crate::sandbox_cmd::SandboxArgs) -> CliResult {
    let workspace = workspace_dir(workspace)?;
    let layer = file_and_env_layers(&workspace)?;
    crate::sandbox_cmd::run_one(
        &workspace,
        &layer,
        args,
        baton::settings::secret_values(None),
    )
}

pub async fn resume(workspace: &Path, store: Option<&str>, args: ResumeArgs) -> CliResult {
    crate::sandbox_cmd::warm_up();
    let workspace = workspace_dir(workspace)?;
    let opened = open_existing_store(&workspace, store).await?;
    let run_id = match &args.run {
        Some(prefix) => resolve_run(&opened, prefix).await?,
        None => latest_resumable_run(&opened).await?.id,
    };
    crate::logging::attach_run(&workspace, &run_id);
    let store = opened.store.clone();
    // From the run's state checkpoint when it has one: a long run's journal is not read whole.
    let state = baton_engine::run_state(store.as_ref(), &run_id)
        .await
        .map_err(|e| anyhow!("{e}"))?;
    if Path::new(&state.workspace) != workspace {
        return Err(CliError::usage(anyhow!(
            "run {run_id} works in {}, not in {}; resume it there (`baton --workspace {} resume`)",
            state.workspace,
            workspace.display(),
            state.workspace
        )));
    }
    let recorded = state
        .settings
        .clone()
        .ok_or_else(|| anyhow!("run {run_id} has no recorded settings; it never started"))?;
    // The flags' keys replace the recorded values from now on; the rest stays as journaled.
    let settings = baton::settings::apply(&flags_layer_checked(&args.model)?, recorded)?;
    let overrides = SettingsOverride {
        settings: SettingsChange::Replace(Box::new(settings.clone())),
        plan: args.plan.as_deref().map(plan_cmd::load_plan).transpose()?,
    };
    // The run's recorded settings decide the model; files and environment still set the
    // client's timeouts and retry budget, which are not part of the run.
    // `--mcp`, `--mcp-config` and `--no-mcp` count here too: servers are this process's.
    let layer = file_and_env_layers(&workspace)?.overlay(args.model.mcp_layer()?);
    let exec = crate::sandbox_cmd::exec_env(&workspace, &layer, &args.sandbox)?;
    let telemetry = baton_telemetry::Telemetry::from_env();
    // The tracer continues the run's spans, so it reads the journal (only when tracing is on).
    let trace = match &telemetry {
        Some(t) => {
            let events = store.load_events(&run_id).await.map_err(store_error)?;
            Some(t.observer(&run_id, &events))
        }
        None => None,
    };
    let runtime = runtime(
        &workspace,
        (settings, layer),
        opened,
        observer(args.json, trace),
        exec,
        args.no_snapshots,
    )
    .await?;
    if let Some(mcp) = runtime.mcp() {
        let offered: Vec<_> = mcp.tools.iter().map(|t| t.spec()).collect();
        for line in baton_app::mcp::tool_changes(&state.tools, &offered) {
            eprintln!("baton: {line}");
        }
    }
    tracing::info!(run_id = %run_id, events = state.next_seq, "resuming the run");
    let result = runtime.resume(&run_id, &overrides).await;
    runtime.shutdown().await;
    if let Some(telemetry) = &telemetry {
        telemetry.flush(TRACE_FLUSH).await;
    }
    store.close().await;
    Ok(report(&result?, args.json))
}

/// Prints the final line (unless streaming JSON) and maps the outcome to the exit code.
fn report(outcome: &RunOutcome, json: bool) -> u8 {
    let run = outcome.run_id();
    let (code, text) = match outcome {
        RunOutcome::Finished { summary, .. } => {
            (exit::FINISHED, format!("run {run} finished: {summary}"))
        }
        RunOutcome::Failed { error, .. } => (exit::FAILED, format!("run {run} failed: {error}")),
        RunOutcome::Paused { detail, .. } => (
            exit::PAUSED,
            format!(
                "run {run} paused: {detail}\nresume it with `baton resume {}`",
                run.short()
            ),
        ),
    };
    if !json {
        // A closed stdout must not turn the run's exit code into a panic.
        let _ = writeln!(std::io::stdout(), "{text}");
    }
    code
}

pub async fn status(
    workspace: &Path,
    store: Option<&str>,
    run: Option<&str>,
    json: bool,
) -> CliResult {
    let (opened, summary, events) = read_run(workspace, store, run).await?;
    // The numbers come from the aggregation the dashboard and `baton cost` use too.
    let agg = RunAggregate::from_events(&events);
    if json {
        print_json(&baton_summary::RunDetail::new(&summary, &agg))?;
        return Ok(exit::FINISHED);
    }
    // History and working memory need the reducer's state; a journal it cannot replay (say,
    // one with task events from a newer baton) still gets every other line.
    let state = replay(&events).ok();
    let kind = match opened.is_shared() {
        true => output::status::StoreKind::Shared,
        false => output::status::StoreKind::Local,
    };
    out!(
        "{}",
        output::status::text(&summary, &agg, state.as_ref(), kind)
    );
    Ok(exit::FINISHED)
}

pub async fn ls(workspace: &Path, store: Option<&str>, all: bool, json: bool) -> CliResult {
    let workspace = workspace_dir(workspace)?;
    let opened = open_existing_store(&workspace, store).await?;
    if all {
        // Every run of the store, whatever workspace or worker it belongs to.
        let runs = opened.store.list_runs().await.map_err(store_error)?;
        out!("{}", output::status::queue_table(&runs));
        return Ok(exit::FINISHED);
    }
    let runs = opened.runs_here().await?;
    let mut views = Vec::with_capacity(runs.len());
    for run in &runs {
        let events = opened
            .store
            .load_events(&run.id)
            .await
            .map_err(store_error)?;
        views.push(RunView::new(run, &RunAggregate::from_events(&events)));
    }
    let views = baton_summary::group_families(views);
    if json {
        print_json(&views)?;
        return Ok(exit::FINISHED);
    }
    if views.is_empty() {
        outln!("no runs yet");
        return Ok(exit::FINISHED);
    }
    out!("{}", output::runs_table(&views));
    Ok(exit::FINISHED)
}

pub async fn logs(
    workspace: &Path,
    store: Option<&str>,
    run: Option<&str>,
    full: bool,
    json: bool,
) -> CliResult {
    let (_, _, events) = read_run(workspace, store, run).await?;
    if json {
        for record in &events {
            outln!("{}", output::json_line(record));
        }
    } else if full {
        out!("{}", transcript::render_full(&events));
    } else {
        out!("{}", transcript::render(&events));
    }
    Ok(exit::FINISHED)
}

/// What the commands that read one run (`status`, `cost`, `plan`, `logs`) start from: the
/// workspace's store (or `--store`'s), the run a prefix names (the latest without one) and its
/// journal.
async fn read_run(
    workspace: &Path,
    store: Option<&str>,
    run: Option<&str>,
) -> Result<
    (
        baton::store::Opened,
        baton_store::RunSummary,
        Vec<baton_core::EventRecord>,
    ),
    CliError,
> {
    let workspace = workspace_dir(workspace)?;
    let opened = open_existing_store(&workspace, store).await?;
    let (summary, events) = run_journal(&opened, run).await?;
    Ok((opened, summary, events))
}

/// One JSON document on stdout (`--json` of the reading commands).
pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| anyhow!("cannot write the JSON output: {e}"))?;
    outln!("{text}");
    Ok(())
}
