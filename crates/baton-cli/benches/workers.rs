//! Scale-out benchmark: real `baton worker` processes on one PostgreSQL server (a schema of its
//! own, `BATON_TEST_POSTGRES`), a scripted model with zero think time, small runs of five turns.
//! Reports runs/s and events/s with 1, 2 and 4 workers, and how long after a worker is killed
//! (SIGKILL) another one resumes its run, with a 2 s lease.
//!
//! `cargo bench -p baton-cli --bench workers`. Without `--bench` (as `cargo test --all-targets`
//! runs it) it does a tiny pass as a smoke test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use baton_core::{RunId, RunStatus};
use baton_store::Store;
use baton_store::testing::PgTestSchema;
use serde_json::json;
use support::{ScriptedServer, Turn, baton, turn};

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let (runs, workers, takeovers): (usize, &[usize], usize) = if full {
            (40, &[1, 2, 4], 3)
        } else {
            (3, &[1, 2], 1)
        };
        println!("workers  runs  seconds  runs/s  events  events/s");
        for &k in workers {
            throughput(k, runs).await;
        }
        for i in 0..takeovers {
            let t = takeover().await;
            println!(
                "takeover #{i}: {:.2} s after SIGKILL (lease TTL 2 s)",
                t.as_secs_f64()
            );
        }
    });
}

/// Five turns: write, read, edit, list, finish.
fn small_run() -> Vec<Turn> {
    vec![
        turn(&[("write_file", json!({"path": "a.txt", "content": "one\n"}))]),
        turn(&[("read_file", json!({"path": "a.txt"}))]),
        turn(&[(
            "edit_file",
            json!({"path": "a.txt", "old_string": "one", "new_string": "two"}),
        )]),
        turn(&[("list_dir", json!({"path": "."}))]),
        turn(&[("finish", json!({"summary": "done"}))]),
    ]
}

struct Setup {
    schema: PgTestSchema,
    server: ScriptedServer,
    home: tempfile::TempDir,
    source: tempfile::TempDir,
    artifacts: tempfile::TempDir,
    workdirs: tempfile::TempDir,
}

impl Setup {
    async fn new(script: Vec<Turn>) -> Setup {
        let source = tempfile::tempdir().unwrap();
        std::fs::write(source.path().join("README.md"), "bench\n").unwrap();
        Setup {
            schema: PgTestSchema::create().await,
            server: ScriptedServer::start(script).await,
            home: tempfile::tempdir().unwrap(),
            source,
            artifacts: tempfile::tempdir().unwrap(),
            workdirs: tempfile::tempdir().unwrap(),
        }
    }

    fn cmd(&self) -> Command {
        let mut cmd = baton(self.source.path(), self.home.path());
        cmd.args(["--store", &self.schema.url()]);
        cmd
    }

    async fn submit(&self) -> RunId {
        let mut cmd = self.cmd();
        cmd.args(["submit", "--model", "m", "--base-url"])
            .arg(self.server.base_url())
            .arg("--workspace-source")
            .arg(self.source.path())
            .arg("--artifacts")
            .arg(self.artifacts.path())
            .arg("bench goal");
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .unwrap()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        RunId::from_string(String::from_utf8(out.stdout).unwrap().trim())
    }

    fn worker(&self, name: &str, ttl: &str) -> Child {
        let dir = self.workdirs.path().join(name);
        let mut cmd = self.cmd();
        cmd.args(["worker", "--lease-ttl", ttl, "--artifacts"])
            .arg(self.artifacts.path())
            .arg("--workdir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        cmd.spawn().unwrap()
    }
}

fn stop(children: Vec<Child>) {
    for mut child in children {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let _ = child.wait();
    }
}

async fn wait_until(limit: Duration, mut check: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < limit, "timed out");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `runs` runs queued before any worker starts; timed from the workers' start to the last
/// run's finish (so it includes the workers' start-up, ~0.1 s).
async fn throughput(workers: usize, runs: usize) {
    let setup = Setup::new(small_run()).await;
    for _ in 0..runs {
        setup.submit().await;
    }
    let store = setup.schema.store().await;
    let start = Instant::now();
    let children: Vec<Child> = (0..workers)
        .map(|i| setup.worker(&format!("w{i}"), "30"))
        .collect();
    wait_until(Duration::from_secs(600), async || {
        let all = store.list_runs().await.unwrap();
        all.iter().all(|r| r.status == RunStatus::Finished)
    })
    .await;
    let seconds = start.elapsed().as_secs_f64();
    stop(children);
    let all = store.list_runs().await.unwrap();
    // Events the workers appended (submit journals one `run_started` per run before timing).
    let events: u64 = all.iter().map(|r| r.event_count - 1).sum();
    println!(
        "{workers:>7}  {runs:>4}  {seconds:>7.2}  {:>6.1}  {events:>6}  {:>8.0}",
        runs as f64 / seconds,
        events as f64 / seconds
    );
}

/// Kills a worker while its run sits in a long command; times until another worker has
/// journaled its resume of that run.
async fn takeover() -> Duration {
    let script = vec![
        turn(&[("shell", json!({"command": "sleep 30", "timeout_secs": 60}))]),
        turn(&[("finish", json!({"summary": "done"}))]),
    ];
    let setup = Setup::new(script).await;
    let run = setup.submit().await;
    let store = setup.schema.store().await;
    let mut a = setup.worker("a", "2");
    wait_until(Duration::from_secs(60), async || {
        store
            .load_events(&run)
            .await
            .unwrap()
            .iter()
            .any(|r| r.event.kind() == "tool_call_started")
    })
    .await;
    let b = setup.worker("b", "2");
    tokio::time::sleep(Duration::from_millis(500)).await;
    a.kill().unwrap();
    let _ = a.wait();
    let killed = Instant::now();
    wait_until(Duration::from_secs(60), async || {
        resumes(&store, &run).await == 2
    })
    .await;
    let took = killed.elapsed();
    stop(vec![b]);
    took
}

async fn resumes(store: &dyn Store, run: &RunId) -> usize {
    store
        .load_events(run)
        .await
        .unwrap()
        .iter()
        .filter(|r| r.event.kind() == "run_resumed")
        .count()
}
