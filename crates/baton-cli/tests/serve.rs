#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `baton serve` as a real process: after a real scripted `baton run` (wiremock model server,
//! one rate-limited attempt), `/metrics` parses as Prometheus text and its counters equal what
//! the journal says; `status`, `cost` and the API agree; bad binds are usage errors; every
//! bind, loopback included, wants the access token (made once into a private file, printed
//! once) and refuses requests addressed by another name (DNS rebinding) or from another
//! page's origin.

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

    let serve = ServeProcess::start(ws.path(), home.path(), &["--token", "tok-metrics"]);
    let client = reqwest::Client::new();
    let get = |path: &str| {
        client
            .get(format!("{}{path}", serve.base))
            .bearer_auth("tok-metrics")
            .send()
    };
    let text = get("/metrics").await.unwrap().text().await.unwrap();
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
    let runs: Value = get("/api/runs").await.unwrap().json().await.unwrap();
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
async fn a_given_token_is_never_printed_and_a_busy_port_is_a_clear_error() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();

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

/// `baton serve` with no token given, as a user starts it; and what it says on stderr, read to
/// its end (join the handle after stopping the server).
fn start_without_token(
    ws: &std::path::Path,
    home: &std::path::Path,
) -> (ServeProcess, std::thread::JoinHandle<String>) {
    use std::io::{BufRead, Read};
    let mut child = baton(ws, home)
        .args(["serve", "--port", "0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let said = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).unwrap();
        text
    });
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("?token=TOKEN"), "{line}");
    let port = line
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no port in {line:?}"))
        .to_owned();
    let serve = ServeProcess {
        child,
        base: format!("http://127.0.0.1:{port}"),
    };
    (serve, said)
}

/// `baton serve --port 0` that must refuse to start: its output once it exited; a server that
/// started instead (and would serve forever) is killed and fails the test.
fn refused_start(ws: &std::path::Path, home: &std::path::Path) -> std::process::Output {
    let mut child = baton(ws, home)
        .args(["serve", "--port", "0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("baton serve started instead of refusing its token file");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_loopback_too_every_request_needs_the_token_made_once_into_a_private_file() {
    use std::os::unix::fs::PermissionsExt;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let store = open_journal(ws.path(), home.path()).await;
    baton_store::Store::close(&store).await;

    let (serve, said) = start_without_token(ws.path(), home.path());
    let file = home.path().join(".local/state/baton/serve.token");
    let token = std::fs::read_to_string(&file).unwrap().trim().to_owned();
    assert_eq!(token.len(), 64, "256 random bits in hex: {token}");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", file.display());
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let base = serve.base.clone();
    let url = |path: &str| format!("{base}{path}");

    // No token, a wrong one: 401 with a body that says what to send.
    for path in ["/api/runs", "/metrics", "/"] {
        let denied = client.get(url(path)).send().await.unwrap();
        assert_eq!(denied.status(), 401, "{path}");
        let body: Value = denied.json().await.unwrap();
        let text = body["error"].as_str().unwrap();
        assert!(
            text.contains("Authorization: Bearer") && text.contains("serve.token"),
            "{text}"
        );
    }
    let wrong = client
        .get(url("/api/runs"))
        .bearer_auth("not-the-token")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    // The token: served.
    let allowed = client
        .get(url("/api/runs"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(allowed.status(), 200);
    // A request addressed by another name (a DNS-rebinding page), even with the token, and a
    // page of another origin: 403.
    for (host, origin) in [
        ("evil.example:80", None),
        ("localhost:1", None),
        ("127.0.0.1", Some("http://evil.example")),
    ] {
        let host = if host == "127.0.0.1" {
            base.trim_start_matches("http://").to_owned()
        } else {
            host.to_owned()
        };
        let mut request = client
            .get(url("/api/runs"))
            .bearer_auth(&token)
            .header("host", &host);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        let refused = request.send().await.unwrap();
        assert_eq!(refused.status(), 403, "{host} {origin:?}");
        let body: Value = refused.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().contains("may"), "{body}");
    }
    // Its own name and its own origin are served.
    let own = client
        .get(url("/api/runs"))
        .bearer_auth(&token)
        .header("host", base.replace("http://127.0.0.1", "localhost"))
        .header("origin", base.replace("127.0.0.1", "localhost"))
        .send()
        .await
        .unwrap();
    assert_eq!(own.status(), 200);
    serve.stop();
    let first = said.join().unwrap();
    assert_eq!(
        first.matches(&token).count(),
        2,
        "the token and the URL with it: {first}"
    );
    assert!(first.contains(&format!("?token={token}")), "{first}");

    // The next start keeps the token and does not print it again.
    let (serve, said) = start_without_token(ws.path(), home.path());
    let allowed = client
        .get(format!("{}/api/runs", serve.base))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(allowed.status(), 200);
    serve.stop();
    let second = said.join().unwrap();
    assert!(!second.contains(&token), "{second}");
    assert!(second.contains(&file.display().to_string()), "{second}");

    // A token file others could have read is refused, not used.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = refused_start(ws.path(), home.path());
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("mode 0644") && stderr.contains("Remove it"),
        "{stderr}"
    );
    // So is a symbolic link planted in its place (to a private file of someone's choosing).
    let elsewhere = home.path().join("chosen.token");
    std::fs::write(&elsewhere, "chosen-by-someone-else\n").unwrap();
    std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &file).unwrap();
    let out = refused_start(ws.path(), home.path());
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot be opened as a plain file"),
        "{stderr}"
    );
    // And, where the test can make one (as root), a file another user owns.
    if rustix::process::geteuid().is_root() {
        std::fs::remove_file(&file).unwrap();
        std::fs::write(&file, "theirs\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
        let out = refused_start(ws.path(), home.path());
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("belongs to uid 65534"), "{stderr}");
    }
}
