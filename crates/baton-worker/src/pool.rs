//! The claim loop of a worker process: slots that claim queued runs from a shared store, each
//! run driven in the worker's own copy of its workspace restored from the artifact store, its
//! copy snapshotted back after every mutating tool call and at the end, and handed back to the
//! queue on a stop.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use baton::config::ConfigLayer;
use baton_core::{EventRecord, RunId, RunSettings, replay};
use baton_engine::{
    EngineError, Fanout, RunObserver, RunOutcome, SettingsOverride, Snapshots, StopSignal,
    WorkspacePersistence,
};
use baton_store::{Holder, Lease, Store, StoreError};

use crate::artifacts::Artifacts;

/// How often an idle worker slot asks the queue again.
const POLL: Duration = Duration::from_millis(200);

/// How long a run's end may wait for the trace receiver.
const TRACE_FLUSH: Duration = Duration::from_secs(3);

/// What happened to a claimed run, for the worker's own output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum News {
    /// Claimed from the queue; about to run here.
    Claimed,
    /// Cannot ever start (no snapshot, an unreadable journal): taken out of the queue.
    Unstartable(String),
    /// Cannot start now (the store or the artifact store did not answer): left queued.
    NotNow(String),
    /// This worker cannot build its engine (no API key here): left queued for another.
    Misconfigured(String),
    /// The snapshot after the run finished could not be saved.
    FinalSnapshotFailed(String),
    /// The run finished, with its summary.
    Finished(String),
    /// The run failed, with its error.
    Failed(String),
    /// This worker stopped: the run paused and went back to the queue.
    HandedBack,
    /// The run paused for a person (a limit, a question), with the detail.
    Paused(String),
    /// Another worker took the run over (this one's lease expired).
    Lost,
    /// The engine stopped with an error.
    Error(String),
    /// The run ended but could not be taken out of the queue.
    NotUnqueued(String),
    /// A configured MCP server started for the run, with its tools.
    McpReady(String),
    /// A configured MCP server did not start: the run goes on without its tools.
    McpFailed(String),
}

impl News {
    /// Whether this is a problem (the CLI prints problems on stderr, the rest on stdout).
    pub fn is_problem(&self) -> bool {
        !matches!(
            self,
            News::Claimed
                | News::Finished(_)
                | News::Failed(_)
                | News::HandedBack
                | News::Paused(_)
                | News::Lost
                | News::McpReady(_)
        )
    }

    /// The line that reports it, naming `run`.
    pub fn line(&self, run: &RunId) -> String {
        match self {
            News::Claimed => format!("run {run} claimed"),
            News::Unstartable(e) => {
                format!("run {run}: cannot be started here: {e}; removed from the queue")
            }
            News::NotNow(e) => format!("run {run}: cannot be started now: {e}; left in the queue"),
            News::Misconfigured(e) => format!("run {run}: {e}; left in the queue"),
            News::FinalSnapshotFailed(e) => format!("run {run}: final snapshot failed: {e}"),
            News::Finished(summary) => format!("run {run} finished: {summary}"),
            News::Failed(error) => format!("run {run} failed: {error}"),
            News::HandedBack => format!("run {run} handed back"),
            News::Paused(detail) => format!("run {run} paused: {detail}"),
            News::Lost => format!("run {run} lost: another worker took it over"),
            News::Error(e) => format!("run {run}: {e}"),
            News::NotUnqueued(e) => format!("run {run}: could not take it out of the queue: {e}"),
            News::McpReady(line) | News::McpFailed(line) => format!("run {run}: {line}"),
        }
    }
}

/// What the program running a worker hears from it.
pub trait Hooks: Send + Sync {
    /// Something happened to `run`.
    fn report(&self, run: &RunId, news: News);
    /// The secret values a run's engine scrubs (to redact the program's own logs too).
    fn secrets(&self, _secrets: &[String]) {}
}

/// A worker: the store it claims from, where workspaces live, and how it reports.
pub struct Worker {
    /// The shared store (PostgreSQL) holding the queue.
    pub store: Arc<dyn Store>,
    /// Where workspace snapshots are kept.
    pub artifacts: Artifacts,
    /// The directory of this worker's workspace copies (`WORKDIR/RUN`).
    pub workdir: PathBuf,
    /// This machine's configuration: timeouts, retry budget, prices, sandbox (the model of
    /// each run comes from its journal).
    pub layer: ConfigLayer,
    /// Who holds the leases (with the worker id).
    pub holder: Holder,
    /// Stops claiming and hands the runs in hand back.
    pub stop: StopSignal,
    /// The trace exporter, when the environment asks for one.
    pub telemetry: Option<baton_telemetry::Telemetry>,
    /// Where news goes.
    pub hooks: Arc<dyn Hooks>,
    /// The store's PostgreSQL URL: where `[embeddings] cache = "postgres"` shares vectors.
    pub store_url: Option<String>,
}

impl Worker {
    /// Runs `concurrency` slots until the stop signal, each claiming and driving runs.
    pub async fn serve(self, concurrency: usize) {
        let shared = Arc::new(self);
        let slots: Vec<_> = (0..concurrency.max(1))
            .map(|_| tokio::spawn(slot(shared.clone())))
            .collect();
        for slot in slots {
            let _ = slot.await;
        }
    }
}

type Shared = Worker;

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
            shared.hooks.report(&run_id, News::Unstartable(e));
            let _ = shared.store.set_queued(&run_id, false).await;
            let _ = shared.store.release(&lease).await;
            return;
        }
        Err(Unprepared::Later(e)) => {
            // The store or the artifact store did not answer (a network blip, a bucket being
            // restarted): the run stays queued for the next claim, here or elsewhere.
            shared.hooks.report(&run_id, News::NotNow(e));
            let _ = shared.store.release(&lease).await;
            tokio::time::sleep(POLL * 5).await;
            return;
        }
    };
    shared.hooks.report(&run_id, News::Claimed);
    let observer: Arc<dyn RunObserver> = match &shared.telemetry {
        Some(telemetry) => Arc::new(telemetry.observer(&run_id, &events)),
        None => Arc::new(Fanout(Vec::new())),
    };
    let runtime = match build_runtime(shared, &run_id, &dir, &settings, observer).await {
        Ok(built) => built,
        Err(e) => {
            // A configuration problem of this worker (no API key here): another worker may be
            // configured right, so the run stays queued.
            shared
                .hooks
                .report(&run_id, News::Misconfigured(e.to_string()));
            let _ = shared.store.release(&lease).await;
            tokio::time::sleep(POLL * 5).await;
            return;
        }
    };
    let outcome = runtime
        .engine()
        .resume_claimed(lease, &dir, &SettingsOverride::default())
        .await;
    runtime.shutdown().await;
    if let Some(telemetry) = &shared.telemetry {
        telemetry.flush(TRACE_FLUSH).await;
    }
    let Some(keep_queued) = settle(shared, &run_id, &dir, &outcome).await else {
        return;
    };
    if !keep_queued && let Err(e) = shared.store.set_queued(&run_id, false).await {
        shared
            .hooks
            .report(&run_id, News::NotUnqueued(e.to_string()));
    }
}

/// The runtime for a claimed run in its workspace copy `dir`, built the one way every engine
/// is ([`baton::RuntimeBuilder`]): its commands confined to the copy, the MCP servers this
/// worker's configuration names started for it (they end with the runtime), its own code index
/// (with a shared cache, chunks another worker embedded are not embedded again), the copy saved
/// to the artifact store as it changes. No shadow-git snapshots: the artifact store keeps them.
async fn build_runtime(
    shared: &Shared,
    run_id: &RunId,
    dir: &Path,
    settings: &RunSettings,
    observer: Arc<dyn RunObserver>,
) -> Result<baton::Runtime, baton::Error> {
    let hooks = shared.hooks.clone();
    let on_secrets: baton::SecretsHook = Arc::new(move |secrets: &[String]| hooks.secrets(secrets));
    let runtime = baton::Runtime::builder()
        .workspace(dir)
        .resolved(settings.clone(), shared.layer.clone())
        .postgres_store(shared.store.clone(), shared.store_url.clone())
        .observer(observer)
        .stop_signal(shared.stop.clone())
        .snapshots(Snapshots::Off)
        .persistence(Arc::new(Archive(shared.artifacts.clone())))
        .on_secrets(on_secrets)
        .build()
        .await?;
    for (ready, line) in runtime
        .mcp()
        .map(baton::mcp::describe_each)
        .unwrap_or_default()
    {
        let news = if ready {
            News::McpReady(line)
        } else {
            News::McpFailed(line)
        };
        shared.hooks.report(run_id, news);
    }
    Ok(runtime)
}

/// Reports how the run ended and saves the workspace of a finished one; whether the run stays
/// queued (`None`: the lease was lost, another worker has it).
async fn settle(
    shared: &Shared,
    run_id: &RunId,
    dir: &Path,
    outcome: &Result<RunOutcome, EngineError>,
) -> Option<bool> {
    Some(match outcome {
        Ok(RunOutcome::Finished { summary, .. }) => {
            // The journal's end as the snapshot's position: newer than any taken while running.
            let seq = shared
                .store
                .get_run(run_id)
                .await
                .ok()
                .flatten()
                .map_or(u64::MAX / 2, |r| r.event_count);
            if let Err(e) = shared.artifacts.save(run_id, seq, dir).await {
                shared
                    .hooks
                    .report(run_id, News::FinalSnapshotFailed(e.to_string()));
            }
            shared.hooks.report(run_id, News::Finished(summary.clone()));
            false
        }
        Ok(RunOutcome::Failed { error, .. }) => {
            shared.hooks.report(run_id, News::Failed(error.clone()));
            false
        }
        Ok(RunOutcome::Paused { .. }) if shared.stop.is_stopped() => {
            shared.hooks.report(run_id, News::HandedBack);
            true
        }
        Ok(RunOutcome::Paused { detail, .. }) => {
            shared.hooks.report(run_id, News::Paused(detail.clone()));
            false
        }
        Err(EngineError::Store(StoreError::LeaseLost { .. })) => {
            shared.hooks.report(run_id, News::Lost);
            return None;
        }
        Err(e) => {
            let retry = e.is_retryable();
            shared.hooks.report(run_id, News::Error(e.to_string()));
            retry
        }
    })
}

/// Why a claimed run could not be set up: for good, or for now.
enum Unprepared {
    Never(String),
    Later(String),
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
            Unprepared::Later(e.to_string())
        } else {
            Unprepared::Never(e.to_string())
        }
    })?;
    let state = replay(&events).map_err(|e| Unprepared::Never(e.to_string()))?;
    let settings = state
        .settings
        .ok_or_else(|| Unprepared::Never("its journal has no start".into()))?;
    // Listing and downloading fail for reasons that pass (the artifact store is unreachable);
    // a missing snapshot does not.
    let snapshot = shared
        .artifacts
        .latest(run_id)
        .await
        .map_err(|e| Unprepared::Later(e.to_string()))?
        .ok_or_else(|| {
            Unprepared::Never("no workspace snapshot of it in the artifact store".into())
        })?;
    shared
        .artifacts
        .restore(&snapshot, dir)
        .await
        .map_err(|e| Unprepared::Later(e.to_string()))?;
    Ok((settings, events))
}

/// The worker's workspace persistence: a tar archive in the artifact store after every
/// finished mutating tool call — what a worker taking the run over restores. The engine waits
/// for it before its next step.
struct Archive(Artifacts);

#[async_trait::async_trait]
impl WorkspacePersistence for Archive {
    async fn persist(&self, run_id: &RunId, seq: u64, workspace: &Path) -> Result<(), String> {
        self.0
            .save(run_id, seq, workspace)
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// `--worker-id`, or `HOSTNAME-PID`: unique among processes sharing a store as long as the
/// hostnames are (which dead-holder detection needs anyway).
pub fn worker_id(given: Option<&str>) -> String {
    match given.map(str::trim) {
        Some(id) if !id.is_empty() => id.to_owned(),
        _ => {
            let me = Holder::this_process();
            format!("{}-{}", me.host, me.pid)
        }
    }
}

/// How `ls --all` / `status` describe a run's lease: who holds it, how old the lease is (since
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_worker_id_is_host_and_pid() {
        let me = Holder::this_process();
        assert_eq!(worker_id(None), format!("{}-{}", me.host, me.pid));
        assert_eq!(worker_id(Some("  ")), format!("{}-{}", me.host, me.pid));
        assert_eq!(worker_id(Some("gpu-box-3")), "gpu-box-3");
    }

    #[test]
    fn problems_go_apart_from_progress() {
        let run = RunId::new();
        assert!(!News::Claimed.is_problem());
        assert!(News::NotNow("bucket down".into()).is_problem());
        assert_eq!(
            News::NotNow("bucket down".into()).line(&run),
            format!("run {run}: cannot be started now: bucket down; left in the queue")
        );
    }
}
