#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 17: the Responses API (`POST /v1/responses`), the only wire of the `gpt-5*-codex`
//! models, driven statelessly: `store: false`, the whole input every turn, and each answer's
//! reasoning items sent back — encrypted content unchanged — before the calls they led to. The
//! server here refuses a request that drops them, as OpenAI's does ("Item 'rs_…' of type
//! 'reasoning' was provided without its required following item" and kin).

mod support;

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use support::*;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Opaque as OpenAI's are; `+`, `/` and `=` would show any re-encoding.
const ENCRYPTED: [&str; 2] = [
    "gAAAAABpSECRETfirst+reasoning/blob==",
    "gAAAAABpSECRETsecond+reasoning/blob=",
];

const MISSING: &str = r#"{"error":{"message":"Item 'fc_0a' of type 'function_call' was provided without its required 'reasoning' item: 'rs_0'.","type":"invalid_request_error","param":"input","code":null}}"#;

fn reasoning_item(turn: usize) -> Value {
    json!({"id": format!("rs_{turn}"), "type": "reasoning", "status": "completed",
           "summary": [{"type": "summary_text", "text": format!("**Plan {turn}** write the files")}],
           "encrypted_content": ENCRYPTED[turn]})
}

fn calls(turn: usize) -> Vec<Value> {
    match turn {
        // Two calls at once: the model may call several tools in one answer.
        0 => vec![
            json!({"id": "fc_0a", "type": "function_call", "status": "completed", "call_id": "call_a",
                   "name": "write_file", "arguments": "{\"path\":\"a.txt\",\"content\":\"A\\n\"}"}),
            json!({"id": "fc_0b", "type": "function_call", "status": "completed", "call_id": "call_b",
                   "name": "write_file", "arguments": "{\"path\":\"b.txt\",\"content\":\"B\\n\"}"}),
        ],
        _ => vec![
            json!({"id": "fc_1", "type": "function_call", "status": "completed", "call_id": "call_f",
                   "name": "finish", "arguments": "{\"summary\":\"both written\"}"}),
        ],
    }
}

struct ResponsesLike {
    received: Arc<Mutex<Vec<Value>>>,
    /// Answers given instead of the script to the first requests (faults), in order.
    faults: Mutex<std::collections::VecDeque<ResponseTemplate>>,
    /// Every request body as it arrived, byte for byte.
    raw: Arc<Mutex<Vec<Vec<u8>>>>,
    /// The answers to these requests (0-based) are held back 30 s, to kill baton mid-request.
    delayed: Vec<usize>,
}

impl ResponsesLike {
    /// Whether the input carries each earlier answer's reasoning item right before its calls.
    fn history_is_whole(input: &[Value], turns: usize) -> bool {
        (0..turns).all(|turn| {
            let Some(at) = input.iter().position(|i| {
                i["type"] == "reasoning" && i["encrypted_content"] == ENCRYPTED[turn]
            }) else {
                return false;
            };
            let first_call = &calls(turn)[0]["call_id"];
            input
                .get(at + 1)
                .is_some_and(|next| next["call_id"] == *first_call)
        })
    }
}

impl Respond for ResponsesLike {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        self.received.lock().unwrap().push(body.clone());
        let request_number = {
            let mut raw = self.raw.lock().unwrap();
            raw.push(request.body.clone());
            raw.len() - 1
        };
        if let Some(fault) = self.faults.lock().unwrap().pop_front() {
            return fault;
        }
        let input = body["input"].as_array().unwrap();
        // The second request is the one with tool results in it.
        let turn = usize::from(input.iter().any(|i| i["type"] == "function_call_output"));
        if !Self::history_is_whole(input, turn) {
            return ResponseTemplate::new(400)
                .insert_header("content-type", "application/json")
                .set_body_string(MISSING);
        }
        let mut output = vec![reasoning_item(turn)];
        output.extend(calls(turn));
        let usage = json!({"input_tokens": 500, "input_tokens_details": {"cached_tokens": 400},
                           "output_tokens": 80, "output_tokens_details": {"reasoning_tokens": 50},
                           "total_tokens": 580});
        let response = |status: &str, output: Value| {
            json!({"id": format!("resp_{turn}"), "object": "response", "status": status,
                   "model": "gpt-5.1-codex-2025", "output": output, "usage": usage,
                   "error": null, "incomplete_details": null})
        };
        let delay = if self.delayed.contains(&request_number) {
            std::time::Duration::from_secs(30)
        } else {
            std::time::Duration::ZERO
        };
        if body["stream"] != true {
            return ResponseTemplate::new(200)
                .set_body_json(response("completed", json!(output)))
                .set_delay(delay);
        }
        let mut sse = String::new();
        let mut event = |data: Value| {
            sse.push_str(&format!(
                "event: {}\ndata: {data}\n\n",
                data["type"].as_str().unwrap()
            ));
        };
        event(json!({"type": "response.created", "response": response("in_progress", json!([]))}));
        for (index, item) in output.iter().enumerate() {
            let mut added = item.clone();
            if item["type"] == "function_call" {
                added["arguments"] = json!("");
            }
            event(
                json!({"type": "response.output_item.added", "output_index": index, "item": added}),
            );
            if item["type"] == "reasoning" {
                event(
                    json!({"type": "response.reasoning_summary_text.delta", "output_index": index,
                             "summary_index": 0, "delta": item["summary"][0]["text"]}),
                );
            } else {
                let args = item["arguments"].as_str().unwrap();
                let (head, tail) = args.split_at(args.len() / 2);
                for piece in [head, tail] {
                    event(json!({"type": "response.function_call_arguments.delta",
                                 "output_index": index, "item_id": item["id"], "delta": piece}));
                }
                event(json!({"type": "response.function_call_arguments.done",
                             "output_index": index, "item_id": item["id"], "arguments": args}));
            }
            event(
                json!({"type": "response.output_item.done", "output_index": index, "item": item}),
            );
        }
        event(
            json!({"type": "response.completed", "response": response("completed", json!(output))}),
        );
        ResponseTemplate::new(200)
            .insert_header("content-type", "text/event-stream")
            .set_body_string(sse)
            .set_delay(delay)
    }
}

async fn tool_loop(streamed: bool) {
    let received = tool_loop_with(streamed, Vec::new()).await;
    assert_eq!(received.len(), 2, "no request was refused");
}

/// Runs the two-turn loop against the server, the first requests answered by `faults`; checks
/// what a clean run must show and returns every request the server got.
async fn tool_loop_with(streamed: bool, faults: Vec<ResponseTemplate>) -> Vec<Value> {
    let server = MockServer::start().await;
    let received = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(ResponsesLike {
            received: received.clone(),
            faults: Mutex::new(faults.into()),
            raw: Arc::default(),
            delayed: Vec::new(),
        })
        .mount(&server)
        .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.uri());
    let mut args = vec![
        "run",
        "--base-url",
        &base,
        "--model",
        "gpt-5.1-codex",
        "--wire-api",
        "responses",
        // The only verbosity the codex models accept.
        "--verbosity",
        "medium",
    ];
    if !streamed {
        args.push("--no-stream");
    }
    args.push("Write a.txt and b.txt");
    let out = baton_blocking(ws.path(), home.path(), &args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "A\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("b.txt")).unwrap(),
        "B\n"
    );
    assert!(stderr.contains("thinks: **Plan 0**"), "{stderr}");

    let all = received.lock().unwrap().clone();
    // The faulted attempts are retries of the first request: the same body each time.
    let received: Vec<Value> = all[all.len() - 2..].to_vec();
    for earlier in &all[..all.len() - 2] {
        assert_eq!(earlier, &received[0], "a retry sends the same request");
    }
    for body in &received {
        assert_eq!(body["text"], json!({"verbosity": "medium"}));
        // The codex profile's default: the provider compacts (80% of the 400k window).
        assert_eq!(
            body["context_management"],
            json!([{"type": "compaction", "compact_threshold": 320000}])
        );
        assert_eq!(body["store"], false);
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(body["stream"], streamed);
        assert_eq!(body["parallel_tool_calls"], true);
        assert_eq!(body["tools"][0]["type"], "function");
    }
    // One cache key for the run: the same prefix routes to the same cache.
    let key = received[0]["prompt_cache_key"].as_str().unwrap();
    assert!(key.starts_with("baton-"), "{key}");
    assert_eq!(received[1]["prompt_cache_key"], key);
    // The second input: the first answer's reasoning item — everything but its id and status,
    // the encrypted content unchanged — then both calls, then both results.
    let input = received[1]["input"].as_array().unwrap();
    let at = input.iter().position(|i| i["type"] == "reasoning").unwrap();
    let mut expected = reasoning_item(0);
    expected.as_object_mut().unwrap().remove("id");
    expected.as_object_mut().unwrap().remove("status");
    assert_eq!(input[at], expected);
    assert!(
        serde_json::to_string(&received[1])
            .unwrap()
            .contains(ENCRYPTED[0]),
        "byte for byte"
    );
    let kinds: Vec<&str> = input[at..]
        .iter()
        .map(|i| i["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds[..5],
        [
            "reasoning",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output"
        ]
    );
    assert_eq!(input[at + 1]["call_id"], "call_a");
    assert_eq!(input[at + 2]["call_id"], "call_b");

    // Journaled verbatim: the item as the server sent it, id and all.
    let events = journal(ws.path(), home.path());
    let finished = of_type(&events, "model_call_finished");
    let part = &finished[0]["message"]["reasoning"][0];
    assert_eq!(part["type"], "item");
    assert_eq!(
        serde_json::from_str::<Value>(part["json"].as_str().unwrap()).unwrap(),
        reasoning_item(0)
    );
    assert_eq!(part["summary"], "**Plan 0** write the files");
    assert_eq!(
        finished[0]["message"]["tool_calls"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // Usage: cached input and reasoning tokens counted.
    let status = baton_blocking(ws.path(), home.path(), &["status", "--json"]).await;
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    let tokens = &status["run"]["tokens"];
    assert_eq!(tokens["input"], 1000);
    assert_eq!(tokens["cached"], 800);
    assert_eq!(tokens["reasoning"], 100);
    all
}

/// The faults the other wires are tested with, on this one: each is retried and the run ends
/// as a clean one does (same files, same second request), nothing billed twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_server_errors_cut_streams_and_in_stream_failures_are_retried() {
    let error = |status: u16, body: &str| {
        ResponseTemplate::new(status)
            .insert_header("content-type", "application/json")
            .set_body_string(body.to_string())
    };
    let cut = ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_string(format!(
            "event: response.output_item.done\ndata: {}\n\n",
            json!({"type": "response.output_item.done", "output_index": 0, "item": reasoning_item(0)})
        ));
    let failed = ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_string(format!(
            "event: response.failed\ndata: {}\n\n",
            json!({"type": "response.failed", "response": {"id": "resp_x", "status": "failed",
                   "output": [], "error": {"code": "server_error", "message": "The server had an error"}}})
        ));
    let faults = vec![
        error(429, r#"{"error":{"message":"Rate limit reached for gpt-5.1-codex","type":"requests","code":"rate_limit_exceeded"}}"#)
            .insert_header("retry-after", "1"),
        error(500, r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}"#),
        cut,
        failed,
    ];
    let all = tool_loop_with(true, faults).await;
    assert_eq!(
        all.len(),
        6,
        "four faulted attempts, then the two real requests"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_responses_run_carries_its_reasoning_items_forward() {
    tool_loop(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_responses_run_carries_its_reasoning_items_forward() {
    tool_loop(false).await;
}

#[test]
fn a_bad_wire_api_is_told_in_words() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = baton(ws.path(), home.path())
        .args(["run", "--wire-api", "grpc", "x"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("expected `chat` (Chat Completions) or `responses`"),
        "{stderr}"
    );
    let out = baton(ws.path(), home.path())
        .args(["run", "--verbosity", "loud", "x"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("expected `low`, `medium` or `high`"),
        "{stderr}"
    );
}

/// kill -9 while the request for a reasoning answer is in flight (before the answer is
/// journaled), right after the answer is journaled, and while the next request — the one that
/// carries that reasoning back — is in flight: each resume rebuilds the same request byte for
/// byte (and digest), and no answered call is asked for again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_around_a_reasoning_answer_the_resumed_request_is_the_same_bytes() {
    let server = MockServer::start().await;
    let received = Arc::new(Mutex::new(Vec::new()));
    let raw = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(ResponsesLike {
            received: received.clone(),
            faults: Mutex::default(),
            raw: raw.clone(),
            delayed: vec![0, 2],
        })
        .mount(&server)
        .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.uri());
    let (w, h) = (ws.path().to_path_buf(), home.path().to_path_buf());
    let raw_seen = raw.clone();
    let out = tokio::task::spawn_blocking(move || {
        let mut run = baton(&w, &h);
        run.args([
            "run",
            "--base-url",
            &base,
            "--model",
            "gpt-5.1-codex",
            "--wire-api",
            "responses",
            "--json",
            "Write a.txt and b.txt",
        ]);
        let wait_for_requests = |n: usize| {
            for _ in 0..500 {
                if raw_seen.lock().unwrap().len() >= n {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            panic!("request {n} never reached the server");
        };
        // 1. Turn 1's request is in flight (its reasoning answer not yet journaled): kill.
        let (mut child, mut events) = spawn_json(run);
        assert!(
            events
                .until(|e| e["type"] == "model_call_started")
                .is_some()
        );
        wait_for_requests(1);
        child.kill().unwrap();
        child.wait().unwrap();
        // 2. Resumed: the reasoning answer of turn 1 is journaled: kill at once.
        let mut resume = baton(&w, &h);
        resume.args(["resume", "--last", "--json"]);
        let (mut child, mut events) = spawn_json(resume);
        assert!(
            events
                .until(|e| e["type"] == "model_call_finished")
                .is_some()
        );
        child.kill().unwrap();
        child.wait().unwrap();
        // 3. Resumed: the request carrying the reasoning item back is in flight: kill.
        let mut resume = baton(&w, &h);
        resume.args(["resume", "--last", "--json"]);
        let (mut child, mut events) = spawn_json(resume);
        assert!(
            events
                .until(|e| e["type"] == "model_call_started" && e["turn"] == 2)
                .is_some()
        );
        wait_for_requests(3);
        child.kill().unwrap();
        child.wait().unwrap();
        baton(&w, &h).args(["resume", "--last"]).output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let raw = raw.lock().unwrap().clone();
    assert_eq!(
        raw.len(),
        4,
        "each turn asked twice: once killed in flight, once answered"
    );
    assert_eq!(
        raw[0], raw[1],
        "the resumed first request is the same bytes"
    );
    assert_eq!(
        raw[2], raw[3],
        "the resumed second request is the same bytes"
    );
    let events = journal(ws.path(), home.path());
    let started: Vec<&Value> = of_type(&events, "model_call_started")
        .into_iter()
        .filter(|e| e["turn"] == 2)
        .collect();
    assert_eq!(started.len(), 2);
    assert_eq!(started[0]["request_sha256"], started[1]["request_sha256"]);
    // Billed once per answer: two answers, 2 × 500 input tokens.
    assert_eq!(of_type(&events, "model_call_finished").len(), 2);
    assert!(String::from_utf8_lossy(&raw[3]).contains(ENCRYPTED[0]));
    // Step 2 kills "at once" after turn 1's answer is journaled, but a loaded machine may let
    // the child start its calls first: a call whose intent was journaled and that was killed
    // before its result is reported `interrupted` (never run twice), and its file is then
    // absent. Each file is there exactly when its call's result says so.
    for (call, file, content) in [("call_a", "a.txt", "A\n"), ("call_b", "b.txt", "B\n")] {
        let outcomes: Vec<&Value> = of_type(&events, "tool_call_finished")
            .into_iter()
            .filter(|e| e["call_id"] == call)
            .map(|e| &e["result"]["outcome"])
            .collect();
        assert_eq!(outcomes.len(), 1, "{call}: one result, never run twice");
        let written = std::fs::read_to_string(ws.path().join(file)).ok();
        if outcomes[0] == "success" {
            assert_eq!(written.as_deref(), Some(content), "{file}");
        } else {
            assert_eq!(outcomes[0], "interrupted", "{call}");
        }
    }
}

/// Server-side compaction (`[context] compaction = "provider"`): the server compacts in the
/// middle of the run and returns an opaque compaction item; later requests carry it and leave
/// out what came before it (system messages stay). Killed while the request after it is in
/// flight, the resumed run sends the same bytes.
struct Compacting {
    raw: Arc<Mutex<Vec<Vec<u8>>>>,
    /// The N-th request (0-based) is answered this late, to kill baton mid-request.
    delay: Option<(usize, std::time::Duration)>,
}

const COMPACTED: &str = "gAAAAABpCOMPACTED+history/of=turn1==";

impl Respond for Compacting {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let number = {
            let mut raw = self.raw.lock().unwrap();
            raw.push(request.body.clone());
            raw.len() - 1
        };
        let input = body["input"].as_array().unwrap();
        let last_output = input
            .iter()
            .rev()
            .find(|i| i["type"] == "function_call_output")
            .map(|i| i["call_id"].as_str().unwrap().to_string());
        let call = |id: &str, name: &str, args: Value| {
            json!({"id": format!("fc_{id}"), "type": "function_call", "status": "completed",
                   "call_id": id, "name": name, "arguments": args.to_string()})
        };
        let output = match last_output.as_deref() {
            None => vec![
                reasoning_item(0),
                call(
                    "call_a",
                    "write_file",
                    json!({"path": "a.txt", "content": "A\n"}),
                ),
            ],
            // The input passed the threshold: the server compacts first.
            Some("call_a") => vec![
                json!({"id": "cmp_1", "type": "compaction", "encrypted_content": COMPACTED}),
                reasoning_item(1),
                call(
                    "call_b",
                    "write_file",
                    json!({"path": "b.txt", "content": "B\n"}),
                ),
            ],
            _ => vec![call("call_f", "finish", json!({"summary": "both written"}))],
        };
        let delay = self
            .delay
            .filter(|(n, _)| *n == number)
            .map_or(std::time::Duration::ZERO, |(_, d)| d);
        ResponseTemplate::new(200)
            .set_body_json(
                json!({"id": "resp", "object": "response", "status": "completed",
                "model": "gpt-5.1-codex", "output": output,
                "usage": {"input_tokens": 500, "output_tokens": 50}}),
            )
            .set_delay(delay)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_compaction_mid_run_is_carried_forward_and_survives_kill_9() {
    let server = MockServer::start().await;
    let raw = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("POST"))
        .and(path("/v1/responses"))
        .respond_with(Compacting {
            raw: raw.clone(),
            delay: Some((2, std::time::Duration::from_secs(30))),
        })
        .mount(&server)
        .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    write_user_config(
        home.path(),
        "[context]\ncompaction = \"provider\"\nwindow = 100000\n",
    );
    let base = format!("{}/v1", server.uri());
    let (w, h) = (ws.path().to_path_buf(), home.path().to_path_buf());
    let raw_seen = raw.clone();
    let out = tokio::task::spawn_blocking(move || {
        let mut run = baton(&w, &h);
        run.args([
            "run",
            "--base-url",
            &base,
            "--model",
            "gpt-5.1-codex",
            "--wire-api",
            "responses",
            "--no-stream",
            "--json",
            "Write a.txt and b.txt",
        ]);
        // The third request — the first after the compaction — is held: kill baton then.
        let (mut child, mut events) = spawn_json(run);
        assert!(
            events
                .until(|e| e["type"] == "model_call_started" && e["turn"] == 3)
                .is_some()
        );
        for _ in 0..500 {
            if raw_seen.lock().unwrap().len() >= 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        baton(&w, &h).args(["resume", "--last"]).output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("b.txt")).unwrap(),
        "B\n"
    );
    let raw = raw.lock().unwrap().clone();
    assert_eq!(
        raw.len(),
        4,
        "three turns, the third asked twice (killed in flight)"
    );
    assert_eq!(raw[2], raw[3], "the resumed request is the same bytes");
    let bodies: Vec<Value> = raw
        .iter()
        .map(|b| serde_json::from_slice(b).unwrap())
        .collect();
    // Every request asks for server-side compaction at 80 % of the window.
    for body in &bodies {
        assert_eq!(
            body["context_management"],
            json!([{"type": "compaction", "compact_threshold": 80000}])
        );
    }
    // After the compaction: system messages, then the compaction item; nothing from before it.
    let input = bodies[2]["input"].as_array().unwrap();
    let first_other = input.iter().position(|i| i["role"] != "system").unwrap();
    assert_eq!(
        input[first_other],
        json!({"type": "compaction", "encrypted_content": COMPACTED})
    );
    let text = serde_json::to_string(&bodies[2]).unwrap();
    assert!(
        !text.contains(ENCRYPTED[0]),
        "turn 1's reasoning is behind the compaction"
    );
    assert!(
        !text.contains("call_a"),
        "turn 1's call is behind the compaction"
    );
    assert!(text.contains(ENCRYPTED[1]) && text.contains("call_b"));
    // baton wrote no summary of its own; the item is journaled with the answer.
    let events = journal(ws.path(), home.path());
    assert!(of_type(&events, "compaction_started").is_empty());
    let finished = of_type(&events, "model_call_finished");
    let part = &finished[1]["message"]["reasoning"][0];
    assert!(part["json"].as_str().unwrap().contains(COMPACTED), "{part}");
    assert_eq!(finished.len(), 3, "each answer billed once");
}

#[test]
fn provider_compaction_on_a_wire_that_cannot_compact_is_refused() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    write_user_config(home.path(), "[context]\ncompaction = \"provider\"\n");
    let out = baton(ws.path(), home.path())
        .args([
            "run",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "x",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("needs the Responses API"), "{stderr}");
    assert!(!journal_path(ws.path(), home.path()).exists());
}
