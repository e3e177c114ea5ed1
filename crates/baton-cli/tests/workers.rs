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
    /// `--artifacts` for submitters and workers: `artifacts`' path unless set otherwise.
    artifacts_url: String,
    /// Extra environment of every baton process (the S3 endpoint and keys).
    env: Vec<(&'static str, String)>,
}

impl Cluster {
    async fn new(script: Vec<Turn>) -> Cluster {
        let schema = PgTestSchema::create().await;
        let url = schema.url();
        let source = tempfile::tempdir().unwrap();
        std::fs::write(source.path().join("README.md"), "the project\n").unwrap();
        let artifacts = tempfile::tempdir().unwrap();
        Cluster {
            artifacts_url: artifacts.path().display().to_string(),
            env: Vec::new(),
            schema,
            url,
            server: ScriptedServer::start(script).await,
            home: tempfile::tempdir().unwrap(),
            source,
            artifacts,
        }
    }

    /// A baton command of this cluster: its store, its artifacts' environment.
    fn baton(&self) -> std::process::Command {
        let mut cmd = baton(self.source.path(), self.home.path());
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd.args(["--store", &self.url]);
        cmd
    }

    /// `baton submit GOAL` (off the runtime: the scripted server lives on it); returns the id.
    async fn submit(&self, goal: &str) -> RunId {
        let mut cmd = self.baton();
        cmd.args(["submit", "--base-url"])
            .arg(self.server.base_url())
            .args(["--model", "m", "--workspace-source"])
            .arg(self.source.path())
            .arg("--artifacts")
            .arg(&self.artifacts_url)
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
        self.spawn_worker(workdir, lease_ttl, concurrency, None, stdout)
    }

    /// A one-slot worker named `id` (`--worker-id`).
    fn named_worker(&self, workdir: &Path, lease_ttl: &str, id: &str) -> Child {
        self.spawn_worker(workdir, lease_ttl, 1, Some(id), Stdio::null())
    }

    fn spawn_worker(
        &self,
        workdir: &Path,
        lease_ttl: &str,
        concurrency: usize,
        id: Option<&str>,
        stdout: Stdio,
    ) -> Child {
        let mut cmd = self.baton();
        if let Some(id) = id {
            cmd.args(["worker", "--worker-id", id]);
        } else {
            cmd.arg("worker");
        }
        cmd.args(["--lease-ttl", lease_ttl])
            .arg("--concurrency")
            .arg(concurrency.to_string())
            .arg("--artifacts")
            .arg(&self.artifacts_url)
            .arg("--workdir")
            .arg(workdir)
            .stdout(stdout)
            .stderr(Stdio::inherit());
        cmd.spawn().unwrap()
    }

    /// `baton ls --all`'s output.
    fn ls_all(&self) -> String {
        let ls = self.baton().args(["ls", "--all"]).output().unwrap();
        assert_finished(&ls);
        String::from_utf8(ls.stdout).unwrap()
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

/// The line of `run` in `ls --all` output.
fn run_line<'a>(listing: &'a str, run: &RunId) -> &'a str {
    listing
        .lines()
        .find(|l| l.starts_with(run.short()))
        .unwrap_or_else(|| panic!("run {run} not listed:\n{listing}"))
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
    let text = cluster.ls_all();
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
    let a = cluster.named_worker(dir_a.path(), "60", "worker-a");
    wait_for_shell_started(&store, &run).await;
    // While A works, the store says so: its name, how old the lease is, when it expires.
    let listed = cluster.ls_all();
    let line = run_line(&listed, &run);
    assert!(line.contains("running"), "{listed}");
    assert!(line.contains("worker-a (pid"), "{listed}");
    assert!(
        line.contains("age ") && line.contains("expires in"),
        "{listed}"
    );
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
    let status_text = String::from_utf8(status_out.stdout).unwrap();
    assert!(status_text.contains("holder     free"), "{status_text}");
    assert!(
        status_text.contains("queued     yes (waiting for a worker)"),
        "{status_text}"
    );
    // Handed back: waiting in the queue again, held by nobody.
    let listed = cluster.ls_all();
    let line = run_line(&listed, &run);
    assert!(
        line.contains(" queued ") && line.contains(" free "),
        "{listed}"
    );
    assert!(!line.contains("worker-a"), "{listed}");

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
    assert!(!state_dir(ws.path(), home.path()).root().exists());
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

/// moto's S3-compatible server on a free 127.0.0.1 port, installed by
/// `scripts/s3-test-server.sh` (never by the test itself); killed when dropped.
struct S3Server {
    child: Child,
    port: u16,
}

/// A secret that must never show up in any output.
const S3_SECRET: &str = "baton-test-secret-7f3a9c";

impl S3Server {
    async fn start() -> S3Server {
        let cache = std::env::var("BATON_S3_CACHE").unwrap_or_else(|_| {
            format!(
                "{}/.cache/baton-s3",
                std::env::var("HOME").unwrap_or_default()
            )
        });
        let server = Path::new(&cache).join("venv/bin/moto_server");
        assert!(
            server.exists(),
            "the S3 test server is not installed ({} is missing): run scripts/s3-test-server.sh, \
             which installs moto[server] from PyPI into {cache}",
            server.display()
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new(&server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let s3 = S3Server { child, port };
        wait_for(
            Duration::from_secs(30),
            "moto_server to listen",
            async || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
        )
        .await;
        s3
    }

    /// One plain HTTP request (moto takes unsigned ones); the response as text.
    fn request(&self, method: &str, target: &str) -> String {
        use std::io::{Read, Write};
        let mut conn = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            conn,
            "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\n\
             Connection: close\r\n\r\n",
            self.port
        )
        .unwrap();
        let mut response = String::new();
        conn.read_to_string(&mut response).unwrap();
        response
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            (
                "AWS_ENDPOINT_URL",
                format!("http://127.0.0.1:{}", self.port),
            ),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", "baton-test-key".into()),
            ("AWS_SECRET_ACCESS_KEY", S3_SECRET.into()),
        ]
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The whole scale-out path through an S3-compatible bucket instead of a directory: `submit`
/// uploads the first snapshot, a worker restores it and uploads its own, and after that worker is
/// SIGKILLed mid-command another worker (with an empty workdir) restores the latest snapshot from
/// the bucket and finishes the run. No credential ever reaches any output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspaces_travel_through_an_s3_bucket_across_a_takeover() {
    let s3 = S3Server::start().await;
    assert!(
        s3.request("PUT", "/baton-artifacts")
            .starts_with("HTTP/1.1 200")
    );
    let mut cluster = Cluster::new(takeover_script()).await;
    cluster.artifacts_url = "s3://baton-artifacts/team/a".into();
    cluster.env = s3.env();
    let store = cluster.schema.store().await;
    let run = cluster.submit("through s3").await;
    let listing = s3.request("GET", "/baton-artifacts?list-type=2&prefix=team/a/");
    assert!(
        listing.contains(&format!("team/a/{run}/workspace-000000000000.tar")),
        "{listing}"
    );

    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut a = cluster.worker(dir_a.path(), "2", 1);
    wait_for_shell_started(&store, &run).await;
    a.kill().unwrap();
    let _ = a.wait();
    // a.txt exists only in A's snapshot after its write_file: B can only get it from the bucket.
    let b = cluster.worker(dir_b.path(), "2", 1);
    wait_for(Duration::from_secs(60), "B to finish the run", async || {
        store.get_run(&run).await.unwrap().unwrap().status == RunStatus::Finished
    })
    .await;
    assert_eq!(terminate(b).await.code(), Some(0));
    let events = cluster.events(&store, &run).await;
    assert_journal_sound(&run, &events);
    assert_eq!(count(&events, "run_resumed"), 2);
    assert_eq!(
        snapshot_files(&dir_b.path().join(run.as_str())),
        vec![
            ("README.md".to_string(), b"the project\n".to_vec()),
            ("a.txt".to_string(), b"first\n".to_vec()),
            ("c.txt".to_string(), b"after the command\n".to_vec()),
        ]
    );
    // Nothing went to the local artifact directory; the bucket has the final snapshot.
    assert_eq!(
        std::fs::read_dir(cluster.artifacts.path()).unwrap().count(),
        0
    );
    let listing = s3.request("GET", "/baton-artifacts?list-type=2&prefix=team/a/");
    let final_key = format!("team/a/{run}/workspace-{:012}.tar", events.len());
    assert!(listing.contains(&final_key), "{final_key} not in {listing}");

    // A bucket that does not exist: an error naming it, with the credentials scrubbed.
    let mut cmd = cluster.baton();
    cmd.args(["submit", "--base-url"])
        .arg(cluster.server.base_url())
        .args(["--model", "m", "--workspace-source"])
        .arg(cluster.source.path())
        .args(["--artifacts", "s3://no-such-bucket/x", "a goal"]);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("s3://no-such-bucket/x"), "{stderr}");
    assert!(!stderr.contains(S3_SECRET), "{stderr}");
    // An unknown scheme is a usage error.
    let out = cluster
        .baton()
        .args(["worker", "--artifacts", "gs://bucket/x"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("s3://BUCKET"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submitted_run_calls_mcp_tools_on_the_worker() {
    let cluster = Cluster::new(vec![
        turn(&[("mcp__ev__echo", json!({"message": "from a worker"}))]),
        finish_turn(),
    ])
    .await;
    write_user_config(
        cluster.home.path(),
        &format!(
            "[mcp_servers.ev]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
            baton_mcp::testing::everything_js()
        ),
    );
    // Submitting journals the servers' tools with the run's start.
    let run = cluster.submit("echo through MCP").await;
    let store = cluster.schema.store().await;
    let events = cluster.events(&store, &run).await;
    let Event::RunStarted { tools, .. } = &events[0].event else {
        panic!("{:?}", events[0].event)
    };
    assert!(tools.iter().any(|t| t.name == "mcp__ev__echo"), "{tools:?}");

    let dir = tempfile::tempdir().unwrap();
    let worker = cluster.worker_with_stdout(dir.path(), "5", 1, Stdio::piped());
    wait_for(Duration::from_secs(120), "the run finished", async || {
        store.get_run(&run).await.unwrap().unwrap().status == RunStatus::Finished
    })
    .await;
    let out = {
        let mut worker = worker;
        signal(&worker, "TERM");
        let mut stdout = String::new();
        std::io::Read::read_to_string(worker.stdout.as_mut().unwrap(), &mut stdout).unwrap();
        worker.wait().unwrap();
        stdout
    };
    assert!(out.contains("mcp server ev (stdio"), "{out}");
    let events = cluster.events(&store, &run).await;
    let echoed = events.iter().any(|r| {
        matches!(&r.event, Event::ToolCallFinished { result, .. } if result.content == "Echo: from a worker")
    });
    assert!(echoed, "the worker did not call the MCP tool");
    // The worker's own start of the server is journaled with the run.
    assert!(
        events
            .iter()
            .any(|r| matches!(&r.event, Event::McpServerStarted { server, .. } if server == "ev")),
        "no mcp_server_started from the worker"
    );
}
