//! The HTTP API on a real server (127.0.0.1, a free port) over a real SQLite store: runs list,
//! run detail, events pages, errors, the SSE live tail, `/metrics` parsed by a Prometheus
//! parser, the access token, and the `Host` / `Origin` checks against DNS rebinding.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use baton_core::{Event, Usage};
use baton_serve::testing::{JournalWriter, TASKS, TaskRun, finished_task_run};
use baton_serve::{ServeOptions, serve};
use baton_store::{SqliteStore, Store};
use futures::StreamExt;
use serde_json::Value;

struct Server {
    base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start(store: Arc<dyn Store>, token: Option<&str>) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let options = ServeOptions {
            token: token.map(str::to_owned),
            allowed_hosts: vec!["baton.example.org".into()],
            poll_interval: Duration::from_millis(20),
        };
        let task = tokio::spawn(serve(listener, store, options, async move {
            let _ = stopped.await;
        }));
        Server {
            base,
            stop: Some(stop),
            task,
        }
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let response = reqwest::get(format!("{}{path}", self.base)).await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap())
    }

    /// Stops the server; it must end although a live tail may still be open.
    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("the server did not stop")
            .unwrap()
            .unwrap();
    }
}

async fn store(dir: &std::path::Path) -> Arc<dyn Store> {
    Arc::new(SqliteStore::for_workspace(dir).await.unwrap())
}

/// A finished task run and a second run still held (running) by this process.
async fn two_runs(store: &Arc<dyn Store>) -> (TaskRun, JournalWriter) {
    let done = finished_task_run(store.clone(), "Write a parser").await;
    let mut running = JournalWriter::start(store.clone(), "Keep going", "local-model").await;
    running
        .turn(
            1,
            Usage {
                prompt_tokens: 70,
                completion_tokens: 7,
                ..Default::default()
            },
            None,
            5,
        )
        .await;
    (done, running)
}

#[tokio::test]
async fn runs_and_run_detail_show_status_tasks_cost_and_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path()).await;
    let (done, running) = two_runs(&store).await;
    let server = Server::start(store, None).await;

    let (status, body) = server.get("/api/runs").await;
    assert_eq!(status, 200);
    let runs = body["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    let run = runs
        .iter()
        .find(|r| r["id"] == done.run_id.as_str())
        .unwrap();
    assert_eq!(run["status"], "finished");
    assert_eq!(run["cost"]["text"], "$0.0750");
    assert_eq!(run["tokens"]["input"], done.input_tokens);
    assert_eq!(run["tokens"]["cached"], done.cached_tokens);
    assert_eq!(run["tokens"]["output"], done.output_tokens);
    assert_eq!(
        (run["tasks_done"].as_u64(), run["tasks_total"].as_u64()),
        (Some(2), Some(4))
    );
    assert_eq!(run["event_count"], done.events);
    let other = runs
        .iter()
        .find(|r| r["id"] == running.run_id.as_str())
        .unwrap();
    assert_eq!(other["status"], "running");
    // No price for the model: unknown, never $0.
    assert_eq!(other["cost"]["text"], "unknown");

    // A prefix of the id works like in the CLI.
    let (status, detail) = server
        .get(&format!("/api/runs/{}", &done.run_id.as_str()[..20]))
        .await;
    assert_eq!(status, 200, "{detail}");
    let tasks: Vec<(String, String, String)> = detail["tasks"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap().to_owned(),
                t["title"].as_str().unwrap().to_owned(),
                t["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: Vec<(String, String, String)> = TASKS
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(tasks, expected);
    assert_eq!(detail["tasks"]["source"], "plan");
    assert_eq!(detail["retries"]["rate_limited"], 1);
    let calls = detail["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 3);
    let last = &calls[2];
    assert_eq!(
        last["cumulative_tokens"],
        done.input_tokens + done.output_tokens
    );
    assert!((last["cumulative_usd"].as_f64().unwrap() - done.cost_usd).abs() < 1e-12);
    assert_eq!(detail["turns"].as_array().unwrap().len(), 3);
    assert_eq!(detail["tools"].as_array().unwrap().len(), 3);
    assert_eq!(detail["run"]["summary"], "parser done; docs need a person");

    // Unknown and ambiguous ids: JSON errors.
    let (status, body) = server.get("/api/runs/ffffffff").await;
    assert_eq!(status, 404);
    assert!(body["error"].as_str().unwrap().contains("no run"), "{body}");
    let common = &done.run_id.as_str()[..4];
    assert_eq!(
        &running.run_id.as_str()[..4],
        common,
        "ids are time-ordered"
    );
    let (status, body) = server.get(&format!("/api/runs/{common}")).await;
    assert_eq!(status, 400);
    assert!(body["error"].as_str().unwrap().contains("2 runs"), "{body}");
    let (status, _) = server.get("/api/nothing").await;
    assert_eq!(status, 404);
    server.stop().await;
}

#[tokio::test]
async fn events_come_in_pages_and_bad_parameters_are_400() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path()).await;
    let (done, _running) = two_runs(&store).await;
    let server = Server::start(store, None).await;
    let id = done.run_id.as_str();

    let mut seqs = Vec::new();
    let mut after: Option<u64> = None;
    for _ in 0..100 {
        let query = match after {
            Some(a) => format!("?limit=7&after={a}"),
            None => "?limit=7".to_string(),
        };
        let (status, page) = server.get(&format!("/api/runs/{id}/events{query}")).await;
        assert_eq!(status, 200, "{page}");
        let events = page["events"].as_array().unwrap();
        assert!(events.len() <= 7);
        seqs.extend(events.iter().map(|e| e["seq"].as_u64().unwrap()));
        if !page["has_more"].as_bool().unwrap() {
            break;
        }
        after = page["next_after"].as_u64();
    }
    assert_eq!(seqs, (0..done.events).collect::<Vec<_>>());
    let (_, first) = server.get(&format!("/api/runs/{id}/events")).await;
    assert_eq!(first["events"][0]["type"], "run_started");

    for bad in ["?after=abc", "?limit=0", "?limit=5000", "?after=-1"] {
        let (status, body) = server.get(&format!("/api/runs/{id}/events{bad}")).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body["error"].is_string(), "{bad}: {body}");
    }
    server.stop().await;
}

fn number(value: &prometheus_parse::Value) -> f64 {
    match value {
        prometheus_parse::Value::Counter(v)
        | prometheus_parse::Value::Gauge(v)
        | prometheus_parse::Value::Untyped(v) => *v,
        other => panic!("not a number: {other:?}"),
    }
}

async fn scrape(server: &Server) -> prometheus_parse::Scrape {
    let response = reqwest::get(format!("{}/metrics", server.base))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let text = response.text().await.unwrap();
    prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap()
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

#[tokio::test]
async fn metrics_add_up_to_the_journals_and_follow_new_events() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path()).await;
    let (done, mut running) = two_runs(&store).await;
    let server = Server::start(store, None).await;

    let m = scrape(&server).await;
    let gpt = [("model", "gpt-4o")];
    let tokens = |m: &prometheus_parse::Scrape, model: &str, kind: &str| {
        sample(m, "baton_tokens_total", &[("model", model), ("kind", kind)])
    };
    assert_eq!(tokens(&m, "gpt-4o", "input"), done.input_tokens as f64);
    assert_eq!(tokens(&m, "gpt-4o", "cached"), done.cached_tokens as f64);
    assert_eq!(tokens(&m, "gpt-4o", "output"), done.output_tokens as f64);
    assert!((sample(&m, "baton_cost_usd_total", &gpt) - done.cost_usd).abs() < 1e-9);
    assert_eq!(
        sample(
            &m,
            "baton_model_calls_unpriced_total",
            &[("model", "local-model")]
        ),
        1.0
    );
    assert_eq!(
        sample(
            &m,
            "baton_model_call_retries_total",
            &[("class", "rate_limited")]
        ),
        1.0
    );
    assert_eq!(sample(&m, "baton_runs", &[("status", "finished")]), 1.0);
    assert_eq!(sample(&m, "baton_runs", &[("status", "running")]), 1.0);
    assert_eq!(sample(&m, "baton_runs", &[("status", "failed")]), 0.0);
    // Histograms: two calls of 1.2 s and one of 2.6 s.
    let histogram = m
        .samples
        .iter()
        .find(|s| {
            s.metric == "baton_model_call_duration_seconds"
                && s.labels.get("model") == Some("gpt-4o")
        })
        .unwrap();
    let prometheus_parse::Value::Histogram(buckets) = &histogram.value else {
        panic!("not a histogram: {histogram:?}");
    };
    let le = |bound: f64| buckets.iter().find(|b| b.less_than == bound).unwrap().count;
    assert_eq!(
        (le(1.0), le(2.5), le(5.0), le(f64::INFINITY)),
        (0.0, 2.0, 3.0, 3.0)
    );
    assert_eq!(
        sample(&m, "baton_model_call_duration_seconds_count", &gpt),
        3.0
    );
    assert!((sample(&m, "baton_model_call_duration_seconds_sum", &gpt) - 5.0).abs() < 1e-9);
    let shell = [("tool", "shell")];
    assert_eq!(
        sample(&m, "baton_tool_call_duration_seconds_count", &shell),
        3.0
    );
    assert!((sample(&m, "baton_tool_call_duration_seconds_sum", &shell) - 4.155).abs() < 1e-9);
    assert_eq!(
        sample(
            &m,
            "baton_tool_call_duration_seconds_count",
            &[("tool", "edit_file")]
        ),
        1.0
    );

    // The running run goes on: the next scrape folds in only what is new.
    running
        .turn(
            2,
            Usage {
                prompt_tokens: 30,
                completion_tokens: 3,
                ..Default::default()
            },
            None,
            5,
        )
        .await;
    let m = scrape(&server).await;
    assert_eq!(tokens(&m, "local-model", "input"), 100.0);
    assert_eq!(tokens(&m, "local-model", "output"), 10.0);
    assert_eq!(tokens(&m, "gpt-4o", "input"), done.input_tokens as f64);
    server.stop().await;
}

/// Reads SSE events (id, event type, data) until `n` arrived.
async fn read_sse(
    stream: &mut (
             impl futures::Stream<Item = Result<eventsource_stream::Event, impl std::fmt::Debug>> + Unpin
         ),
    n: usize,
) -> Vec<(String, String, String)> {
    let mut got = Vec::new();
    while got.len() < n {
        let event = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("no SSE event within 10 s")
            .expect("the stream ended")
            .unwrap();
        got.push((event.id, event.event, event.data));
    }
    got
}

#[tokio::test]
async fn the_live_tail_sends_new_events_resumes_after_last_event_id_and_ends_with_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path()).await;
    let (_done, mut running) = two_runs(&store).await;
    let server = Server::start(store, None).await;
    let url = format!("{}/api/runs/{}/stream", server.base, running.run_id);
    let first_new = running.next_seq;

    // Without `after`: from now on.
    let response = reqwest::get(&url).await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut stream = eventsource_stream::Eventsource::eventsource(response.bytes_stream());
    running
        .push(Event::NoteAdded {
            text: "hello".into(),
        })
        .await;
    let got = read_sse(&mut stream, 1).await;
    assert_eq!(got[0].0, first_new.to_string());
    let record: Value = serde_json::from_str(&got[0].2).unwrap();
    assert_eq!(
        (record["type"].as_str(), record["text"].as_str()),
        (Some("note_added"), Some("hello"))
    );

    // A reconnecting client sends Last-Event-ID and gets what came after it.
    running
        .push(Event::NoteAdded {
            text: "second".into(),
        })
        .await;
    let response = reqwest::Client::new()
        .get(&url)
        .header("Last-Event-ID", first_new.to_string())
        .send()
        .await
        .unwrap();
    let mut again = eventsource_stream::Eventsource::eventsource(response.bytes_stream());
    let got = read_sse(&mut again, 1).await;
    assert_eq!(got[0].0, (first_new + 1).to_string());
    drop(again);

    // `?after=` from the start replays everything; the run's end closes the stream.
    let response = reqwest::get(format!("{url}?after=0")).await.unwrap();
    let mut from_start = eventsource_stream::Eventsource::eventsource(response.bytes_stream());
    running
        .push(Event::RunFinished {
            summary: "done".into(),
            finished_by: None,
        })
        .await;
    let total = running.next_seq;
    let got = read_sse(&mut from_start, (total - 1) as usize).await;
    let ids: Vec<String> = got.iter().map(|g| g.0.clone()).collect();
    assert_eq!(ids, (1..total).map(|s| s.to_string()).collect::<Vec<_>>());
    let end = read_sse(&mut from_start, 1).await;
    assert_eq!((end[0].1.as_str(), end[0].2.as_str()), ("end", "finished"));
    assert!(
        tokio::time::timeout(Duration::from_secs(5), from_start.next())
            .await
            .unwrap()
            .is_none(),
        "the stream stays open after the end"
    );

    // A tail left open does not keep the server from stopping.
    let _open = reqwest::get(format!("{}/api/runs/{}/stream", server.base, _done.run_id))
        .await
        .unwrap();
    server.stop().await;
}

#[tokio::test]
async fn with_a_token_every_request_needs_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path()).await;
    let _ = two_runs(&store).await;
    let server = Server::start(store, Some("s3cret token")).await;
    let client = reqwest::Client::new();
    let url = |path: &str| format!("{}{path}", server.base);

    for path in ["/api/runs", "/metrics", "/", "/assets/app.js"] {
        let response = client.get(url(path)).send().await.unwrap();
        assert_eq!(response.status(), 401, "{path}");
        assert!(response.headers().contains_key("www-authenticate"));
        let body: Value = response.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().contains("token"));
    }
    let wrong = client
        .get(url("/api/runs"))
        .bearer_auth("s3cret tokem")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let right = client
        .get(url("/metrics"))
        .bearer_auth("s3cret token")
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 200);

    // A browser opens the printed URL once; the cookie carries the token from then on.
    let first = client
        .get(url("/?token=s3cret%20token"))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let cookie = first.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let csp = first.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("default-src 'self'"), "{csp}");
    assert!(first.text().await.unwrap().contains("/assets/app.js"));
    let pair = cookie.split(';').next().unwrap();
    let later = client
        .get(url("/api/runs"))
        .header("cookie", pair)
        .send()
        .await
        .unwrap();
    assert_eq!(later.status(), 200);
    server.stop().await;
}

#[tokio::test]
async fn only_requests_addressed_to_this_server_by_its_own_pages_are_answered() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path()).await;
    let server = Server::start(store, Some("tok")).await;
    let port = server.base.rsplit(':').next().unwrap().to_owned();
    let client = reqwest::Client::new();
    let ask = |host: String, origin: Option<String>| {
        let mut request = client
            .get(format!("{}/api/runs", server.base))
            .bearer_auth("tok")
            .header("host", host);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    // Its own names with its port, an allowed name on any port, and same-origin pages.
    for (host, origin) in [
        (format!("127.0.0.1:{port}"), None),
        (
            format!("localhost:{port}"),
            Some(format!("http://localhost:{port}")),
        ),
        (format!("[::1]:{port}"), None),
        (
            "baton.example.org".to_owned(),
            Some("https://baton.example.org".to_owned()),
        ),
    ] {
        let response = ask(host.clone(), origin.clone()).await.unwrap();
        assert_eq!(response.status(), 200, "{host} {origin:?}");
    }
    // A rebound name, another port, another page's origin: 403, before the token is looked at.
    for (host, origin, says) in [
        (format!("rebind.evil.example:{port}"), None, "--allow-host"),
        ("localhost:9".to_owned(), None, "DNS-rebinding"),
        (
            format!("127.0.0.1:{port}"),
            Some("http://evil.example".to_owned()),
            "may not call",
        ),
        (
            format!("localhost:{port}"),
            Some("null".to_owned()),
            "may not call",
        ),
    ] {
        let response = ask(host.clone(), origin.clone()).await.unwrap();
        assert_eq!(response.status(), 403, "{host} {origin:?}");
        let body: Value = response.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().contains(says), "{body}");
    }
    let unauthenticated = client
        .get(format!("{}/api/runs", server.base))
        .header("host", "rebind.evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(unauthenticated.status(), 403);
    server.stop().await;
}
