//! `baton worker`: the command-line side of the worker runtime (`baton-worker`): the store and
//! artifact store from the flags, the per-process log file, the signals, the terminal output.
//! See README "Scale-out".

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use baton_core::RunId;
use baton_engine::StopSignal;
use baton_store::{Holder, PostgresOptions, PostgresStore, Store, StoreError, StoreLocation};
use baton_worker::{Artifacts, Hooks, News, Worker, worker_id};

use crate::commands::file_and_env_layers;
use crate::store_error;
use crate::{CliError, WorkerArgs, exit};

pub async fn worker(
    workspace: &Path,
    store: Option<&str>,
    args: WorkerArgs,
) -> Result<u8, CliError> {
    let location = StoreLocation::choose(store, workspace).map_err(store_error)?;
    let StoreLocation::Postgres(url) = &location else {
        return Err(store_error(StoreError::NeedsPostgres {
            what: "`baton worker`".into(),
            store: location.describe(),
        }));
    };
    let concurrency = args.concurrency.max(1);
    let options = PostgresOptions {
        lease_ttl: Duration::from_secs_f64(args.lease_ttl.max(0.5)),
        // Per slot: appends, the heartbeat and a claim may overlap.
        max_connections: u32::try_from(concurrency * 2 + 2).unwrap_or(u32::MAX),
        ..PostgresOptions::default()
    };
    let store: Arc<dyn Store> = Arc::new(
        PostgresStore::connect_with(url, options)
            .await
            .map_err(store_error)?,
    );
    let artifacts = Artifacts::open(&args.artifacts).map_err(CliError::usage)?;
    std::fs::create_dir_all(&args.workdir)
        .map_err(|e| CliError::usage(anyhow!("--workdir {}: {e}", args.workdir.display())))?;
    // One JSON log per worker process (it serves many runs; each line inside a run carries
    // the run's id in its span).
    crate::logging::attach_file(
        &args
            .workdir
            .join("logs")
            .join(format!("worker-{}.trace.jsonl", std::process::id())),
    );
    let (handle, stop) = StopSignal::new();
    // Stop claiming, pause the runs in hand and give their leases back (they stay queued, so
    // another worker takes them at once).
    baton_app::signals::on_signals(
        handle,
        "stopping: handing the runs in progress back to the queue",
    );
    let worker = Worker {
        store: store.clone(),
        artifacts,
        workdir: args.workdir.clone(),
        // Timeouts, retry budget and prices come from this machine's config and environment;
        // the model of each run from its journal.
        layer: file_and_env_layers(workspace)?,
        holder: Holder::this_process().with_worker_id(worker_id(args.worker_id.as_deref())),
        stop,
        telemetry: baton_telemetry::Telemetry::from_env(),
        hooks: Arc::new(Printed),
        store_url: match &location {
            baton_store::StoreLocation::Postgres(url) => Some(url.clone()),
            baton_store::StoreLocation::Sqlite(_) => None,
        },
    };
    eprintln!(
        "worker {} serving {} with {concurrency} slot(s)",
        worker.holder.describe(),
        location.describe()
    );
    worker.serve(concurrency).await;
    store.close().await;
    Ok(exit::FINISHED)
}

/// The worker's news on the terminal: progress on stdout, problems on stderr; each run's secrets
/// also redact the logs.
struct Printed;

impl Hooks for Printed {
    fn report(&self, run: &RunId, news: News) {
        // A line may quote what a program printed (an MCP server's stderr): scrubbed like logs.
        let line = crate::logging::redacted(&news.line(run));
        if news.is_problem() {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    }

    fn secrets(&self, secrets: &[String]) {
        crate::logging::redact_also(secrets);
    }
}
