#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Context across crashes, with the real binary and real SIGKILL: a run that compacts its
//! history is killed with a model request in flight — once after the compaction, once during
//! the summary call — and the resumed process sends byte-identical requests.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use support::*;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const SUMMARY: &str = "## Goal\nFix the parser.\n## Next step\nRun the parser tests.";

/// Which request to hold back so that baton can be killed while it is in flight.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// The first turn request that carries the handoff summary.
    FirstAfterCompaction,
    /// The first summary request.
    FirstSummaryRequest,
}

/// Answers `cat big.txt` a number of times, then `finish`; answers summary requests (tool
/// choice `none`) with a summary. Reports no usage, so estimates are the local count alone.
struct Responder {
    hold: Hold,
    turns: AtomicUsize,
    summaries: AtomicUsize,
    after_compaction: AtomicUsize,
    bodies: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.bodies.lock().unwrap().push(request.body.clone());
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let message = if body["tool_choice"] == "none" {
            let n = self.summaries.fetch_add(1, Ordering::SeqCst);
            let held = self.hold == Hold::FirstSummaryRequest && n == 0;
            return answer(json!({"role": "assistant", "content": SUMMARY}), held);
        } else if body.to_string().contains("Handoff summary") {
            let n = self.after_compaction.fetch_add(1, Ordering::SeqCst);
            let held = self.hold == Hold::FirstAfterCompaction && n == 0;
            return answer(tool_call("finish", json!({"summary": "done"})), held);
        } else {
            let n = self.turns.fetch_add(1, Ordering::SeqCst);
            if n < 40 {
                tool_call("shell", json!({"command": "cat big.txt"}))
            } else {
                tool_call("finish", json!({"summary": "never compacted"}))
            }
        };
        answer(message, false)
    }
}

fn tool_call(name: &str, arguments: Value) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function",
           "function": {"name": name, "arguments": arguments.to_string()}}]})
}

fn answer(message: Value, held: bool) -> ResponseTemplate {
    let template = ResponseTemplate::new(200).set_body_json(json!({
        "id": "x", "object": "chat.completion", "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}));
    if held {
        template.set_delay(Duration::from_secs(600))
    } else {
        template
    }
}

async fn server(hold: Hold) -> (MockServer, Arc<Mutex<Vec<Vec<u8>>>>) {
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(Responder {
            hold,
            turns: AtomicUsize::new(0),
            summaries: AtomicUsize::new(0),
            after_compaction: AtomicUsize::new(0),
            bodies: bodies.clone(),
        })
        .mount(&server)
        .await;
    (server, bodies)
}

fn workspace() -> (tempfile::TempDir, tempfile::TempDir) {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let text: String = (0..60)
        .map(|i| {
            format!(
                "line {i}: module_{i} computes value {} from parse_input\n",
                i * 7
            )
        })
        .collect();
    std::fs::write(ws.path().join("big.txt"), text).unwrap();
    std::fs::create_dir_all(ws.path().join(".baton")).unwrap();
    std::fs::write(
        ws.path().join(".baton/config.toml"),
        "[context]\nwindow = 8000\nmasking = false\nkeep_recent_turns = 1\n",
    )
    .unwrap();
    trust_workspace(ws.path(), home.path());
    (ws, home)
}

/// Starts a run, waits until the held request arrives, SIGKILLs baton, resumes, and returns
/// the bodies of the held request and of its resent copy.
async fn kill_while_held_then_resume(hold: Hold, is_held: impl Fn(&Value) -> bool) -> Vec<Value> {
    let (server, bodies) = server(hold).await;
    let (ws, home) = workspace();
    let base = format!("{}/v1", server.uri());
    let mut cmd = baton(ws.path(), home.path());
    cmd.args([
        "run",
        "--base-url",
        &base,
        "--model",
        "m",
        "--no-stream",
        "--json",
        "Fix the parser",
    ]);
    let (mut child, _events) = spawn_json(cmd);
    let held_index = loop {
        let found = bodies
            .lock()
            .unwrap()
            .iter()
            .position(|b| is_held(&serde_json::from_slice(b).unwrap()));
        if let Some(i) = found {
            break i;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "baton ended before the held request"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    child.kill().unwrap();
    child.wait().unwrap();

    let out = baton(ws.path(), home.path())
        .args(["resume", "--last", "--json"])
        .output()
        .unwrap();
    assert_finished(&out);
    let bodies = bodies.lock().unwrap().clone();
    let held = &bodies[held_index];
    let resent = &bodies[held_index + 1];
    // Byte for byte: the resumed process rebuilt exactly the same context.
    assert_eq!(
        String::from_utf8_lossy(held),
        String::from_utf8_lossy(resent),
        "the resent request differs from the one in flight"
    );
    journal(ws.path(), home.path())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_after_compaction_resends_the_same_request() {
    let journal = kill_while_held_then_resume(Hold::FirstAfterCompaction, |body| {
        body["tool_choice"] != "none" && body.to_string().contains("Handoff summary")
    })
    .await;
    assert_eq!(of_type(&journal, "compaction_finished").len(), 1);
    assert_eq!(of_type(&journal, "run_finished").len(), 1);
    let resumed = of_type(&journal, "run_resumed");
    assert_eq!(resumed.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_during_the_summary_call_redoes_only_the_summary() {
    let journal = kill_while_held_then_resume(Hold::FirstSummaryRequest, |body| {
        body["tool_choice"] == "none"
    })
    .await;
    assert_eq!(of_type(&journal, "compaction_started").len(), 1);
    assert_eq!(of_type(&journal, "compaction_finished").len(), 1);
    assert_eq!(of_type(&journal, "run_finished").len(), 1);
    let finished = of_type(&journal, "compaction_finished")[0];
    assert!(
        finished["summary"]
            .as_str()
            .unwrap()
            .contains("Run the parser tests")
    );
}
