//! `baton worker`: claims queued runs from a shared PostgreSQL store and drives them, each in
//! the worker's own copy of the run's workspace restored from the artifact store; snapshots the
//! copy back after every mutating tool call and at the end. See README "Scale-out".

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::anyhow;
use baton_core::{Event, EventRecord, RunId, RunState, RunStatus, ToolEffect, replay};
use baton_engine::{
    EngineError, RunObserver, RunOutcome, SettingsOverride, StopHandle, StopSignal,
};
use baton_store::{
    Holder, Lease, PostgresOptions, PostgresStore, Store, StoreError, StoreLocation,
};

use crate::artifacts::Artifacts;
use crate::commands::{build_engine_with, file_and_env_layers};
use crate::config::ConfigLayer;
use crate::store::store_error;
use crate::{CliError, WorkerArgs, exit};

/// How often an idle worker slot asks the queue again.
const POLL: Duration = Duration::from_millis(200);

/// What every slot of one worker process shares.
struct Shared {
    store: Arc<dyn Store>,
    artifacts: Artifacts,
    workdir: PathBuf,
    layer: ConfigLayer,
    holder: Holder,
    stop: StopSignal,
    /// The trace exporter, when the environment asks for one.
    telemetry: Option<baton_telemetry::Telemetry>,
}

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
    stop_on_signals(handle);
    let shared = Arc::new(Shared {
        store: store.clone(),
        artifacts,
        workdir: args.workdir.clone(),
        // Timeouts, retry budget and prices come from this machine's config and environment;
        // the model of each run from its journal.
        layer: file_and_env_layers(workspace)?,
        holder: Holder::this_process().with_worker_id(worker_id(args.worker_id.as_deref())),
        stop,
        telemetry: baton_telemetry::Telemetry::from_env(),
    });
    eprintln!(
        "worker {} serving {} with {concurrency} slot(s)",
        shared.holder.describe(),
        location.describe()
    );
    let slots: Vec<_> = (0..concurrency)
        .map(|_| tokio::spawn(slot(shared.clone())))
        .collect();
    for slot in slots {
        let _ = slot.await;
    }
    store.close().await;
    Ok(exit::FINISHED)
}

/// First SIGINT/SIGTERM: stop claiming, pause the runs in hand and give their leases back
/// (they stay queued, so another worker takes them at once). Second: quit at once.
fn stop_on_signals(handle: StopHandle) {
    tokio::spawn(async move {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            return;
        };
        for round in 0.. {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            if round == 0 {
                eprintln!("stopping: handing the runs in progress back to the queue");
                handle.stop();
            } else {
                std::process::exit(130);
            }
        }
    });
}

async fn slot(shared: Arc<Shared>) {
    while !shared.stop.is_stopped() {
        match shared.store.claim(&shared.holder).await {
            Ok(Some(lease)) => {
                let span = tracing::info_span!("run", run_id = %lease.run_id);
                tracing::Instrument::instrument(drive(&shared, lease), span).await
            }
            Ok(None) => tokio::time::sleep(POLL).await,
            Err(e) => {
                tracing::warn!("claiming a run failed (will retry): {e}");
                tokio::time::sleep(POLL).await;
            }
        }
    }
}

/// Drives one claimed run to its end here (or until this worker stops).
async fn drive(shared: &Shared, lease: Lease) {
    let run_id = lease.run_id.clone();
    let dir = shared.workdir.join(run_id.as_str());
    let (settings, events) = match prepare(shared, &run_id, &dir).await {
        Ok(prepared) => prepared,
        Err(Unprepared::Never(e)) => {
            // Nothing a retry would fix (no snapshot, an unreadable journal): take the run out
            // of the queue so that workers do not spin on it, and say why.
            eprintln!("run {run_id}: cannot be started here: {e:#}; removed from the queue");
            let _ = shared.store.set_queued(&run_id, false).await;
            let _ = shared.store.release(&lease).await;
            return;
        }
        Err(Unprepared::Later(e)) => {
            // The store or the artifact store did not answer (a network blip, a bucket being
            // restarted): the run stays queued for the next claim, here or elsewhere.
            eprintln!("run {run_id}: cannot be started now: {e:#}; left in the queue");
            let _ = shared.store.release(&lease).await;
            tokio::time::sleep(POLL * 5).await;
            return;
        }
    };
    println!("run {run_id} claimed");
    let snapshots: Arc<dyn RunObserver> =
        Arc::new(Snapshots::new(shared.artifacts.clone(), dir.clone()));
    let observer: Arc<dyn RunObserver> = match &shared.telemetry {
        Some(telemetry) => Arc::new(crate::output::Fanout(vec![
            snapshots,
            Arc::new(telemetry.observer(&run_id, &events)),
        ])),
        None => snapshots,
    };
    // Every command of the run is confined to this worker's copy of its workspace.
    let engine = match crate::sandbox_cmd::exec_env(&dir, &shared.layer, &Default::default())
        .and_then(|exec| {
            build_engine_with(
                &settings,
                &shared.layer,
                shared.store.clone(),
                exec,
                observer,
                shared.stop.clone(),
            )
        }) {
        Ok(engine) => engine,
        Err(e) => {
            // A configuration problem of this worker (no API key here): another worker may be
            // configured right, so the run stays queued.
            eprintln!("run {run_id}: {:#}; left in the queue", e.error);
            let _ = shared.store.release(&lease).await;
            tokio::time::sleep(POLL * 5).await;
            return;
        }
    };
    let outcome = engine
        .resume_claimed(lease, &dir, &SettingsOverride::default())
        .await;
    if let Some(telemetry) = &shared.telemetry {
        telemetry.flush(crate::commands::TRACE_FLUSH).await;
    }
    let keep_queued = match &outcome {
        Ok(RunOutcome::Finished { summary, .. }) => {
            // The journal's end as the snapshot's position: newer than any taken while running.
            let seq = shared
                .store
                .get_run(&run_id)
                .await
                .ok()
                .flatten()
                .map_or(u64::MAX / 2, |r| r.event_count);
            if let Err(e) = shared.artifacts.save(&run_id, seq, &dir).await {
                eprintln!("run {run_id}: final snapshot failed: {e:#}");
            }
            println!("run {run_id} finished: {summary}");
            false
        }
        Ok(RunOutcome::Failed { error, .. }) => {
            println!("run {run_id} failed: {error}");
            false
        }
        Ok(RunOutcome::Paused { .. }) if shared.stop.is_stopped() => {
            println!("run {run_id} handed back");
            true
        }
        Ok(RunOutcome::Paused { detail, .. }) => {
            println!("run {run_id} paused: {detail}");
            false
        }
        Err(EngineError::Store(StoreError::LeaseLost { .. })) => {
            println!("run {run_id} lost: another worker took it over");
            return;
        }
        Err(e) => {
            eprintln!("run {run_id}: {e}");
            e.is_retryable()
        }
    };
    if !keep_queued && let Err(e) = shared.store.set_queued(&run_id, false).await {
        eprintln!("run {run_id}: could not take it out of the queue: {e}");
    }
}

/// Why a claimed run could not be set up: for good, or for now.
enum Unprepared {
    Never(anyhow::Error),
    Later(anyhow::Error),
}

/// Materialises the run's workspace in `dir` from its latest snapshot and returns the settings
/// it was submitted with and its journal so far.
async fn prepare(
    shared: &Shared,
    run_id: &RunId,
    dir: &Path,
) -> Result<(baton_core::RunSettings, Vec<EventRecord>), Unprepared> {
    let events = shared.store.load_events(run_id).await.map_err(|e| {
        if e.is_retryable() {
            Unprepared::Later(e.into())
        } else {
            Unprepared::Never(e.into())
        }
    })?;
    let state = replay(&events).map_err(|e| Unprepared::Never(e.into()))?;
    let settings = state
        .settings
        .ok_or_else(|| Unprepared::Never(anyhow!("its journal has no start")))?;
    // Listing and downloading fail for reasons that pass (the artifact store is unreachable);
    // a missing snapshot does not.
    let snapshot = shared
        .artifacts
        .latest(run_id)
        .await
        .map_err(Unprepared::Later)?
        .ok_or_else(|| {
            Unprepared::Never(anyhow!("no workspace snapshot of it in the artifact store"))
        })?;
    shared
        .artifacts
        .restore(&snapshot, dir)
        .await
        .map_err(Unprepared::Later)?;
    Ok((settings, events))
}

/// Saves a snapshot after every finished mutating tool call: what a worker taking the run over
/// restores. Runs inside the journal's `record`, so the next step waits for it.
struct Snapshots {
    artifacts: Artifacts,
    dir: PathBuf,
    /// The effect of the tool call in flight.
    effect: Mutex<Option<ToolEffect>>,
}

impl Snapshots {
    fn new(artifacts: Artifacts, dir: PathBuf) -> Snapshots {
        Snapshots {
            artifacts,
            dir,
            effect: Mutex::new(None),
        }
    }
}

impl RunObserver for Snapshots {
    fn on_event(&self, record: &EventRecord, _state: &RunState) {
        let Ok(mut effect) = self.effect.lock() else {
            return;
        };
        match &record.event {
            Event::ToolCallStarted { effect: e, .. } => *effect = Some(*e),
            // The observer is synchronous and the next step must wait for the upload: block
            // this worker thread (the runtime is multi-threaded) until it is done.
            Event::ToolCallFinished { .. } if effect.take() == Some(ToolEffect::Mutating) => {
                let saved = tokio::task::block_in_place(|| {
                    tokio::runtime::Handle::current().block_on(self.artifacts.save(
                        &record.run_id,
                        record.seq,
                        &self.dir,
                    ))
                });
                if let Err(e) = saved {
                    tracing::warn!("run {}: snapshot failed: {e:#}", record.run_id);
                }
            }
            _ => {}
        }
    }
}

/// `--worker-id`, or `HOSTNAME-PID`: unique among processes sharing a store as long as the
/// hostnames are (which dead-holder detection needs anyway).
fn worker_id(given: Option<&str>) -> String {
    match given.map(str::trim) {
        Some(id) if !id.is_empty() => id.to_owned(),
        _ => {
            let me = Holder::this_process();
            format!("{}-{}", me.host, me.pid)
        }
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

    #[test]
    fn the_default_worker_id_is_host_and_pid() {
        let me = Holder::this_process();
        assert_eq!(worker_id(None), format!("{}-{}", me.host, me.pid));
        assert_eq!(worker_id(Some("  ")), format!("{}-{}", me.host, me.pid));
        assert_eq!(worker_id(Some("gpu-box-3")), "gpu-box-3");
    }
}
