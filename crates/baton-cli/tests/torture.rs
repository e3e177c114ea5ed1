#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Crash torture: SIGKILL `baton` at pseudo-random moments, over and over, resuming each time,
//! until the run finishes. Whatever the timing, nothing that finished once may run again.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::*;

const TURNS: usize = 10;

/// Each turn appends a line to its own log file from the shell (so a re-run would show as a
/// second line), reads a file, and the server holds every answer back a little so that kills
/// land inside model calls too.
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
            turn.delay = Some(Duration::from_millis(120));
            turn
        })
        .collect();
    turns.push(turn(&[("finish", json!({"summary": "tortured"}))]));
    turns
}

/// A small deterministic generator: the same kill schedule on every machine.
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

/// Round 0 starts the run and returns once it exists (a run killed before its first event is
/// an empty shell with nothing to resume); later rounds resume it. In-process
/// (`--no-supervise`): these tests kill the agent itself at random moments; a supervisor would
/// add its own start-up before the agent's, so kills could land before the agent resumed.
/// Supervised runs are tortured in supervise.rs; crash.rs kills supervisors.
fn start_or_resume(
    round: usize,
    ws: &std::path::Path,
    home: &std::path::Path,
    base: &str,
) -> std::process::Child {
    let mut cmd = baton(ws, home);
    if round == 0 {
        cmd.args([
            "run",
            "--no-supervise",
            "--base-url",
            base,
            "--model",
            "m",
            "--json",
            "torture",
        ]);
        let (child, mut events) = spawn_json(cmd);
        events.until(|e| e["type"] == "run_started").unwrap();
        std::thread::spawn(move || while events.until(|_| false).is_some() {});
        return child;
    }
    cmd.args(["resume", "--last", "--no-supervise"]);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Rounds before the torture gives up: far more than a run of `TURNS` turns needs once the
/// windows have stretched to the machine's speed.
const MAX_ROUNDS: usize = 200;

/// The longest stretch of a round's window (×, so at most about 37 s).
const MAX_STRETCH: u64 = 64;

/// How far the run has got, as the outside world sees it: requests the server received and
/// shell effects (log lines) in the workspace.
fn progress_of(
    ws: &std::path::Path,
    received: &std::sync::Arc<std::sync::Mutex<Vec<Received>>>,
) -> (usize, usize) {
    let requests = received.lock().unwrap().len();
    let lines = (0..TURNS)
        .map(|t| {
            std::fs::read_to_string(ws.join(format!("log_{t}.txt")))
                .map_or(0, |s| s.lines().count())
        })
        .sum();
    (requests, lines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_sigkills_never_repeat_finished_work() {
    let server = ScriptedServer::start(script()).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let base = server.base_url();
    let (w, h) = (ws.path().to_path_buf(), home.path().to_path_buf());
    let received = server.received_handle();
    let kills = tokio::task::spawn_blocking(move || {
        let mut rng = Lcg(0x5eed);
        let mut kills = 0;
        // On a loaded machine a resume's start-up alone (sandbox detection, the store, the
        // snapshot) can outlast a short window, and a schedule of short windows then never gets
        // anywhere. A round that got nowhere (no new request, no new shell effect) doubles the
        // windows that follow; one that progressed halves them again: the kills stay random,
        // only their scale follows the machine.
        let mut stretch = 1u64;
        let mut progress = progress_of(&w, &received);
        for round in 0..MAX_ROUNDS {
            let mut child = start_or_resume(round, &w, &h, &base);
            let window = (80 + rng.next_ms(500)) * stretch;
            let deadline = Instant::now() + Duration::from_millis(window);
            loop {
                if let Some(status) = child.try_wait().unwrap() {
                    if status.code() == Some(0) {
                        return kills;
                    }
                    panic!("baton exited with {status:?} in round {round}");
                }
                if Instant::now() >= deadline {
                    child.kill().unwrap();
                    child.wait().unwrap();
                    kills += 1;
                    let now = progress_of(&w, &received);
                    stretch = if now == progress {
                        (stretch * 2).min(MAX_STRETCH)
                    } else {
                        (stretch / 2).max(1)
                    };
                    progress = now;
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        panic!("the run did not finish within {MAX_ROUNDS} rounds");
    })
    .await
    .unwrap();
    assert!(kills >= 3, "the schedule killed baton only {kills} times");
    eprintln!("torture: {kills} SIGKILLs before the run finished");

    let journal = journal(ws.path(), home.path());
    assert_eq!(of_type(&journal, "run_finished").len(), 1);
    // A kill can land while a `resume` is still starting (sandbox detection, opening the
    // store), before it journals anything; such a crash resumes nothing. How many do is a matter
    // of machine speed, so only the bounds are exact.
    let resumed = of_type(&journal, "run_resumed").len();
    assert!(
        (1..=kills).contains(&resumed),
        "{resumed} resumes for {kills} kills"
    );

    // Every turn was answered once; the server was asked again only for answers never journaled.
    let requests = server.requests_per_turn();
    assert_eq!(requests.len(), TURNS + 1);
    for (t, n) in requests.iter().enumerate() {
        let turn = t as u64 + 1;
        let of_turn = |kind: &str| {
            of_type(&journal, kind)
                .into_iter()
                .filter(|e| e["turn"] == turn)
                .count()
        };
        assert_eq!(of_turn("model_call_finished"), 1, "turn {turn}");
        assert!(
            *n <= of_turn("model_call_started"),
            "turn {turn}: {n} requests, fewer attempts journaled"
        );
    }

    // A shell call with a journaled result ran exactly once; an interrupted one at most once.
    let started: Vec<&Value> = of_type(&journal, "tool_call_started");
    for result in of_type(&journal, "tool_call_finished") {
        let call = started
            .iter()
            .find(|s| s["call_id"] == result["call_id"])
            .unwrap();
        if call["name"] != "shell" {
            continue;
        }
        let t = call["turn"].as_u64().unwrap() - 1;
        let lines = std::fs::read_to_string(ws.path().join(format!("log_{t}.txt")))
            .map(|s| s.lines().count())
            .unwrap_or(0);
        match result["result"]["outcome"].as_str().unwrap() {
            "success" => assert_eq!(lines, 1, "turn {} shell ran {lines} times", t + 1),
            "interrupted" => assert!(
                lines <= 1,
                "interrupted shell of turn {} ran {lines} times",
                t + 1
            ),
            other => panic!("unexpected outcome {other}"),
        }
    }
    assert_eq!(
        started.iter().filter(|s| s["name"] == "shell").count(),
        TURNS,
        "a shell call was started twice"
    );
}

/// The journal's own invariants, checked after every kill: sequence numbers gap-free from 0,
/// at most one answer per turn, every result after its call's intent, and no shell effect
/// without its journaled intent (a turn's log line exists only if its shell call was started).
fn check_journal(journal: &[Value], ws: &std::path::Path, turns: usize, round: usize) {
    for (i, event) in journal.iter().enumerate() {
        assert_eq!(
            event["seq"], i as u64,
            "round {round}: a gap or a duplicate at {i}"
        );
    }
    let mut started_calls = std::collections::HashSet::new();
    let mut answered_turns = std::collections::HashSet::new();
    for event in journal {
        match event["type"].as_str().unwrap() {
            "tool_call_started" => {
                started_calls.insert(event["call_id"].as_str().unwrap().to_string());
            }
            "tool_call_finished" => assert!(
                started_calls.contains(event["call_id"].as_str().unwrap()),
                "round {round}: a result without its journaled call: {event}"
            ),
            "model_call_finished" => assert!(
                answered_turns.insert(event["turn"].as_u64().unwrap()),
                "round {round}: turn {} answered twice",
                event["turn"]
            ),
            _ => {}
        }
    }
    let shell_started: Vec<u64> = of_type(journal, "tool_call_started")
        .into_iter()
        .filter(|e| e["name"] == "shell")
        .map(|e| e["turn"].as_u64().unwrap())
        .collect();
    for t in 0..turns {
        let lines = std::fs::read_to_string(ws.join(format!("mark_{t}.txt")))
            .map(|s| s.lines().count())
            .unwrap_or(0);
        assert!(
            lines <= 1,
            "round {round}: turn {} shell ran {lines} times",
            t + 1
        );
        if lines == 1 {
            assert!(
                shell_started.contains(&(t as u64 + 1)),
                "round {round}: turn {} shell ran without its journaled intent",
                t + 1
            );
        }
    }
}

/// Group commit under fire: a long run killed 150 times at random moments (kills land
/// mid-commit, mid-request, mid-tool and while a resume starts up), its journal checked after
/// each kill, then resumed to the end. The kill window widens while a round makes no progress,
/// so a slow machine only takes longer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundreds_of_random_sigkills_keep_the_journal_exact() {
    // Under the default limit of 200 turns.
    const LONG: usize = 120;
    const KILLS: usize = 150;
    let mut script: Vec<Turn> = (0..LONG)
        .map(|t| {
            let mut turn = turn(&[(
                "shell",
                // Output of its own each turn: the loop detector must not see a stalled agent.
                json!({"command": format!("echo ran >> mark_{t}.txt; echo turn {t} done")}),
            )]);
            turn.delay = Some(Duration::from_millis(15));
            turn
        })
        .collect();
    script.push(turn(&[("finish", json!({"summary": "done"}))]));
    let server = ScriptedServer::start(script).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let base = server.base_url();
    let (w, h) = (ws.path().to_path_buf(), home.path().to_path_buf());
    let kills = tokio::task::spawn_blocking(move || {
        let mut rng = Lcg(0xdecaf);
        let mut kills = 0;
        let mut window_ms = 60;
        let mut last_len = 0;
        for round in 0.. {
            let mut child = start_or_resume(round, &w, &h, &base);
            // After the kills, the run is resumed to its end.
            let deadline = (kills < KILLS)
                .then(|| Instant::now() + Duration::from_millis(20 + rng.next_ms(window_ms)));
            let finished = loop {
                if let Some(status) = child.try_wait().unwrap() {
                    // While killing, a pause (3) is the agent's business — several interrupted
                    // calls in a row look like a stall — and the next round resumes it; after
                    // the kills the run must finish.
                    let pause_while_killing = status.code() == Some(3) && kills < KILLS;
                    if pause_while_killing {
                        break false;
                    }
                    if status.code() != Some(0) {
                        let journal = journal(&w, &h);
                        let tail: Vec<String> = journal
                            .iter()
                            .rev()
                            .take(6)
                            .map(|e| e.to_string())
                            .collect();
                        panic!(
                            "round {round}: baton exited with {status:?}; last events: {tail:#?}"
                        );
                    }
                    break true;
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    child.kill().unwrap();
                    child.wait().unwrap();
                    kills += 1;
                    break false;
                }
                std::thread::sleep(Duration::from_millis(2));
            };
            let journal = journal(&w, &h);
            check_journal(&journal, &w, LONG, round);
            if finished {
                return kills;
            }
            assert!(
                round < 10 * KILLS,
                "the run did not finish after {round} rounds"
            );
            // No progress this round: give the next one more time (slow start-up).
            if journal.len() == last_len {
                window_ms = (window_ms * 2).min(5_000);
            } else {
                window_ms = 60;
            }
            last_len = journal.len();
        }
        unreachable!()
    })
    .await
    .unwrap();
    eprintln!("torture: {kills} SIGKILLs before the {LONG}-turn run finished");
    assert!(kills >= 100, "the run finished after only {kills} SIGKILLs");
    let journal = journal(ws.path(), home.path());
    assert_eq!(of_type(&journal, "run_finished").len(), 1);
    // Every turn answered once; a turn asked again only for answers never journaled.
    let requests = server.requests_per_turn();
    assert_eq!(requests.len(), LONG + 1);
    for (t, n) in requests.iter().enumerate() {
        let turn = t as u64 + 1;
        let attempts = of_type(&journal, "model_call_started")
            .into_iter()
            .filter(|e| e["turn"] == turn)
            .count();
        assert!(
            *n <= attempts,
            "turn {turn}: {n} requests, {attempts} attempts"
        );
    }
}
