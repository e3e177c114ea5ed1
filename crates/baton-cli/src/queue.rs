//! `baton submit`: journal a run's start and queue it for workers.

use std::io::Write;
use std::sync::Arc;

use anyhow::anyhow;
use baton::{CodeIndexing, Snapshots};
use baton_store::{StoreError, StoreLocation, open_store};

use crate::commands::{resolve_settings, workspace_dir};
use crate::store_error;
use crate::{CliError, SubmitArgs, exit};
use baton_worker::Artifacts;

/// Journals the run's start (settings, AGENTS.md and tool specs from the source directory, as
/// `baton run` would), stores the source directory as the run's first workspace snapshot, and
/// only then queues it: a worker never sees a queued run without a workspace.
pub async fn submit(store: Option<&str>, args: SubmitArgs) -> Result<u8, CliError> {
    let source = workspace_dir(&args.workspace_source)?;
    if args.goal.trim().is_empty() {
        return Err(CliError::usage(anyhow!(
            "the goal is empty: say what the agent should do"
        )));
    }
    let location = StoreLocation::choose(store, &source).map_err(store_error)?;
    if !location.is_shared() {
        return Err(store_error(StoreError::NeedsPostgres {
            what: "`baton submit`".into(),
            store: location.describe(),
        }));
    }
    let (settings, layer) = resolve_settings(&source, &args.model)?;
    let artifacts = Artifacts::open(&args.artifacts).map_err(CliError::usage)?;
    let store = open_store(&location).await.map_err(store_error)?;
    let store_url = match &location {
        StoreLocation::Postgres(url) => Some(url.clone()),
        StoreLocation::Sqlite(_) => None,
    };
    // Submitting runs no command, but the engine is built the one way every engine is. The
    // configured MCP servers are started once here, so that their tools are journaled with the
    // run's start; the worker that claims the run starts its own to call them. The code tools'
    // specs are journaled with the run too; the claiming worker indexes its copy.
    let runtime = baton::Runtime::builder()
        .workspace(&source)
        .resolved(settings, layer)
        .postgres_store(store.clone(), store_url)
        .snapshots(Snapshots::Off)
        .code_index(CodeIndexing::ToolsOnly)
        .on_secrets(Arc::new(|secrets: &[String]| {
            crate::logging::redact_also(secrets)
        }))
        .build()
        .await?;
    // The engine's secrets (the servers' among them) are the log redactor's now.
    for line in runtime.notices() {
        eprintln!("baton: {}", crate::logging::redacted(line));
    }
    runtime.shutdown().await;
    let run_id = runtime
        .submit(args.goal)
        .await
        .map_err(|e| anyhow!("{e}"))?;
    artifacts.save(&run_id, 0, &source).await?;
    store.set_queued(&run_id, true).await.map_err(store_error)?;
    store.close().await;
    // The id alone on stdout, for scripts; the explanation on stderr.
    let _ = writeln!(std::io::stdout(), "{run_id}");
    eprintln!("run {run_id} queued; `baton worker` processes pick it up");
    Ok(exit::FINISHED)
}
