//! `baton`: run a long-running coding agent in a workspace, durably.

mod commands;
mod config_cmd;
mod detach;
mod globals;
mod index_cmd;
mod mcp_cmd;
mod mcp_server;
mod plan_cmd;
mod queue;
mod sandbox_cmd;
mod serve_cmd;
mod snapshot_cmd;
mod supervise;
mod worker;

use baton::{config, store, trust};
// The flags' value parsers live beside the configuration keys they parse.
use baton::config::flags as flag_values;
// The texts the commands print are made by the printer crate.
use baton_printer::{self as output, cost, transcript};
use baton_telemetry::logs as logging;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

/// Exit codes: part of the public interface (README).
pub mod exit {
    pub const FINISHED: u8 = 0;
    pub const FAILED: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const PAUSED: u8 = 3;
}

/// An error with the exit code it should end the process with.
#[derive(Debug)]
pub struct CliError {
    pub code: u8,
    pub error: anyhow::Error,
}

impl CliError {
    pub fn usage(error: impl Into<anyhow::Error>) -> CliError {
        CliError {
            code: exit::USAGE,
            error: error.into(),
        }
    }
}

impl<E: Into<anyhow::Error>> From<E> for CliError {
    /// A library error that says the input must change exits 2; anything else 1.
    fn from(error: E) -> Self {
        let error = error.into();
        let code = match error.downcast_ref::<baton::Error>() {
            Some(e) if e.is_usage() => exit::USAGE,
            _ => exit::FAILED,
        };
        CliError { code, error }
    }
}

/// A store error as the CLI reports it (a locked or refused store is a usage error).
pub(crate) fn store_error(e: baton_store::StoreError) -> CliError {
    CliError::from(baton::Error::from(e))
}

#[derive(Parser)]
#[command(
    name = "baton",
    version,
    about = "A durable harness for long-running coding agents"
)]
struct Cli {
    /// Workspace directory (where the agent works; its `.baton/` holds config, policy, plans).
    #[arg(long, global = true, value_name = "DIR")]
    workspace: Option<PathBuf>,

    /// Where runs are kept: a postgres:// URL (shared by many workspaces and machines) or a
    /// SQLite file; default: the journal in the workspace's state directory
    /// ($BATON_STATE_DIR/workspaces/NAME-HASH/baton.db, see `baton doctor`).
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "BATON_STORE",
        hide_env_values = true
    )]
    store: Option<String>,

    /// More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a new run working on GOAL.
    Run(RunArgs),
    /// Continue a paused or interrupted run from its journal.
    Resume(ResumeArgs),
    /// Show the state of a run (default: the latest).
    Status {
        run: Option<String>,
        /// Print it as JSON (the shape of `GET /api/runs/ID`, see docs/json.md).
        #[arg(long)]
        json: bool,
    },
    /// List the runs of this workspace (in a shared store: the runs started here).
    Ls {
        /// Every run of the store, with the worker holding it and its lease.
        #[arg(long)]
        all: bool,
        /// Print them as a JSON array (the shape of `GET /api/runs`, see docs/json.md).
        #[arg(long, conflicts_with = "all")]
        json: bool,
    },
    /// Print a run's task graph with each task's state (default: the latest run).
    Plan {
        run: Option<String>,
        /// Print the task graph as JSON (see docs/json.md).
        #[arg(long)]
        json: bool,
    },
    /// What each model call of a run cost (default: the latest run).
    Cost {
        run: Option<String>,
        /// Print it as JSON (see docs/json.md).
        #[arg(long)]
        json: bool,
    },
    /// Build or update the workspace's code index (index/ in its state directory, see `baton
    /// doctor`): chunks, definitions and, with an embedder configured, vectors.
    Index(index_cmd::IndexArgs),
    /// Search the workspace's code: keyword (BM25), vector or both fused (updates the index
    /// first).
    Search(index_cmd::SearchArgs),
    /// Print the repo map: the most used definitions by file, to a token budget.
    Map(index_cmd::MapArgs),
    /// Every setting a run started now would use, and where each came from.
    Config {
        #[command(flatten)]
        model: ModelFlags,
    },
    /// Check the configured model with one tiny request and explain what is wrong.
    Doctor {
        #[command(flatten)]
        model: ModelFlags,
        /// Print the findings as JSON (see docs/json.md).
        #[arg(long)]
        json: bool,
    },
    /// Trust this workspace's .baton/config.toml and .baton/policy.toml as they are now: their
    /// keys that redirect the API key or weaken the sandbox are refused until then.
    Trust,
    /// Run one command in the sandbox under the execution policy, as the agent's would run.
    Sandbox(sandbox_cmd::SandboxArgs),
    /// Follow a run live: its journal so far, then new events until it stops (default: the
    /// latest run). Exits like the run: 0 finished, 1 failed, 3 paused.
    Attach {
        run: Option<String>,
        /// Only events from now on.
        #[arg(long)]
        from_now: bool,
        /// Print events as JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// Pause a running run cleanly (SIGTERM to its supervisor), wait until it has paused.
    Stop { run: Option<String> },
    /// Print a readable transcript of a run (default: the latest).
    Logs {
        run: Option<String>,
        /// Show whole tool outputs instead of shortened ones.
        #[arg(long)]
        full: bool,
        /// Print the raw journal as JSONL instead.
        #[arg(long)]
        json: bool,
    },
    /// Serve the JSON API, Prometheus metrics (/metrics) and the web dashboard for the store's
    /// runs (default http://127.0.0.1:7878/).
    Serve(serve_cmd::ServeArgs),
    /// List a run's workspace snapshots (default: the latest run).
    Snapshots {
        run: Option<String>,
        /// Print them as JSON (see docs/json.md).
        #[arg(long)]
        json: bool,
    },
    /// Show what a run changed: from its first snapshot (or --from) to the workspace now (or
    /// --to).
    Diff {
        run: Option<String>,
        /// Snapshot to start from: an id prefix or #N from `baton snapshots`.
        #[arg(long, value_name = "SNAPSHOT")]
        from: Option<String>,
        /// Snapshot to end at (default: the workspace as it is now).
        #[arg(long, value_name = "SNAPSHOT")]
        to: Option<String>,
        /// A line per changed file instead of the patch.
        #[arg(long)]
        stat: bool,
    },
    /// Restore the workspace to one of a run's snapshots (not while the run is running).
    Rollback {
        /// Run id (or a unique prefix of it).
        run: String,
        /// The snapshot: an id prefix or #N from `baton snapshots`.
        #[arg(long, value_name = "SNAPSHOT")]
        to: String,
    },
    /// Queue a run for `baton worker` processes (needs a PostgreSQL --store).
    Submit(SubmitArgs),
    /// Claim queued runs from a PostgreSQL --store and drive them until stopped.
    Worker(WorkerArgs),
    /// The configured MCP servers: list them with their tools, or call one tool.
    Mcp {
        #[command(subcommand)]
        command: mcp_cmd::McpCommand,
    },
    /// Serve baton's durable runs to other agents over MCP (stdio, or streamable HTTP with
    /// --port): tools start_run, run_status, run_events, run_diff, stop_run, resume_run.
    McpServer(mcp_server::McpServerArgs),
}

#[derive(Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    model: ModelFlags,
    /// Directory the run starts from: archived into --artifacts now, restored by the worker.
    #[arg(long, value_name = "DIR")]
    workspace_source: PathBuf,
    /// Where workspace snapshots live, reachable by all workers: a directory, file:///DIR or
    /// s3://BUCKET[/PREFIX] (endpoint and keys from the AWS_* environment).
    #[arg(long, value_name = "URL", env = "BATON_ARTIFACTS")]
    artifacts: String,
    /// What the agent should achieve.
    goal: String,
}

#[derive(Args)]
pub struct WorkerArgs {
    /// Runs driven at once by this process.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = crate::flag_values::whole::<usize>)]
    concurrency: usize,
    /// Where workspace snapshots live (as given to `submit`): a directory, file:///DIR or
    /// s3://BUCKET[/PREFIX].
    #[arg(long, value_name = "URL", env = "BATON_ARTIFACTS")]
    artifacts: String,
    /// This worker's own directory for run workspaces (one subdirectory per run).
    #[arg(long, value_name = "DIR", default_value = "baton-worker")]
    workdir: PathBuf,
    /// Seconds a lease lasts without renewal: how long a dead worker's runs wait.
    #[arg(long, value_name = "SECS", default_value_t = 60.0, value_parser = crate::flag_values::amount)]
    lease_ttl: f64,
    /// This worker's name, recorded as the holder of the runs it drives (`ls --all`, `status`);
    /// default HOSTNAME-PID.
    #[arg(long, value_name = "ID")]
    worker_id: Option<String>,
}

mod flag_layer;

/// The run-shaping flags: [`config::ConfigLayer`]'s clap twin (`flag_layer.rs`), made from the
/// keys' one declaration (`--max-turns` *is* `max_turns`), so a new setting's flag is its key's
/// declaration and nothing here; then the supervisor's data and the MCP flags, which make
/// layers of their own.
#[derive(Args, Clone, Default)]
pub struct ModelFlags {
    #[command(flatten)]
    keys: flag_layer::ConfigLayer,
    /// Set by a supervisor for its agent processes: its own flags as one configuration layer
    /// (JSON), under this process's flags — the settings passed as data, not re-spelled.
    #[arg(long, hide = true, value_name = "JSON")]
    settings_layer: Option<String>,
    #[command(flatten)]
    mcp: mcp_cmd::McpFlags,
}

/// How `run` / `resume` keep the agent process (see `supervise.rs`).
#[derive(Args, Clone, Default)]
pub struct SuperviseFlags {
    /// Run in the background (output to logs/RUN.log in the state directory); print the run id and return.
    #[arg(long)]
    detach: bool,
    /// Work in this process instead of a supervised child process that is restarted if it
    /// crashes (config: supervise = false).
    #[arg(long, conflicts_with = "detach")]
    no_supervise: bool,
    /// Restarts of a crashed agent process before giving up (default 5; config: max_restarts).
    #[arg(long, value_name = "N", value_parser = crate::flag_values::whole::<u32>)]
    max_restarts: Option<u32>,
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    model: ModelFlags,
    #[command(flatten)]
    sandbox: sandbox_cmd::SandboxFlags,
    #[command(flatten)]
    supervise: SuperviseFlags,
    #[command(flatten)]
    tasks: plan_cmd::TaskFlags,
    /// The id of the new run (a supervisor chooses it before its agent process creates it).
    #[arg(long, hide = true, value_name = "ID")]
    run_id: Option<String>,
    /// Take no workspace snapshots (config: [snapshots] enabled = false).
    #[arg(long)]
    no_snapshots: bool,
    /// Print the event stream as JSON lines on stdout.
    #[arg(long)]
    json: bool,
    /// When the run finishes, write the model's final summary to this file.
    #[arg(long, value_name = "FILE")]
    output_last_message: Option<PathBuf>,
    /// Read the goal from this file (for goals too long for an argument).
    #[arg(long, value_name = "FILE", conflicts_with = "goal")]
    goal_file: Option<PathBuf>,
    /// What the agent should achieve; `-` (or nothing, with stdin not a terminal) reads it
    /// from stdin.
    goal: Option<String>,
}

impl RunArgs {
    /// The goal, once `supervise::run` has resolved it.
    fn goal(&self) -> &str {
        self.goal.as_deref().unwrap_or_default()
    }
}

#[derive(Args)]
pub struct ResumeArgs {
    /// Run id (or a unique prefix of it).
    #[arg(conflicts_with = "last", required_unless_present = "last")]
    run: Option<String>,
    /// Resume the most recent run of this workspace.
    #[arg(long)]
    last: bool,
    #[command(flatten)]
    model: ModelFlags,
    #[command(flatten)]
    sandbox: sandbox_cmd::SandboxFlags,
    #[command(flatten)]
    supervise: SuperviseFlags,
    /// Replace the run's plan with this plan file before continuing (only before its first
    /// task started, e.g. after `run --plan-only`).
    #[arg(long, value_name = "FILE")]
    plan: Option<PathBuf>,
    /// Take no workspace snapshots (config: [snapshots] enabled = false).
    #[arg(long)]
    no_snapshots: bool,
    /// Print the event stream as JSON lines on stdout.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    // The sandbox trampoline: baton re-executed in a command's child process to confine it.
    // (Otherwise it also runs baton's own git in the sandbox from now on.)
    if let Some(code) = baton::sandbox_trampoline() {
        return code;
    }
    let mut cli = Cli::parse();
    // Commands that drive a run also log to a JSON file (see `logging.rs`).
    let file_log = match &mut cli.command {
        Command::Run(args) => {
            // The id is chosen here, before anything logs, so that the supervisor, its children
            // and the log file all agree on it from the first line.
            if args.run_id.is_none() {
                args.run_id = Some(baton_core::RunId::new().to_string());
            }
            logging::FileLog::Deferred
        }
        Command::Resume(_) | Command::Worker(_) => logging::FileLog::Deferred,
        _ => logging::FileLog::Off,
    };
    logging::init(cli.verbose, file_log, &baton::settings::secret_values(None));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    let workspace = cli.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
    let store = cli.store.as_deref();
    let verbose = cli.verbose;
    let result = runtime.block_on(async move {
        let globals = globals::Globals {
            workspace: &workspace,
            store,
            verbose,
        };
        match cli.command {
            Command::Run(args) => supervise::run(globals, args).await,
            Command::Resume(args) => supervise::resume(globals, args).await,
            Command::Attach {
                run,
                from_now,
                json,
            } => detach::attach(&workspace, store, run.as_deref(), from_now, json).await,
            Command::Stop { run } => detach::stop(&workspace, store, run.as_deref()).await,
            Command::Status { run, json } => {
                commands::status(&workspace, store, run.as_deref(), json).await
            }
            Command::Ls { all, json } => commands::ls(&workspace, store, all, json).await,
            Command::Plan { run, json } => {
                commands::plan(&workspace, store, run.as_deref(), json).await
            }
            Command::Cost { run, json } => {
                commands::cost(&workspace, store, run.as_deref(), json).await
            }
            Command::Doctor { model, json } => commands::doctor(&workspace, &model, json).await,
            Command::Config { model } => config_cmd::config(&workspace, &model),
            Command::Index(args) => index_cmd::index(&workspace, store, args).await,
            Command::Search(args) => index_cmd::search(&workspace, store, args).await,
            Command::Map(args) => index_cmd::map(&workspace, store, args).await,
            Command::Mcp { command } => mcp_cmd::mcp(&workspace, command).await,
            Command::McpServer(args) => mcp_server::serve(store, args).await,
            Command::Sandbox(args) => commands::sandbox(&workspace, args),
            Command::Trust => {
                println!("{}", trust::trust(&commands::workspace_dir(&workspace)?)?);
                Ok(exit::FINISHED)
            }
            Command::Logs { run, full, json } => {
                commands::logs(&workspace, store, run.as_deref(), full, json).await
            }
            Command::Serve(args) => serve_cmd::serve(&workspace, store, args).await,
            Command::Snapshots { run, json } => {
                snapshot_cmd::snapshots(&workspace, store, run.as_deref(), json).await
            }
            Command::Diff {
                run,
                from,
                to,
                stat,
            } => snapshot_cmd::diff(&workspace, store, run.as_deref(), from, to, stat).await,
            Command::Rollback { run, to } => {
                snapshot_cmd::rollback(&workspace, store, &run, &to).await
            }
            Command::Submit(args) => queue::submit(store, args).await,
            Command::Worker(args) => worker::worker(&workspace, store, args).await,
        }
    });
    // A tool stuck in a blocking task must not keep the process alive after the run ended.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    match result {
        Ok(code) => ExitCode::from(code),
        Err(CliError { code, error }) => {
            let _ = writeln!(std::io::stderr(), "error: {error:#}");
            ExitCode::from(code)
        }
    }
}
