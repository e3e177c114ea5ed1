#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Supervised runs with real processes and real signals: the agent child of `baton run` is
//! SIGKILLed at pseudo-random moments and the supervisor carries the run to its end; the restart
//! limit; SIGTERM to the supervisor pauses; a SIGKILLed supervisor takes its child along;
//! `--detach` with `attach` and `stop`.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

const TURNS: usize = 8;

/// Like the torture script: a shell call that appends to its own log (a re-run would show as a
/// second line) and a read per turn; every answer is held back a little so that kills land in
/// model calls too. The final answer is held back long enough that no kill can come after it.
fn script() -> Vec<Turn> {
    let mut turns: Vec<Turn> = (0..TURNS)
        .map(|t| {
            let mut turn = turn(&[
                (
                    "shell",
                    json!({"command": format!("echo ran >> log_{t}.txt; sleep 0.15")}),
                ),
                ("read_file", json!({"path": format!("log_{t}.txt")})),
            ]);
            turn.delay = Some(Duration::from_millis(150));
            turn
        })
        .collect();
    let mut last = turn(&[("finish", json!({"summary": "supervised"}))]);
    last.delay = Some(Duration::from_secs(2));
    turns.push(last);
    turns
}

struct Lcg(u64);

impl Lcg {
    fn next_ms(&mut self, max: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % max
    }
}

/// Live processes whose parent is `pid` (from /proc, so no helper tools are needed).
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("Z");
        let ppid: u32 = fields.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if ppid == pid && state != "Z" {
            out.push(child);
        }
    }
    out
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rfind(')')
                .map(|i| s[i + 1..].split_whitespace().next() != Some("Z"))
        })
        .unwrap_or(false)
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits (generously) for `cond`.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Spawns `cmd` with stdout collected line by line into the returned list.
fn spawn_collecting(mut cmd: Command) -> (std::process::Child, Arc<Mutex<Vec<String>>>) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = Arc::new(Mutex::new(Vec::new()));
    let stdout = child.stdout.take().unwrap();
    let sink = lines.clone();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            sink.lock().unwrap().push(line);
        }
    });
    (child, lines)
}

fn saw(lines: &Arc<Mutex<Vec<String>>>, kind: &str) -> bool {
    let needle = format!("\"type\":\"{kind}\"");
    lines.lock().unwrap().iter().any(|l| l.contains(&needle))
}

fn output(cmd: &mut Command) -> std::process::Output {
    cmd.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkilled_children_are_restarted_until_the_run_completes() {
    let server = ScriptedServer::start(script()).await;
    let received = server.received_handle();
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.args([
        "run",
        "--base-url",
        &server.base_url(),
        "--model",
        "m",
        "--max-restarts",
        "20",
        "--json",
        "supervised torture",
    ]);
    let (status, kills, lines, stderr) = tokio::task::spawn_blocking(move || {
        let (mut supervisor, lines) = spawn_collecting(cmd);
        let sup = supervisor.id();
        let mut stderr = supervisor.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            std::io::Read::read_to_string(&mut stderr, &mut s).unwrap();
            s
        });
        // The first kill waits for the run to be journaled (see `baton resume --last`).
        wait_for("run_started", || saw(&lines, "run_started"));
        let mut rng = Lcg(0xbadc0de);
        let mut kills = 0;
        let mut last_child = None;
        let count = |kind: &str| {
            let needle = format!("\"type\":\"{kind}\"");
            lines
                .lock()
                .unwrap()
                .iter()
                .filter(|l| l.contains(&needle))
                .count()
        };
        for _ in 0..6 {
            // Each kill hits a child at work: after it resumed the run (or started it).
            wait_for("the new agent process to resume", || {
                count("run_resumed") == kills || !alive(sup)
            });
            std::thread::sleep(Duration::from_millis(50 + rng.next_ms(600)));
            // A fresh child (not the one killed last), unless the run has ended.
            let mut child = None;
            wait_for("a new agent process", || {
                child = children_of(sup)
                    .into_iter()
                    .find(|c| Some(*c) != last_child);
                child.is_some() || !alive(sup)
            });
            let Some(child) = child else { break };
            // Never once the final answer was asked for: the run may be finishing.
            if received
                .lock()
                .unwrap()
                .iter()
                .any(|r| r.turn_index == TURNS)
            {
                break;
            }
            signal(child, "-KILL");
            kills += 1;
            last_child = Some(child);
        }
        let status = supervisor.wait().unwrap();
        (status, kills, lines, stderr.join().unwrap())
    })
    .await
    .unwrap();
    assert_eq!(status.code(), Some(0), "supervisor failed: {stderr}");
    assert!(kills >= 3, "only {kills} kills landed");
    eprintln!("supervise: {kills} children SIGKILLed before the run finished");

    // The --json stream is one JSONL stream across all children, restarts included.
    let lines = lines.lock().unwrap().clone();
    let stream: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad line {l:?}: {e}")))
        .collect();
    assert_eq!(of_type(&stream, "supervisor_restarted").len(), kills);

    let journal = journal(ws.path(), home.path());
    let restarts = of_type(&journal, "supervisor_restarted");
    assert_eq!(restarts.len(), kills);
    for (i, r) in restarts.iter().enumerate() {
        assert_eq!(r["attempt"], i as u64 + 1);
        assert!(
            r["cause"].as_str().unwrap().contains("SIGKILL"),
            "{}",
            r["cause"]
        );
    }
    assert_eq!(of_type(&journal, "run_resumed").len(), kills);
    assert_eq!(of_type(&journal, "run_finished").len(), 1);
    // Every restart is in `baton logs`.
    let logs = output(baton(ws.path(), home.path()).arg("logs"));
    let shown = text(&logs.stdout)
        .lines()
        .filter(|l| l.contains("supervisor: the agent process was killed by signal 9"))
        .count();
    assert_eq!(shown, kills, "{}", text(&logs.stdout));

    // Each turn was answered once, and a shell call with a recorded result ran exactly once.
    for t in 1..=TURNS as u64 + 1 {
        let finished = of_type(&journal, "model_call_finished")
            .into_iter()
            .filter(|e| e["turn"] == t)
            .count();
        assert_eq!(finished, 1, "turn {t}");
    }
    let started = of_type(&journal, "tool_call_started");
    for result in of_type(&journal, "tool_call_finished") {
        let call = started
            .iter()
            .find(|s| s["call_id"] == result["call_id"])
            .unwrap();
        if call["name"] != "shell" {
            continue;
        }
        let t = call["turn"].as_u64().unwrap() - 1;
        let ran = std::fs::read_to_string(ws.path().join(format!("log_{t}.txt")))
            .map(|s| s.lines().count())
            .unwrap_or(0);
        match result["result"]["outcome"].as_str().unwrap() {
            "success" => assert_eq!(ran, 1, "turn {} shell ran {ran} times", t + 1),
            "interrupted" => assert!(ran <= 1, "interrupted shell ran {ran} times"),
            other => panic!("unexpected outcome {other}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_that_always_crashes_hits_the_restart_limit() {
    let server = ScriptedServer::start(vec![
        turn(&[("shell", json!({"command": "echo one"}))]),
        turn(&[("finish", json!({"summary": "never reached"}))]),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let first = run_against(&server, ws.path(), home.path(), &["--max-turns", "1", "x"]).await;
    assert_eq!(first.status.code(), Some(3), "{}", text(&first.stderr));
    let mut resume = baton(ws.path(), home.path());
    resume
        .args([
            "resume",
            "--last",
            "--max-turns",
            "5",
            "--max-restarts",
            "2",
        ])
        .env("BATON_TEST_AGENT_ABORT", "1");
    let out = tokio::task::spawn_blocking(move || resume.output().unwrap())
        .await
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("restarted 2 times") && stderr.contains("baton resume"),
        "{stderr}"
    );
    let journal = journal(ws.path(), home.path());
    let restarts = of_type(&journal, "supervisor_restarted");
    assert_eq!(restarts.len(), 2);
    assert!(
        restarts
            .iter()
            .all(|r| { r["cause"].as_str().is_some_and(|c| c.contains("SIGABRT")) })
    );
    // The backoff doubles while the children make no progress.
    assert_eq!(restarts[0]["backoff_ms"], 500);
    assert_eq!(restarts[1]["backoff_ms"], 1000);
    assert_eq!(of_type(&journal, "run_resumed").len(), 0);
    // The run is intact: without the crash hook it finishes.
    let mut resume = baton(ws.path(), home.path());
    resume.args(["resume", "--last", "--max-turns", "5"]);
    let last = tokio::task::spawn_blocking(move || resume.output().unwrap())
        .await
        .unwrap();
    assert_finished(&last);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_to_the_supervisor_pauses_without_a_restart() {
    let server = ScriptedServer::start(vec![
        turn(&[("shell", json!({"command": "sleep 30"}))]),
        turn(&[("finish", json!({"summary": "ok"}))]),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.args([
        "run",
        "--base-url",
        &server.base_url(),
        "--model",
        "m",
        "--json",
        "x",
    ]);
    let (status, child) = tokio::task::spawn_blocking(move || {
        let (mut supervisor, lines) = spawn_collecting(cmd);
        wait_for("the shell call", || saw(&lines, "tool_call_started"));
        let child = children_of(supervisor.id())[0];
        signal(supervisor.id(), "-TERM");
        (supervisor.wait().unwrap(), child)
    })
    .await
    .unwrap();
    assert_eq!(status.code(), Some(3));
    assert!(!alive(child), "the agent process outlived its supervisor");
    let journal = journal(ws.path(), home.path());
    assert_eq!(of_type(&journal, "supervisor_restarted").len(), 0);
    let paused = of_type(&journal, "run_paused");
    assert_eq!(paused.len(), 1);
    assert_eq!(paused[0]["reason"], "interrupted");
    let mut resume = baton(ws.path(), home.path());
    resume.args(["resume", "--last"]);
    let last = tokio::task::spawn_blocking(move || resume.output().unwrap())
        .await
        .unwrap();
    assert_finished(&last);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_supervisor_takes_its_child_along() {
    let server = ScriptedServer::start(vec![
        turn(&[("shell", json!({"command": "sleep 30"}))]),
        turn(&[("finish", json!({"summary": "ok"}))]),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.args([
        "run",
        "--base-url",
        &server.base_url(),
        "--model",
        "m",
        "--json",
        "x",
    ]);
    tokio::task::spawn_blocking(move || {
        let (mut supervisor, lines) = spawn_collecting(cmd);
        wait_for("the shell call", || saw(&lines, "tool_call_started"));
        let child = children_of(supervisor.id())[0];
        supervisor.kill().unwrap();
        supervisor.wait().unwrap();
        wait_for("the agent process to die with its supervisor", || {
            !alive(child)
        });
    })
    .await
    .unwrap();
    // And the run is resumable at once: the dead child's lease is taken over.
    let mut resume = baton(ws.path(), home.path());
    resume.args(["resume", "--last"]);
    let last = tokio::task::spawn_blocking(move || resume.output().unwrap())
        .await
        .unwrap();
    assert_finished(&last);
}

fn detach(ws: &Path, home: &Path, base: &str, goal: &str) -> std::process::Output {
    output(baton(ws, home).args(["run", "--detach", "--base-url", base, "--model", "m", goal]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detach_then_attach_follows_the_run_to_its_end() {
    let mut turns: Vec<Turn> = (0..3)
        .map(|t| {
            let mut turn = turn(&[("shell", json!({"command": format!("echo {t}")}))]);
            turn.delay = Some(Duration::from_millis(300));
            turn
        })
        .collect();
    turns.push(turn(&[("finish", json!({"summary": "detached"}))]));
    let server = ScriptedServer::start(turns).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (w, h, base) = (
        ws.path().to_path_buf(),
        home.path().to_path_buf(),
        server.base_url(),
    );
    let (started, attached) = tokio::task::spawn_blocking(move || {
        let started = detach(&w, &h, &base, "in the background");
        let attached = output(baton(&w, &h).args(["attach", "--json"]));
        (started, attached)
    })
    .await
    .unwrap();
    assert_finished(&started);
    let said = text(&started.stdout);
    assert!(said.contains("started in the background"), "{said}");
    let log = said
        .lines()
        .find_map(|l| l.strip_prefix("log: "))
        .expect("log path");
    assert!(
        Path::new(log).starts_with(state_dir(ws.path(), home.path()).root()),
        "{log}"
    );
    assert_finished(&attached);
    let events: Vec<Value> = text(&attached.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // From the start of the journal to its end, in order.
    assert_eq!(events.first().unwrap()["type"], "run_started");
    assert_eq!(events.last().unwrap()["type"], "run_finished");
    assert_eq!(events, journal(ws.path(), home.path()));
    assert!(Path::new(log).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_pauses_a_detached_run() {
    let server = ScriptedServer::start(vec![
        turn(&[("shell", json!({"command": "sleep 30"}))]),
        turn(&[("finish", json!({"summary": "ok"}))]),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let (w, h, base) = (
        ws.path().to_path_buf(),
        home.path().to_path_buf(),
        server.base_url(),
    );
    let (stopped, again, status) = tokio::task::spawn_blocking(move || {
        assert_finished(&detach(&w, &h, &base, "to be stopped"));
        wait_for("the shell call", || {
            !of_type(&journal(&w, &h), "tool_call_started").is_empty()
        });
        let stopped = output(baton(&w, &h).arg("stop"));
        let again = output(baton(&w, &h).arg("stop"));
        let status = output(baton(&w, &h).arg("status"));
        (stopped, again, status)
    })
    .await
    .unwrap();
    assert_finished(&stopped);
    assert!(
        text(&stopped.stdout).contains("paused"),
        "{}",
        text(&stopped.stdout)
    );
    assert_finished(&again);
    assert!(text(&again.stdout).contains("not running"));
    let status = text(&status.stdout);
    assert!(status.contains("status     paused"), "{status}");
    let journal = journal(ws.path(), home.path());
    let paused = of_type(&journal, "run_paused");
    assert_eq!(paused.len(), 1);
    assert_eq!(paused[0]["reason"], "interrupted");
    // Attaching to a paused run prints it and exits like the run: 3.
    let attached = output(baton(ws.path(), home.path()).arg("attach"));
    assert_eq!(attached.status.code(), Some(3));
    // `resume --detach` carries it on in the background; `attach` follows it to its end.
    let (w, h) = (ws.path().to_path_buf(), home.path().to_path_buf());
    let (resumed, attached) = tokio::task::spawn_blocking(move || {
        let resumed = output(baton(&w, &h).args(["resume", "--last", "--detach"]));
        let attached = output(baton(&w, &h).args(["attach", "--json"]));
        (resumed, attached)
    })
    .await
    .unwrap();
    assert_finished(&resumed);
    assert_finished(&attached);
    let seen: Vec<Value> = text(&attached.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(seen.last().unwrap()["type"], "run_finished");
    assert_eq!(seen, support::journal(ws.path(), home.path()));
}
