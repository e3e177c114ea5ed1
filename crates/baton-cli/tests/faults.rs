#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A run against a server that fails 30% of requests (500, 429, 529, cut streams, malformed
//! chunks) finishes with the same successful calls as a clean run, and bills only those.

mod support;

use serde_json::{Value, json};
use support::*;

fn script() -> Vec<Turn> {
    let mut turns: Vec<Turn> = (0..12)
        .map(|t| {
            turn(&[
                (
                    "write_file",
                    json!({"path": format!("f{t}.txt"), "content": format!("{t}\n")}),
                ),
                ("read_file", json!({"path": format!("f{t}.txt")})),
            ])
        })
        .collect();
    turns.push(turn(&[("finish", json!({"summary": "survived"}))]));
    turns
}

/// Deterministic pseudo-random 30% of requests fail (splitmix64 of the request number), with
/// every kind of fault among them.
fn fault_for(request: usize) -> Option<Fault> {
    let mut z = (request as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    if (z ^ (z >> 31)) % 100 >= 30 {
        return None;
    }
    Some(match request % 5 {
        0 => Fault::ServerError,
        1 => Fault::RateLimited,
        2 => Fault::Overloaded,
        3 => Fault::CutStream,
        _ => Fault::Malformed,
    })
}

async fn run(server: &ScriptedServer) -> (Vec<Value>, String) {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".baton")).unwrap();
    std::fs::write(
        ws.path().join(".baton/config.toml"),
        "retry_base_delay_ms = 1\nmax_retry_attempts = 30\ncircuit_breaker_failures = 30\n",
    )
    .unwrap();
    trust_workspace(ws.path(), home.path());
    let mut cmd = baton(ws.path(), home.path());
    cmd.args([
        "run",
        "--base-url",
        &server.base_url(),
        "--model",
        "m",
        "--json",
        "survive",
    ]);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status = baton(ws.path(), home.path())
        .arg("status")
        .output()
        .unwrap();
    (
        journal(ws.path(), home.path()),
        String::from_utf8_lossy(&status.stdout).into_owned(),
    )
}

fn successful_calls(journal: &[Value]) -> Vec<(Value, Value)> {
    of_type(journal, "model_call_finished")
        .into_iter()
        .map(|e| (e["message"].clone(), e["usage"].clone()))
        .collect()
}

fn tool_results(journal: &[Value]) -> Vec<Value> {
    of_type(journal, "tool_call_finished")
        .into_iter()
        .map(|e| e["result"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_percent_failures_change_nothing_but_the_retries() {
    let clean_server = ScriptedServer::start(script()).await;
    let (clean, clean_status) = run(&clean_server).await;
    let faulty_server = ScriptedServer::start_with_faults(script(), fault_for).await;
    let (faulty, faulty_status) = run(&faulty_server).await;

    let failed = of_type(&faulty, "model_call_failed");
    let requests = faulty_server.received().len();
    assert!(
        failed.len() * 5 >= requests,
        "too few faults injected: {} of {requests}",
        failed.len()
    );
    let classes: std::collections::BTreeSet<&str> = failed
        .iter()
        .map(|e| e["class"].as_str().unwrap())
        .collect();
    for class in ["transient", "rate_limited", "overloaded", "bad_response"] {
        assert!(
            classes.contains(class),
            "no {class} failure was injected: {classes:?}"
        );
    }
    assert_eq!(of_type(&clean, "model_call_failed").len(), 0);

    // Same successful answers, same tool results, in the same order.
    assert_eq!(successful_calls(&faulty), successful_calls(&clean));
    assert_eq!(tool_results(&faulty), tool_results(&clean));
    // Billed tokens: the sum over successful calls only, identical to the clean run.
    let tokens = |status: &str| {
        status
            .lines()
            .find(|l| l.starts_with("tokens"))
            .unwrap()
            .to_string()
    };
    assert_eq!(tokens(&faulty_status), tokens(&clean_status));
    let prompt_sum: u64 = successful_calls(&faulty)
        .iter()
        .map(|(_, u)| u["prompt_tokens"].as_u64().unwrap())
        .sum();
    assert!(
        tokens(&faulty_status).contains(&format!("{prompt_sum} prompt")),
        "{faulty_status}"
    );
}
