#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `baton serve` as a real process: after a real scripted `baton run` (wiremock model server,
//! one rate-limited attempt), `/metrics` parses as Prometheus text and its counters equal what
//! the journal says; `status`, `cost` and the API agree; bad binds are usage errors.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn script() -> Vec<Turn> {
    vec![
        turn(&[
            (
                "update_plan",
                json!({"items": [{"step": "Look around", "status": "done"},
                                 {"step": "Say hello", "status": "in_progress"}]}),
            ),
            ("list_dir", json!({})),
        ]),
        turn(&[("shell", json!({"command": "echo hello > hello.txt"}))]),
        turn(&[("finish", json!({"summary": "said hello"}))]),
        // The todo list still has an open item: baton names it once, the second finish stands.
        turn(&[("finish", json!({"summary": "said hello"}))]),
    ]
}

fn number(value: &prometheus_parse::Value) -> f64 {
    match value {
        prometheus_parse::Value::Counter(v)
        | prometheus_parse::Value::Gauge(v)
        | prometheus_parse::Value::Untyped(v) => *v,
        other => panic!("not a number: {other:?}"),
    }
}

fn sample(scrape: &prometheus_parse::Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    let found: Vec<_> = scrape
        .samples
        .iter()
        .filter(|s| s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(v)))
        .collect();
    assert_eq!(found.len(), 1, "{metric} {labels:?}: {found:?}");
    number(&found[0].value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_after_a_scripted_run_match_its_journal_and_status_cost_and_api_agree() {
    // The first request is rate-limited (retried), the rest are answered by the script.
    let server =
        ScriptedServer::start_with_faults(script(), |n| (n == 0).then_some(Fault::RateLimited))
            .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".baton")).unwrap();
    std::fs::write(
        ws.path().join(".baton/config.toml"),
        "retry_base_delay_ms = 1\n[prices.scripted]\ninput_per_mtok = 2.0\ncached_input_per_mtok = 0.5\noutput_per_mtok = 8.0\n",
    )
    .unwrap();
    trust_workspace(ws.path(), home.path());
    let out = run_against(&server, ws.path(), home.path(), &["Say hello"]).await;
    assert_finished(&out);

    // What the journal says, counted here independently of baton's aggregation.
    let events = journal(ws.path(), home.path());
    let finished = of_type(&events, "model_call_finished");
    assert_eq!(finished.len(), 4);
    let total = |field: &str| -> u64 {
        finished
            .iter()
            .map(|e| e["usage"][field].as_u64().unwrap())
            .sum()
    };
    let cached: u64 = finished
        .iter()
        .map(|e| e["usage"]["cached_prompt_tokens"].as_u64().unwrap())
        .sum();
    let cost: f64 = finished
        .iter()
        .map(|e| e["cost_usd"].as_f64().unwrap())
        .sum();
    let failed = of_type(&events, "model_call_failed");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["class"], "rate_limited");
    let served = finished[0]["served_model"].as_str().unwrap().to_owned();

    let serve = ServeProcess::start(ws.path(), home.path(), &[]);
    let text = reqwest::get(format!("{}/metrics", serve.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let m = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();
    let model = served.as_str();
    let tokens = |kind: &str| {
        sample(
            &m,
            "baton_tokens_total",
            &[("model", model), ("kind", kind)],
        )
    };
    assert_eq!(tokens("input"), total("prompt_tokens") as f64, "{text}");
    assert_eq!(tokens("cached"), cached as f64);
    assert_eq!(tokens("output"), total("completion_tokens") as f64);
    assert!((sample(&m, "baton_cost_usd_total", &[("model", model)]) - cost).abs() < 1e-12);
    assert_eq!(
        sample(
            &m,
            "baton_model_call_retries_total",
            &[("class", "rate_limited")]
        ),
        1.0
    );
    assert_eq!(
        sample(
            &m,
            "baton_model_call_duration_seconds_count",
            &[("model", model)]
        ),
        4.0
    );
    for (tool, calls) in [
        ("update_plan", 1.0),
        ("list_dir", 1.0),
        ("shell", 1.0),
        ("finish", 2.0),
    ] {
        assert_eq!(
            sample(
                &m,
                "baton_tool_call_duration_seconds_count",
                &[("tool", tool)]
            ),
            calls,
            "{tool}"
        );
    }
    assert_eq!(sample(&m, "baton_runs", &[("status", "finished")]), 1.0);
    assert_eq!(sample(&m, "baton_runs", &[("status", "running")]), 0.0);
    assert!(
        m.docs.contains_key("baton_tokens_total"),
        "HELP lines parsed"
    );

    // One aggregation: the API, `status` and `cost` say the same.
    let runs: Value = reqwest::get(format!("{}/api/runs", serve.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run = &runs["runs"][0];
    let cost_text = format!("${cost:.4}");
    assert_eq!(run["cost"]["text"], cost_text.as_str());
    assert_eq!(run["tokens"]["input"], total("prompt_tokens"));
    assert_eq!(
        (run["tasks_done"].as_u64(), run["tasks_total"].as_u64()),
        (Some(1), Some(2))
    );
    serve.stop();

    let status = baton(ws.path(), home.path())
        .arg("status")
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(
        status.contains(&format!("cost       {cost_text}\n")),
        "{status}"
    );
    assert!(
        status.contains(&format!(
            "tokens     {} prompt ({cached} cached) + {} completion",
            total("prompt_tokens"),
            total("completion_tokens")
        )),
        "{status}"
    );
    assert!(
        status.contains("tasks (todo list (update_plan)): 1 of 2 done"),
        "{status}"
    );
    let row = |title: &str| {
        status
            .lines()
            .rev()
            .find(|l| l.ends_with(title))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
    };
    assert_eq!(
        row("Look around").unwrap()[..3],
        ["1", "done", "-"],
        "{status}"
    );
    assert_eq!(
        row("Say hello").unwrap()[..3],
        ["2", "running", "-"],
        "{status}"
    );
    let table = baton(ws.path(), home.path()).arg("cost").output().unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains(&format!(
            "total: 4 model calls, {} input + {} output tokens, {cost_text}\n",
            total("prompt_tokens"),
            total("completion_tokens")
        )),
        "{table}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_beyond_loopback_needs_a_token_and_a_busy_port_is_a_clear_error() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = baton(ws.path(), home.path())
        .args(["serve", "--bind", "0.0.0.0", "--port", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--token"), "{stderr}");

    // A store to serve, and its port taken by someone else.
    let store = open_journal(ws.path(), home.path()).await;
    baton_store::Store::close(&store).await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = baton(ws.path(), home.path())
        .args(["serve", "--port", &port])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("in use") && stderr.contains("--port"),
        "{stderr}"
    );

    // With a token (from the environment) a non-loopback bind starts, and wants the token.
    let mut cmd = baton(ws.path(), home.path());
    cmd.env("BATON_SERVE_TOKEN", "tok-123");
    let serve = {
        let mut child = cmd
            .args(["serve", "--bind", "0.0.0.0", "--port", "0"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert!(line.contains("?token=TOKEN"), "{line}");
        assert!(
            !line.contains("tok-123"),
            "the token is not printed: {line}"
        );
        let port = line
            .split("0.0.0.0:")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap()
            .to_owned();
        ServeProcess {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    };
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let denied = client
        .get(format!("{}/api/runs", serve.base))
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), 401);
    let allowed = client
        .get(format!("{}/api/runs", serve.base))
        .bearer_auth("tok-123")
        .send()
        .await
        .unwrap();
    assert_eq!(allowed.status(), 200);
    serve.stop();
}
