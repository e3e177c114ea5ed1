#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Logs and traces of the real `baton` binary: the JSON log file of a run, and OpenTelemetry
//! spans received by an OTLP/HTTP receiver on 127.0.0.1 (a wiremock server accepting
//! `POST /v1/traces`, bodies decoded as OTLP protobuf).

mod support;

use std::collections::HashMap;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use serde_json::{Value, json};
use support::*;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const SECRET: &str = "sk-test-0bservability-s3cret";

fn script() -> Vec<Turn> {
    vec![
        turn(&[("read_file", json!({"path": "notes.txt"}))]),
        turn(&[("finish", json!({"summary": "read the notes"}))]),
    ]
}

async fn receiver() -> MockServer {
    slow_receiver(std::time::Duration::ZERO).await
}

/// A receiver that answers each export after `delay` (so the exporter is still busy when the
/// run ends, and only the final flush gets the rest out).
async fn slow_receiver(delay: std::time::Duration) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .respond_with(ResponseTemplate::new(200).set_delay(delay))
        .mount(&server)
        .await;
    server
}

/// Every span the receiver got, with the resource's `service.name` of its request.
async fn received_spans(receiver: &MockServer) -> Vec<(String, Span)> {
    let mut spans = Vec::new();
    for request in receiver.received_requests().await.unwrap() {
        assert_eq!(
            request
                .headers
                .get("content-type")
                .map(|v| v.to_str().unwrap()),
            Some("application/x-protobuf"),
            "OTLP/HTTP protobuf by default"
        );
        let decoded = ExportTraceServiceRequest::decode(request.body.as_slice())
            .expect("an OTLP protobuf trace export");
        for resource_spans in decoded.resource_spans {
            let service = resource_spans
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
                .and_then(|kv| kv.value.as_ref())
                .map(string)
                .unwrap_or_default();
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    spans.push((service.clone(), span));
                }
            }
        }
    }
    spans
}

fn string(value: &AnyValue) -> String {
    match &value.value {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        other => panic!("not a string: {other:?}"),
    }
}

fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a any_value::Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn str_attr(span: &Span, key: &str) -> String {
    match attr(span, key) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        other => panic!("span {} attribute {key}: {other:?}", span.name),
    }
}

fn int_attr(span: &Span, key: &str) -> i64 {
    match attr(span, key) {
        Some(any_value::Value::IntValue(i)) => *i,
        other => panic!("span {} attribute {key}: {other:?}", span.name),
    }
}

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("notes.txt"), "remember the milk\n").unwrap();
    ws
}

/// The run id from a `--json` stream, checking on the way that stdout holds nothing but events.
fn run_id_of(stdout: &[u8]) -> String {
    let text = String::from_utf8_lossy(stdout);
    let mut run_id = None;
    for line in text.lines() {
        let event: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("stdout line is not a JSON event ({e}): {line:?}"));
        assert!(event["type"].is_string(), "not an event: {line}");
        run_id = event["run_id"].as_str().map(str::to_owned);
    }
    run_id.expect("events on stdout")
}

#[tokio::test(flavor = "multi_thread")]
async fn traces_reach_an_otlp_receiver_as_one_tree_with_genai_attributes() {
    let model = ScriptedServer::start(script()).await;
    let receiver = receiver().await;
    let ws = workspace();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.uri())
        .env("BATON_API_KEY", SECRET)
        .args(["run", "--base-url", &model.base_url(), "--model", "m"])
        .args(["--json", "read the notes"]);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    assert_finished(&out);
    let run_id = run_id_of(&out.stdout);

    let spans = received_spans(&receiver).await;
    assert!(
        !format!("{spans:?}").contains(SECRET),
        "the API key is in a span"
    );
    let by_name = |name: &str| -> Vec<&Span> {
        spans
            .iter()
            .map(|(_, s)| s)
            .filter(|s| s.name == name)
            .collect()
    };
    // run, 2 turns, 2 model calls, 2 tool calls (read_file, finish)
    assert_eq!(
        spans.len(),
        7,
        "{:#?}",
        spans.iter().map(|(_, s)| &s.name).collect::<Vec<_>>()
    );
    for (service, _) in &spans {
        assert_eq!(service, "baton");
    }

    // One trace, derived from the run id.
    let trace = baton_telemetry::spans::trace_id(&baton_core_run_id(&run_id));
    for (_, span) in &spans {
        assert_eq!(
            span.trace_id,
            trace.to_vec(),
            "span {} in another trace",
            span.name
        );
    }

    let roots: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.parent_span_id.is_empty())
        .collect();
    assert_eq!(roots.len(), 1, "exactly one root");
    let run = roots[0];
    assert_eq!(run.name, "invoke_agent baton");
    assert_eq!(str_attr(run, "baton.run.id"), run_id);
    assert_eq!(str_attr(run, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(int_attr(run, "gen_ai.usage.input_tokens"), 100 + 101);
    assert_eq!(int_attr(run, "baton.exit_code"), 0);

    let turns: HashMap<Vec<u8>, &Span> = by_name("turn 1")
        .into_iter()
        .chain(by_name("turn 2"))
        .map(|s| (s.span_id.clone(), s))
        .collect();
    assert_eq!(turns.len(), 2);
    for turn in turns.values() {
        assert_eq!(
            turn.parent_span_id, run.span_id,
            "a turn is a child of the run"
        );
        assert!(turn.start_time_unix_nano >= run.start_time_unix_nano);
        assert!(turn.end_time_unix_nano <= run.end_time_unix_nano);
    }

    let chats = by_name("chat m");
    assert_eq!(chats.len(), 2);
    let mut inputs = Vec::new();
    for chat in &chats {
        let turn = turns
            .get(&chat.parent_span_id)
            .expect("a model call is a child of a turn");
        assert!(chat.start_time_unix_nano >= turn.start_time_unix_nano);
        assert_eq!(str_attr(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(str_attr(chat, "gen_ai.provider.name"), "openai");
        assert_eq!(str_attr(chat, "gen_ai.request.model"), "m");
        assert_eq!(str_attr(chat, "gen_ai.response.model"), "scripted");
        assert_eq!(str_attr(chat, "server.address"), "127.0.0.1");
        inputs.push((
            int_attr(chat, "gen_ai.usage.input_tokens"),
            int_attr(chat, "gen_ai.usage.output_tokens"),
        ));
        // SpanKind::Client
        assert_eq!(chat.kind, 3);
    }
    inputs.sort();
    assert_eq!(inputs, vec![(100, 10), (101, 11)], "the scripted usage");

    let tool = by_name("execute_tool read_file");
    assert_eq!(tool.len(), 1);
    let tool = tool[0];
    let tool_turn = turns.get(&tool.parent_span_id).expect("tool under a turn");
    assert_eq!(tool_turn.name, "turn 1");
    assert_eq!(str_attr(tool, "gen_ai.tool.name"), "read_file");
    assert_eq!(str_attr(tool, "gen_ai.tool.call.id"), "call-0-0");
    assert_eq!(str_attr(tool, "gen_ai.operation.name"), "execute_tool");
    let finish = by_name("execute_tool finish");
    assert_eq!(finish.len(), 1);
    assert_eq!(turns[&finish[0].parent_span_id].name, "turn 2");
}

fn baton_core_run_id(id: &str) -> baton_core::RunId {
    baton_core::RunId::from_string(id)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_whose_trace_receiver_is_down_finishes_normally() {
    // A port that was just free: nothing listens there.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let model = ScriptedServer::start(script()).await;
    let ws = workspace();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.env(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        format!("http://127.0.0.1:{closed}"),
    )
    .args(["run", "--base-url", &model.base_url(), "--model", "m"])
    .args(["--json", "read the notes"]);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    assert_finished(&out);
    run_id_of(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("OpenTelemetry export failed").count(),
        1,
        "one warning, however many exports failed: {stderr}"
    );
    let events = journal(ws.path(), home.path());
    assert_eq!(of_type(&events, "run_finished").len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_writes_a_json_log_file_without_secrets_and_keeps_stdout_clean() {
    let model = ScriptedServer::start(script()).await;
    let ws = workspace();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    // -vv: debug in the file, the most output a secret could hide in.
    cmd.env("BATON_API_KEY", SECRET)
        .args([
            "-vv",
            "run",
            "--base-url",
            &model.base_url(),
            "--model",
            "m",
        ])
        .args(["--json", "read the notes"]);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    assert_finished(&out);
    let run_id = run_id_of(&out.stdout);
    // The model server was sent the key: the test would prove nothing if it were never used.
    let sent_key = model
        .server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .any(|r| {
            r.headers
                .get("authorization")
                .is_some_and(|v| v.to_str().unwrap().contains(SECRET))
        });
    assert!(sent_key, "baton did not use the API key");

    let log = state_dir(ws.path(), home.path())
        .logs()
        .join(format!("{run_id}.trace.jsonl"));
    let text = std::fs::read_to_string(&log)
        .unwrap_or_else(|e| panic!("no log file {}: {e}", log.display()));
    assert!(!text.contains(SECRET), "the API key is in the log file");
    assert!(!String::from_utf8_lossy(&out.stderr).contains(SECRET));
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(!lines.is_empty());
    for line in &lines {
        assert_eq!(line["run_id"], run_id.as_str(), "{line}");
        assert!(line["level"].is_string() && line["timestamp"].is_string());
    }
    let messages: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["fields"]["message"].as_str())
        .collect();
    for expected in [
        "model call started",
        "model call finished",
        "tool call started",
        "tool call finished",
    ] {
        assert!(
            messages.contains(&expected),
            "no '{expected}' in the log: {messages:?}"
        );
    }
    // The supervisor and its agent process both log there (two pids, one file).
    let tool_line = lines
        .iter()
        .find(|l| l["fields"]["message"] == "tool call started")
        .unwrap();
    assert_eq!(tool_line["fields"]["tool"], "read_file");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resumed_run_continues_the_same_trace_and_exports_each_span_once() {
    let model = ScriptedServer::start(script()).await;
    let receiver = receiver().await;
    let ws = workspace();
    let home = tempfile::tempdir().unwrap();
    let run = |args: Vec<String>| {
        let mut cmd = baton(ws.path(), home.path());
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.uri())
            .args(args);
        cmd
    };
    // Pauses after one turn (exit 3), then resumes to the end.
    let mut first = run([
        "run",
        "--base-url",
        &model.base_url(),
        "--model",
        "m",
        "--max-turns",
        "1",
    ]
    .map(String::from)
    .into());
    first.args(["--json", "read the notes"]);
    let out = tokio::task::spawn_blocking(move || first.output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run_id = run_id_of(&out.stdout);
    let after_pause = received_spans(&receiver).await;
    assert!(
        after_pause
            .iter()
            .all(|(_, s)| s.name != "invoke_agent baton"),
        "the run span ends with the run, not at a pause"
    );
    let mut second = run(["resume", "--last", "--max-turns", "5", "--json"]
        .map(String::from)
        .into());
    let out = tokio::task::spawn_blocking(move || second.output())
        .await
        .unwrap()
        .unwrap();
    assert_finished(&out);

    let spans = received_spans(&receiver).await;
    let trace = baton_telemetry::spans::trace_id(&baton_core_run_id(&run_id));
    let mut ids: Vec<&Vec<u8>> = spans.iter().map(|(_, s)| &s.span_id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), spans.len(), "a span was exported twice");
    assert_eq!(spans.len(), 7, "the same tree as an uninterrupted run");
    let root = spans
        .iter()
        .map(|(_, s)| s)
        .find(|s| s.parent_span_id.is_empty())
        .expect("a root");
    for (_, span) in &spans {
        assert_eq!(span.trace_id, trace.to_vec());
        if span.name.starts_with("turn ") {
            assert_eq!(span.parent_span_id, root.span_id);
        }
    }
    // The run span, ended by the second process, starts when the first one started the run.
    let first_turn = spans
        .iter()
        .map(|(_, s)| s)
        .find(|s| s.name == "turn 1")
        .unwrap();
    assert!(root.start_time_unix_nano <= first_turn.start_time_unix_nano);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sigterm_pause_flushes_what_ended_before_the_process_exits() {
    let mut slow = turn(&[("read_file", json!({"path": "notes.txt"}))]);
    slow.delay = Some(std::time::Duration::from_secs(3));
    let first = turn(&[("read_file", json!({"path": "notes.txt"}))]);
    let model = ScriptedServer::start(vec![first, slow]).await;
    // Busy with the first export (turn 1's model call) while the rest of turn 1 and the pause
    // happen: without the flush at the end they would never be sent.
    let receiver = slow_receiver(std::time::Duration::from_millis(700)).await;
    let ws = workspace();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.uri())
        .args(["run", "--base-url", &model.base_url(), "--model", "m"])
        .args(["--json", "read the notes"]);
    let out = tokio::task::spawn_blocking(move || {
        let (child, mut events) = spawn_json(cmd);
        // The second model call is in flight (its answer is held back 3 s).
        events
            .until(|e| e["type"] == "model_call_started" && e["turn"] == 2)
            .expect("a second model call");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let spans = received_spans(&receiver).await;
    let names: Vec<&str> = spans.iter().map(|(_, s)| s.name.as_str()).collect();
    // Turn 1 and its calls, and the call the pause abandoned — exported before exit.
    for expected in ["turn 1", "execute_tool read_file"] {
        assert!(names.contains(&expected), "{expected} missing: {names:?}");
    }
    let chats: Vec<&Span> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.name == "chat m")
        .collect();
    assert_eq!(chats.len(), 2, "{names:?}");
    let abandoned = chats
        .iter()
        .find(|s| int_attr(s, "baton.turn") == 2)
        .expect("the interrupted call");
    assert_eq!(str_attr(abandoned, "error.type"), "interrupted");
    assert!(
        !names.contains(&"invoke_agent baton"),
        "the run is only paused"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn otlp_http_json_is_used_when_asked_for() {
    let model = ScriptedServer::start(script()).await;
    let receiver = receiver().await;
    let ws = workspace();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.uri())
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
        .env("OTEL_SERVICE_NAME", "baton-ci")
        .args(["run", "--base-url", &model.base_url(), "--model", "m"])
        .args(["--json", "read the notes"]);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    assert_finished(&out);
    let mut names = Vec::new();
    for request in receiver.received_requests().await.unwrap() {
        assert_eq!(
            request
                .headers
                .get("content-type")
                .map(|v| v.to_str().unwrap()),
            Some("application/json")
        );
        let body: Value = serde_json::from_slice(&request.body).expect("OTLP JSON");
        for resource in body["resourceSpans"].as_array().unwrap() {
            let service = resource["resource"]["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["key"] == "service.name")
                .map(|a| a["value"]["stringValue"].clone());
            assert_eq!(service, Some(json!("baton-ci")));
            for scope in resource["scopeSpans"].as_array().unwrap() {
                for span in scope["spans"].as_array().unwrap() {
                    names.push(span["name"].as_str().unwrap().to_string());
                }
            }
        }
    }
    names.sort();
    assert_eq!(
        names,
        [
            "chat m",
            "chat m",
            "execute_tool finish",
            "execute_tool read_file",
            "invoke_agent baton",
            "turn 1",
            "turn 2"
        ]
    );
}

/// A run with a task graph: each task is a span under the run, its turns and its checks under
/// it (real task events from the engine, not made-up ones).
#[tokio::test(flavor = "multi_thread")]
async fn task_graph_runs_trace_tasks_with_their_turns_and_checks() {
    let model = ScriptedServer::start_by_task(&[
        (
            "one",
            vec![turn(&[
                ("write_file", json!({"path": "one.txt", "content": "1"})),
                ("finish", json!({"summary": "one done"})),
            ])],
        ),
        (
            "two",
            vec![turn(&[
                ("write_file", json!({"path": "two.txt", "content": "2"})),
                ("finish", json!({"summary": "two done"})),
            ])],
        ),
    ])
    .await;
    let receiver = receiver().await;
    let ws = workspace();
    let home = tempfile::tempdir().unwrap();
    let plan = ws.path().join("plan.toml");
    std::fs::write(
        &plan,
        "[[task]]\nid = \"one\"\ninstructions = \"i\"\ncheck = \"test -f one.txt\"\n\
         [[task]]\nid = \"two\"\ninstructions = \"i\"\ndeps = [\"one\"]\ncheck = \"test -f two.txt\"\n",
    )
    .unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.uri())
        .args([
            "run",
            "--base-url",
            &model.base_url(),
            "--model",
            "m",
            "--json",
        ])
        .arg("--plan")
        .arg(&plan)
        .arg("two files");
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    assert_finished(&out);
    let spans: Vec<Span> = received_spans(&receiver)
        .await
        .into_iter()
        .map(|(_, s)| s)
        .collect();
    let named = |name: &str| spans.iter().filter(|s| s.name == name).collect::<Vec<_>>();
    let run = named("invoke_agent baton");
    assert_eq!(run.len(), 1);
    for task in ["one", "two"] {
        let task_span = named(&format!("task {task}"));
        assert_eq!(
            task_span.len(),
            1,
            "{:?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        assert_eq!(task_span[0].parent_span_id, run[0].span_id);
        let children: Vec<&str> = spans
            .iter()
            .filter(|s| s.parent_span_id == task_span[0].span_id)
            .map(|s| s.name.as_str())
            .collect();
        assert!(
            children.iter().any(|n| n.starts_with("turn ")),
            "{children:?}"
        );
        assert!(
            children.iter().any(|n| n.starts_with("check ")),
            "{children:?}"
        );
    }
}
