#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `baton doctor` says plainly what is wrong with the configured model endpoint.

mod support;

use serde_json::json;
use support::*;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

async fn doctor(base_url: &str, model: &str) -> (Option<i32>, String) {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.env("BATON_API_KEY", "sk-doctor-test-key-123").args([
        "doctor",
        "--base-url",
        base_url,
        "--model",
        model,
    ]);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !text.contains("sk-doctor-test-key-123"),
        "the key leaked: {text}"
    );
    (out.status.code(), text)
}

async fn server_answering(template: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(template)
        .mount(&server)
        .await;
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_endpoint_is_ok() {
    let server = ScriptedServer::start(vec![Turn {
        text: Some("ok".into()),
        ..Turn::default()
    }])
    .await;
    let (code, text) = doctor(&server.base_url(), "m").await;
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.starts_with("ok:") && text.contains("100 prompt + 10 completion"),
        "{text}"
    );
    // The sandbox is reported too: which backend, and what it enforces.
    assert!(text.contains("\nsandbox: backend "), "{text}");
    assert!(text.contains("network off"), "{text}");
    // And where the journal is, out of the commands' reach.
    assert!(
        text.contains("\nstate: /") && text.contains("/.local/state/baton/workspaces/"),
        "{text}"
    );
    assert!(text.contains("not writable by commands"), "{text}");
    // Each protection, as this backend enforces it.
    for line in [
        "\n  capabilities: none, no_new_privs",
        "\n  UNIX sockets: none",
        "\n  terminal: a session of its own",
        "\n  credentials: ",
        "\n  baton's own files: ",
        "\n  orphans (setsid, double fork): killed",
        "\n  memory: ",
        "\n  not enforced anywhere: ",
    ] {
        assert!(text.contains(line), "missing {line:?}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_failure_is_explained() {
    let unauthorized = server_answering(
        ResponseTemplate::new(401)
            .set_body_json(json!({"error": {"message": "Incorrect API key provided"}})),
    )
    .await;
    let (code, text) = doctor(&format!("{}/v1", unauthorized.uri()), "m").await;
    assert_eq!(code, Some(1));
    assert!(text.contains("refused the API key"), "{text}");

    let no_model = server_answering(
        ResponseTemplate::new(404)
            .set_body_json(json!({"error": {"message": "model 'nope' not found"}})),
    )
    .await;
    let (code, text) = doctor(&format!("{}/v1", no_model.uri()), "nope").await;
    assert_eq!(code, Some(1));
    assert!(text.contains("does not know model 'nope'"), "{text}");

    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (code, text) = doctor(&format!("http://127.0.0.1:{port}/v1"), "m").await;
    assert_eq!(code, Some(1));
    assert!(text.contains("nothing is listening"), "{text}");
}

/// A Responses-only model on Chat Completions gets what OpenAI answers there; doctor names the
/// wire to switch to. A working check reports the wire, reasoning and compaction chosen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_responses_only_model_on_chat_is_explained() {
    let chat = server_answering(ResponseTemplate::new(400).set_body_json(json!({"error": {
        "message": "This model is only supported in v1/responses and not in v1/chat/completions.",
        "type": "invalid_request_error", "param": "model", "code": null}})))
    .await;
    let (code, text) = doctor(&format!("{}/v1", chat.uri()), "gpt-5.1-codex").await;
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("served only on the Responses API") && text.contains("--wire-api responses"),
        "{text}"
    );
    assert!(text.contains("wire Chat Completions"), "{text}");

    let server = ScriptedServer::start(vec![Turn {
        text: Some("ok".into()),
        ..Turn::default()
    }])
    .await;
    let (code, text) = doctor(&server.base_url(), "m").await;
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("profile 'default': wire Chat Completions; reasoning history preserve")
            && text.contains("compaction baton's summary"),
        "{text}"
    );
}
