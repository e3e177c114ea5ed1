//! `baton worker`: the command-line side of the worker runtime (`baton-worker`): the store and
//! artifact store from the flags, the per-process log file, the signals, the terminal output.
//! See README "Scale-out".

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use baton_core::{RunId, RunStatus};
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
    crate::commands::on_signals(
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

/// How `ls --all` / `status` describe a run's lease: who holds it, how old the lease is (since
/// it was taken or last renewed) and when it expires.
pub fn lease_text(summary: &baton_store::RunSummary) -> String {
    lease_text_at(summary, jiff::Timestamp::now())
}

/// [`lease_text`] as seen at `now`.
fn lease_text_at(summary: &baton_store::RunSummary, now: jiff::Timestamp) -> String {
    match &summary.holder {
        None if summary.status == RunStatus::Finished || summary.status == RunStatus::Failed => {
            "-".into()
        }
        None => "free".into(),
        Some(h) => {
            let age = h
                .renewed_at
                .map(|at| {
                    format!(
                        "age {:.1}s, ",
                        now.duration_since(at).as_secs_f64().max(0.0)
                    )
                })
                .unwrap_or_default();
            let left = h.expires_at.duration_since(now).as_secs_f64();
            if left >= 0.0 {
                format!("{} ({age}expires in {left:.1}s)", h.holder.describe())
            } else {
                format!("{} ({age}expired {:.1}s ago)", h.holder.describe(), -left)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use baton_store::{HolderInfo, RunSummary};

    fn summary(status: RunStatus, holder: Option<HolderInfo>) -> RunSummary {
        let at: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        RunSummary {
            id: RunId::new(),
            goal: "g".into(),
            workspace: "/w".into(),
            status,
            created_at: at,
            updated_at: at,
            event_count: 3,
            holder,
            queued: false,
        }
    }

    #[test]
    fn lease_text_names_the_worker_and_the_lease_age_and_expiry() {
        let now: jiff::Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let holder = Holder {
            host: "box".into(),
            pid: 7,
            pid_start: None,
            worker_id: Some("w-1".into()),
        };
        let info = HolderInfo {
            holder,
            expires_at: "2026-01-01T00:01:40Z".parse().unwrap(),
            alive: true,
            renewed_at: Some("2026-01-01T00:00:40Z".parse().unwrap()),
        };
        let text = lease_text_at(&summary(RunStatus::Running, Some(info.clone())), now);
        assert_eq!(text, "w-1 (pid 7 on box) (age 20.0s, expires in 40.0s)");
        let expired = HolderInfo {
            expires_at: "2026-01-01T00:00:55Z".parse().unwrap(),
            renewed_at: None,
            ..info
        };
        let text = lease_text_at(&summary(RunStatus::Running, Some(expired)), now);
        assert_eq!(text, "w-1 (pid 7 on box) (expired 5.0s ago)");
        assert_eq!(
            lease_text_at(&summary(RunStatus::Paused, None), now),
            "free"
        );
        assert_eq!(lease_text_at(&summary(RunStatus::Finished, None), now), "-");
    }
}
