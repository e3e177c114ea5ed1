#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `baton submit` + `baton worker` against the real PostgreSQL test server (a schema per test)
//! and a scripted model: many runs on two workers, a worker killed with SIGKILL mid-run (taken
//! over after its lease expires), and a worker stopped with SIGTERM (hands its run back).

mod support;

use std::collections::HashSet;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use baton_core::{Event, EventRecord, RunId, RunStatus};
use baton_store::Store;
use baton_store::testing::PgTestSchema;
use serde_json::json;
use support::*;

/// Everything one test's workers and submitters share.
struct Cluster {
    schema: PgTestSchema,
    url: String,
    server: ScriptedServer,
    home: tempfile::TempDir,
    source: tempfile::TempDir,
    artifacts: tempfile::TempDir,
}

impl Cluster {
    async fn new(script: Vec<Turn>) -> Cluster {
        let schema = PgTestSchema::create().await;
        let url = schema.url();
        let source = tempfile::tempdir().unwrap();
        std::fs::write(source.path().join("README.md"), "the project\n").unwrap();
        Cluster {
            schema,
            url,
            server: ScriptedServer::start(script).await,
            home: tempfile::tempdir().unwrap(),
            source,
            artifacts: tempfile::tempdir().unwrap(),
        }
    }

    /// `baton submit GOAL` (off the runtime: the scripted server lives on it); returns the id.
    async fn submit(&self, goal: &str) -> RunId {
        let mut cmd = baton(self.source.path(), self.home.path());
        cmd.args(["--store", &self.url, "submit", "--base-url"])
            .arg(self.server.base_url())
            .args(["--model", "m", "--workspace-source"])
            .arg(self.source.path())
            .arg("--artifacts")
            .arg(self.artifacts.path())
            .arg(goal);
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .unwrap()
            .unwrap();
        assert_finished(&out);
        RunId::from_string(String::from_utf8(out.stdout).unwrap().trim())
    }

    fn worker(&self, workdir: &Path, lease_ttl: &str, concurrency: usize) -> Child {
        self.worker_with_stdout(workdir, lease_ttl, concurrency, Stdio::null())
    }

    fn worker_with_stdout(
        &self,
        workdir: &Path,
        lease_ttl: &str,
        concurrency: usize,
        stdout: Stdio,
    ) -> Child {
        let mut cmd = baton(self.source.path(), self.home.path());
        cmd.args(["--store", &self.url, "worker", "--lease-ttl", lease_ttl])
            .arg("--concurrency")
            .arg(concurrency.to_string())
            .arg("--artifacts")
            .arg(self.artifacts.path())
            .arg("--workdir")
            .arg(workdir)
            .stdout(stdout)
            .stderr(Stdio::inherit());
        cmd.spawn().unwrap()
    }

    async fn events(&self, store: &dyn Store, run: &RunId) -> Vec<EventRecord> {
        store.load_events(run).await.unwrap()
    }
}

/// Polls `check` every 50 ms until it returns true; panics after `limit`.
async fn wait_for(limit: Duration, what: &str, mut check: impl AsyncFnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !check().await {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    start.elapsed()
}

fn count(events: &[EventRecord], kind: &str) -> usize {
    events.iter().filter(|r| r.event.kind() == kind).count()
}

fn signal(child: &Child, name: &str) {
    let status = std::process::Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Sends SIGTERM and waits for the exit status.
async fn terminate(mut child: Child) -> std::process::ExitStatus {
    signal(&child, "TERM");
    tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap()
}

/// The journal invariants every run must keep: seq 0..n without gaps or repeats, one start,
/// each tool call finished at most once.
fn assert_journal_sound(run: &RunId, events: &[EventRecord]) {
    for (i, record) in events.iter().enumerate() {
        assert_eq!(record.seq, i as u64, "run {run}: seq gap or repeat");
    }
    assert_eq!(count(events, "run_started"), 1, "run {run}");
    let mut finished = HashSet::new();
    for record in events {
        if let Event::ToolCallFinished { call_id, .. } = &record.event {
            assert!(
                finished.insert(call_id.clone()),
                "run {run}: {call_id} twice"
            );
        }
    }
}

fn write_turn(path: &str, content: &str) -> Turn {
    turn(&[("write_file", json!({"path": path, "content": content}))])
}

fn finish_turn() -> Turn {
    turn(&[("finish", json!({"summary": "done"}))])
}

fn shell_turn(command: &str) -> Turn {
    turn(&[("shell", json!({"command": command, "timeout_secs": 60}))])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_runs_on_two_workers_each_finish_exactly_once() {
    let cluster = Cluster::new(vec![write_turn("out.txt", "done\n"), finish_turn()]).await;
    let mut runs = Vec::new();
    for i in 0..20 {
        runs.push(cluster.submit(&format!("task {i}")).await);
    }
    let store = cluster.schema.store().await;
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let workers: Vec<Child> = dirs
        .iter()
        .map(|d| cluster.worker(d.path(), "5", 2))
        .collect();

    wait_for(Duration::from_secs(180), "all runs finished", async || {
        let all = store.list_runs().await.unwrap();
        all.iter()
            .filter(|r| r.status == RunStatus::Finished)
            .count()
            == runs.len()
    })
    .await;
    for worker in workers {
        assert_eq!(terminate(worker).await.code(), Some(0));
    }

    let mut per_worker = [0usize; 2];
    for run in &runs {
        let events = cluster.events(&store, run).await;
        assert_journal_sound(run, &events);
        assert_eq!(count(&events, "run_finished"), 1, "run {run}");
        // Claimed and driven exactly once: one resume, by one worker.
        assert_eq!(count(&events, "run_resumed"), 1, "run {run}");
        let summary = store.get_run(run).await.unwrap().unwrap();
        assert_eq!(summary.status, RunStatus::Finished);
        assert!(summary.holder.is_none(), "run {run} still leased");
        let homes: Vec<usize> = (0..2)
            .filter(|&w| dirs[w].path().join(run.as_str()).exists())
            .collect();
        assert_eq!(homes.len(), 1, "run {run} in workdirs {homes:?}");
        per_worker[homes[0]] += 1;
        let ws = dirs[homes[0]].path().join(run.as_str());
        assert_eq!(
            snapshot_files(&ws),
            vec![
                ("README.md".to_string(), b"the project\n".to_vec()),
                ("out.txt".to_string(), b"done\n".to_vec()),
            ]
        );
    }
    assert_eq!(per_worker.iter().sum::<usize>(), 20);
    // The store lists every run, with no holder left.
    let ls = baton(cluster.source.path(), cluster.home.path())
        .args(["--store", &cluster.url, "ls", "--all"])
        .output()
        .unwrap();
    assert_finished(&ls);
    let text = String::from_utf8(ls.stdout).unwrap();
    assert_eq!(text.lines().count(), 21, "{text}");
    assert_eq!(text.matches("finished").count(), 20, "{text}");
}

/// The scripted run both takeover tests use: a file, a slow command, another file, finish.
fn takeover_script() -> Vec<Turn> {
    vec![
        write_turn("a.txt", "first\n"),
        shell_turn("sleep 6"),
        write_turn("c.txt", "after the command\n"),
        finish_turn(),
    ]
}

async fn wait_for_shell_started(store: &dyn Store, run: &RunId) {
    wait_for(
        Duration::from_secs(60),
        "the shell call to start",
        async || {
            let events = store.load_events(run).await.unwrap();
            events
                .iter()
                .any(|r| matches!(&r.event, Event::ToolCallStarted { name, .. } if name == "shell"))
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_s_run_is_taken_over_after_its_lease_expires() {
    let cluster = Cluster::new(takeover_script()).await;
    let store = cluster.schema.store().await;
    let run = cluster.submit("takeover").await;
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut a = cluster.worker(dir_a.path(), "2", 1);
    wait_for_shell_started(&store, &run).await;
    // B is up and polling before A dies, so what is measured is the lease, not B's start-up.
    let b = cluster.worker(dir_b.path(), "2", 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    a.kill().unwrap(); // SIGKILL: no clean-up, no release.
    let _ = a.wait();
    let killed = Instant::now();
    wait_for(Duration::from_secs(30), "the takeover", async || {
        count(&store.load_events(&run).await.unwrap(), "run_resumed") == 2
    })
    .await;
    let takeover = killed.elapsed();
    eprintln!("takeover after {takeover:?} (lease TTL 2 s)");
    // The lease had at least ~1.3 s left (renewed every third of its TTL), and B polls every
    // 200 ms: taken over once the lease expired, within TTL + one heartbeat + slack.
    assert!(
        takeover >= Duration::from_millis(1000),
        "{takeover:?}: before expiry?"
    );
    assert!(
        takeover <= Duration::from_millis(2000 + 700 + 3000),
        "{takeover:?}"
    );
    wait_for(Duration::from_secs(60), "the run to finish", async || {
        store.get_run(&run).await.unwrap().unwrap().status == RunStatus::Finished
    })
    .await;
    let events = cluster.events(&store, &run).await;
    assert_journal_sound(&run, &events);
    assert_eq!(count(&events, "run_finished"), 1);
    // The command A was running was reported to the model as interrupted, not re-run.
    let shell_result = events
        .iter()
        .find_map(|r| match &r.event {
            Event::ToolCallFinished {
                call_id, result, ..
            } if call_id == "call-1-0" => Some(serde_json::to_string(result).unwrap()),
            _ => None,
        })
        .unwrap();
    assert!(shell_result.contains("interrupted"), "{shell_result}");

    // The same run uninterrupted, on B alone, ends with the same workspace.
    let reference = cluster.submit("takeover").await;
    wait_for(Duration::from_secs(60), "the reference run", async || {
        store.get_run(&reference).await.unwrap().unwrap().status == RunStatus::Finished
    })
    .await;
    assert_eq!(terminate(b).await.code(), Some(0));
    let taken_over = snapshot_files(&dir_b.path().join(run.as_str()));
    assert_eq!(
        taken_over,
        snapshot_files(&dir_b.path().join(reference.as_str()))
    );
    assert_eq!(
        taken_over
            .iter()
            .map(|(p, _)| p.as_str())
            .collect::<Vec<_>>(),
        ["README.md", "a.txt", "c.txt"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_stopped_with_sigterm_hands_its_run_back() {
    let cluster = Cluster::new(takeover_script()).await;
    let store = cluster.schema.store().await;
    let run = cluster.submit("hand back").await;
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // A long lease: only a release lets another worker in quickly.
    let a = cluster.worker(dir_a.path(), "60", 1);
    wait_for_shell_started(&store, &run).await;
    let status = terminate(a).await;
    assert_eq!(status.code(), Some(0));
    let summary = store.get_run(&run).await.unwrap().unwrap();
    assert_eq!(summary.status, RunStatus::Paused);
    assert!(summary.holder.is_none(), "lease not released: {summary:?}");

    let status_out = baton(cluster.source.path(), cluster.home.path())
        .args(["--store", &cluster.url, "status", run.as_str()])
        .output()
        .unwrap();
    assert_finished(&status_out);
    assert!(
        String::from_utf8(status_out.stdout)
            .unwrap()
            .contains("holder     free")
    );

    let b = cluster.worker(dir_b.path(), "60", 1);
    let took = wait_for(Duration::from_secs(30), "B to finish the run", async || {
        store.get_run(&run).await.unwrap().unwrap().status == RunStatus::Finished
    })
    .await;
    assert!(took < Duration::from_secs(30));
    assert_eq!(terminate(b).await.code(), Some(0));
    let events = cluster.events(&store, &run).await;
    assert_journal_sound(&run, &events);
    assert_eq!(count(&events, "run_paused"), 1);
    assert_eq!(count(&events, "run_finished"), 1);
    assert_eq!(
        snapshot_files(&dir_b.path().join(run.as_str()))
            .iter()
            .map(|(p, _)| p.clone())
            .collect::<Vec<_>>(),
        ["README.md", "a.txt", "c.txt"]
    );
}

#[test]
fn submit_and_worker_on_the_embedded_sqlite_store_say_they_need_postgres() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let artifacts = tempfile::tempdir().unwrap();
    let submit = baton(ws.path(), home.path())
        .args([
            "submit",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
        ])
        .arg("--workspace-source")
        .arg(ws.path())
        .arg("--artifacts")
        .arg(artifacts.path())
        .arg("a goal")
        .output()
        .unwrap();
    let worker = baton(ws.path(), home.path())
        .args(["worker", "--artifacts"])
        .arg(artifacts.path())
        .output()
        .unwrap();
    for out in [submit, worker] {
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.contains("needs a shared PostgreSQL store"),
            "{stderr}"
        );
    }
    // Nothing was queued or started in the workspace.
    assert!(!ws.path().join(".baton").exists());
}

/// A worker frozen (SIGSTOP) past its lease while its command runs: another worker takes the run
/// over and finishes it; when the frozen one wakes up, its command's result is refused (fenced)
/// and the journal stays exactly as the new holder left it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_worker_that_lost_its_lease_cannot_append() {
    let cluster = Cluster::new(vec![
        write_turn("a.txt", "first\n"),
        shell_turn("sleep 2"),
        write_turn("c.txt", "after the command\n"),
        finish_turn(),
    ])
    .await;
    let store = cluster.schema.store().await;
    let run = cluster.submit("fenced").await;
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = cluster.worker_with_stdout(dir_a.path(), "2", 1, Stdio::piped());
    wait_for_shell_started(&store, &run).await;
    signal(&a, "STOP");
    let b = cluster.worker(dir_b.path(), "2", 1);
    wait_for(Duration::from_secs(60), "B to finish the run", async || {
        store.get_run(&run).await.unwrap().unwrap().status == RunStatus::Finished
    })
    .await;
    let finished = cluster.events(&store, &run).await;
    // Wake A: its `sleep 2` is long over, so it goes straight to journaling the result.
    signal(&a, "CONT");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(terminate(b).await.code(), Some(0));
    signal(&a, "TERM");
    let out = tokio::task::spawn_blocking(move || a.wait_with_output().unwrap())
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains(&format!("run {run} lost")), "{stdout}");
    let after = cluster.events(&store, &run).await;
    assert_eq!(after, finished, "the stale worker changed the journal");
    assert_journal_sound(&run, &after);
    assert_eq!(count(&after, "run_finished"), 1);
    let summary = store.get_run(&run).await.unwrap().unwrap();
    assert_eq!(summary.status, RunStatus::Finished);
}
