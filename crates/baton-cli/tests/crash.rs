#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Crash test with real processes and real SIGKILL: kill `baton` at several points of a run,
//! resume each time, and compare with an uninterrupted run of the same script.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

/// Turn 2's answer is held back so that baton can be killed with the request in flight; turn 3
/// runs a slow command so that baton can be killed while it runs.
fn script() -> Vec<Turn> {
    let mut t2 = turn(&[("write_file", json!({"path": "b.txt", "content": "two\n"}))]);
    t2.delay = Some(Duration::from_millis(1500));
    vec![
        turn(&[
            ("write_file", json!({"path": "a.txt", "content": "one\n"})),
            ("read_file", json!({"path": "a.txt"})),
        ]),
        t2,
        turn(&[("shell", json!({"command": "sleep 2; echo slept"}))]),
        turn(&[(
            "edit_file",
            json!({"path": "a.txt", "old_string": "one", "new_string": "uno"}),
        )]),
        turn(&[("write_file", json!({"path": "c.txt", "content": "three\n"}))]),
        turn(&[("finish", json!({"summary": "done"}))]),
    ]
}

fn run_cmd(
    server: &ScriptedServer,
    ws: &std::path::Path,
    home: &std::path::Path,
) -> std::process::Command {
    let mut cmd = baton(ws, home);
    cmd.args([
        "run",
        "--base-url",
        &server.base_url(),
        "--model",
        "m",
        "--json",
        "crash test goal",
    ]);
    cmd
}

fn resume_cmd(ws: &std::path::Path, home: &std::path::Path) -> std::process::Command {
    let mut cmd = baton(ws, home);
    cmd.args(["resume", "--last", "--json"]);
    cmd
}

/// Runs `cmd`, waits for an event matching `at`, then SIGKILLs the process.
fn kill_at(cmd: std::process::Command, at: impl Fn(&Value) -> bool, what: &str) {
    kill_at_after(cmd, at, || {}, what)
}

fn kill_at_after(
    cmd: std::process::Command,
    at: impl Fn(&Value) -> bool,
    before_kill: impl Fn(),
    what: &str,
) {
    let (mut child, mut events) = spawn_json(cmd);
    let seen = events.until(at);
    assert!(seen.is_some(), "baton ended before reaching: {what}");
    before_kill();
    child.kill().expect("SIGKILL baton");
    child.wait().unwrap();
}

fn is(kind: &'static str, extra: impl Fn(&Value) -> bool) -> impl Fn(&Value) -> bool {
    move |e| e["type"] == kind && extra(e)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_runs_resume_to_the_same_result_without_repeating_finished_work() {
    // Reference: an uninterrupted run.
    let reference_server = ScriptedServer::start(script()).await;
    let ref_ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let cmd = run_cmd(&reference_server, ref_ws.path(), home.path());
    let out = tokio::task::spawn_blocking(move || {
        let mut cmd = cmd;
        cmd.output()
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reference_journal = journal(ref_ws.path(), home.path());

    // The same script, killed four times.
    let server = ScriptedServer::start(script()).await;
    let ws = tempfile::tempdir().unwrap();
    let (w, h) = (ws.path().to_path_buf(), home.path().to_path_buf());
    let first = run_cmd(&server, &w, &h);
    let received = server.received_handle();
    let final_out = tokio::task::spawn_blocking(move || {
        // 1. While turn 2's model request is in flight (its answer is delayed).
        // The intent is journaled before the request is sent: wait until the server has it.
        let in_flight = || {
            for _ in 0..500 {
                if received.lock().unwrap().iter().any(|r| r.turn_index == 1) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            panic!("the turn 2 request never reached the server");
        };
        kill_at_after(
            first,
            is("model_call_started", |e| e["turn"] == 2),
            in_flight,
            "turn 2 model call",
        );
        // 2. Right after a tool finished (turn 2's write).
        kill_at(
            resume_cmd(&w, &h),
            is("tool_call_finished", |e| e["turn"] == 2),
            "turn 2 tool result",
        );
        // 3. While the shell tool runs `sleep 2`.
        kill_at(
            resume_cmd(&w, &h),
            is("tool_call_started", |e| e["name"] == "shell"),
            "shell start",
        );
        // 4. Between turns.
        kill_at(
            resume_cmd(&w, &h),
            is("turn_finished", |e| e["turn"] == 4),
            "end of turn 4",
        );
        resume_cmd(&w, &h).output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(
        final_out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&final_out.stderr)
    );

    // Same workspace, same number of completed turns and model calls.
    assert_eq!(snapshot_files(ws.path()), snapshot_files(ref_ws.path()));
    let journal = journal(ws.path(), home.path());
    assert_eq!(
        of_type(&journal, "turn_finished").len(),
        of_type(&reference_journal, "turn_finished").len()
    );
    assert_eq!(
        of_type(&journal, "model_call_finished").len(),
        of_type(&reference_journal, "model_call_finished").len()
    );
    assert_eq!(of_type(&journal, "run_resumed").len(), 4);

    // The server never got a second request for a turn whose answer had been journaled: every
    // request was journaled as an attempt before it was sent, every turn has one answer, and
    // only turn 2 (killed in flight, its answer never received) was asked for twice.
    let requests = server.requests_per_turn();
    assert_eq!(requests.len(), 6);
    assert_eq!(requests[1], 2, "{requests:?}");
    for (t, n) in requests.iter().enumerate() {
        let turn = t as u64 + 1;
        let attempts = of_type(&journal, "model_call_started")
            .into_iter()
            .filter(|e| e["turn"] == turn)
            .count();
        let answers = of_type(&journal, "model_call_finished")
            .into_iter()
            .filter(|e| e["turn"] == turn)
            .count();
        assert_eq!(answers, 1, "turn {turn}");
        assert!(
            *n <= attempts,
            "turn {turn}: {n} requests but {attempts} journaled attempts"
        );
    }
    let turn2_attempts: Vec<&Value> = of_type(&journal, "model_call_started")
        .into_iter()
        .filter(|e| e["turn"] == 2)
        .collect();
    assert_eq!(turn2_attempts.len(), 2);
    assert_eq!(
        turn2_attempts[0]["request_sha256"], turn2_attempts[1]["request_sha256"],
        "resent request differs"
    );

    // Each finished tool call ran once: one write of b.txt in the journal.
    let b_writes = of_type(&journal, "tool_call_started")
        .into_iter()
        .filter(|e| e["arguments"].as_str().unwrap().contains("b.txt"))
        .count();
    assert_eq!(b_writes, 1);

    // The interrupted shell call was reported to the model, not silently re-run or dropped.
    let shell_result = of_type(&journal, "tool_call_finished")
        .into_iter()
        .find(|e| e["call_id"] == "call-2-0")
        .unwrap()
        .clone();
    assert_eq!(shell_result["result"]["outcome"], "interrupted");
    let turn4_request = server
        .received()
        .into_iter()
        .find(|r| r.turn_index == 3)
        .unwrap();
    let told = turn4_request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| {
            m["role"] == "tool" && m["content"].as_str().unwrap_or("").contains("interrupted")
        });
    assert!(
        told,
        "the model was not told that the shell call was interrupted"
    );

    // Replaying the journal gives a run that is finished (status reads the same journal).
    let status = baton(ws.path(), home.path())
        .arg("status")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&status.stdout).contains("finished"));
}
