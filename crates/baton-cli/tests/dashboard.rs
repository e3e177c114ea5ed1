#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The dashboard in a real browser: headless Chromium (Debian `chromium`) driven through
//! chromedriver (Debian `chromium-driver`) over WebDriver, against the real `baton serve`. It
//! loads the runs list for a store holding a finished run with a task graph and cost, finds the
//! run, opens it, sees its tasks, their states and its cost, and saves screenshots to
//! `target/test-artifacts/`; then watches a running run's page update live as events are
//! appended.

mod support;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::{
    AssistantMessage, ErrorClass, Event, PauseReason, RunId, ToolEffect, ToolOutcome, ToolResult,
    Usage,
};
use baton_serve::testing::{JournalWriter, TASKS, finished_task_run};
use baton_store::Store;
use fantoccini::error::CmdError;
use fantoccini::{Client, ClientBuilder, Locator};
use support::*;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// chromedriver on a free loopback port, killed when dropped.
struct Driver(Child, u16);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn start_chromedriver() -> Driver {
    for tool in [CHROMIUM, CHROMEDRIVER] {
        assert!(
            Path::new(tool).exists(),
            "{tool} is missing: the dashboard test needs headless Chromium and its WebDriver; \
             install the Debian packages with `apt-get install -y chromium chromium-driver` \
             (.ci/run does this)"
        );
    }
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    let driver = Driver(child, port);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = reqwest::get(format!("http://127.0.0.1:{port}/status")).await
            && r.status().is_success()
        {
            return driver;
        }
        assert!(Instant::now() < deadline, "chromedriver did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The page re-renders parts of itself as the run changes (the runs list every few seconds, a
/// run's page on new events): an element found a moment ago may be gone. Retried then.
fn is_stale(e: &CmdError) -> bool {
    e.is_stale_element_reference()
}

async fn text(client: &Client, css: &str) -> Result<String, CmdError> {
    let mut tries = 0;
    loop {
        let result = match client.find(Locator::Css(css)).await {
            Ok(element) => element.text().await,
            Err(e) => Err(e),
        };
        match result {
            Err(e) if is_stale(&e) && tries < 20 => tries += 1,
            other => return other,
        }
    }
}

/// Polls the element's text until `ok` accepts it (the page loads and updates asynchronously);
/// returns the last text seen either way.
async fn wait_text(
    client: &Client,
    css: &str,
    ok: impl Fn(&str) -> bool,
) -> Result<String, CmdError> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let seen = match text(client, css).await {
            Ok(t) => t,
            Err(e) if e.is_no_such_element() => String::new(),
            Err(e) => return Err(e),
        };
        if ok(&seen) || Instant::now() > deadline {
            return Ok(seen);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn click(client: &Client, css: &str) -> Result<(), CmdError> {
    let mut tries = 0;
    loop {
        let result = match client.find(Locator::Css(css)).await {
            Ok(element) => element.click().await,
            Err(e) => Err(e),
        };
        match result {
            Err(e) if is_stale(&e) && tries < 20 => tries += 1,
            other => return other,
        }
    }
}

fn artifacts_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let dir = target.join("test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_lists_the_run_and_shows_its_tasks_and_cost() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(open_journal(ws.path(), home.path()).await);
    let run = finished_task_run(store.clone(), "Write a parser for nested expressions").await;
    // A run still going on (this test holds its lease and appends to it while the page is open).
    let mut live = JournalWriter::start(store.clone(), "A run still going on", "gpt-4o").await;
    live.turn(1, usage(), Some(0.25), 10).await;
    let paused = paused_run(store.clone()).await;
    // A `--parallel` family: the child run worked on the parent's task `a`.
    let child = JournalWriter::start(store.clone(), "Task a of the parent", "gpt-4o").await;
    child.release().await;
    let mut parent = JournalWriter::start(store.clone(), "A parent run", "gpt-4o").await;
    parent
        .push(Event::TaskDelegated {
            task: "a".into(),
            child_run: child.run_id.to_string(),
            base_snapshot: "0".repeat(40),
        })
        .await;
    parent.release().await;
    let serve = ServeProcess::start(ws.path(), home.path(), &["--token", "tok-dash-3e1"]);
    let driver = start_chromedriver().await;

    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": CHROMIUM,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,2000"]
        }),
    );
    let client = ClientBuilder::rustls()
        .unwrap()
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", driver.1))
        .await
        .expect("a WebDriver session with headless Chromium");
    let wait = Duration::from_secs(20);
    let result = async {
        // The URL with the token, once: the server sets its cookie, later pages carry it.
        client
            .goto(&format!("{}/?token=tok-dash-3e1", serve.base))
            .await?;
        // The runs list: both runs, ours with its status, progress and cost.
        let row_css = format!("tr.run-row[data-run-id=\"{}\"]", run.run_id);
        client
            .wait()
            .at_most(wait)
            .for_element(Locator::Css(&row_css))
            .await?;
        let live_css = format!("tr.run-row[data-run-id=\"{}\"]", live.run_id);
        assert!(text(&client, &live_css).await?.contains("running"));
        let row_text = text(&client, &row_css).await?;
        assert!(row_text.contains("finished"), "{row_text}");
        assert!(row_text.contains("2/4 tasks"), "{row_text}");
        assert!(row_text.contains("$0.0750"), "{row_text}");
        assert!(row_text.contains("gpt-4o"), "the model column: {row_text}");
        // Running time: the scripted journal's events are one second apart.
        let duration = text(&client, &format!("{row_css} .run-duration")).await?;
        assert!(duration.ends_with(" s") && duration != "0 s", "{duration}");
        // The child run sits right under its parent, marked as its child.
        let mut order = Vec::new();
        for row in client.find_all(Locator::Css("tr.run-row")).await? {
            order.push(row.attr("data-run-id").await?.unwrap_or_default());
        }
        let at = |id: &RunId| order.iter().position(|o| o == id.as_str()).unwrap();
        assert_eq!(at(&child.run_id), at(&parent.run_id) + 1, "{order:?}");
        let child_css = format!("tr.child-row[data-run-id=\"{}\"]", child.run_id);
        let child_row = client.find(Locator::Css(&child_css)).await?;
        assert_eq!(
            child_row.attr("data-parent").await?.as_deref(),
            Some(parent.run_id.as_str())
        );
        let list_png = client.screenshot().await?;

        // Open it.
        click(&client, &format!("{row_css} a.run-link")).await?;
        client
            .wait()
            .at_most(wait)
            .for_element(Locator::Id("run-cost"))
            .await?;
        assert_eq!(text(&client, "#run-cost").await?, "$0.0750");
        let title = text(&client, "#run-title").await?;
        assert!(title.contains(run.run_id.short()), "{title}");
        for (id, task_title, state) in TASKS {
            let task = format!("li.task[data-task-id=\"{id}\"]");
            assert_eq!(
                text(&client, &format!("{task} .task-title")).await?,
                *task_title
            );
            assert_eq!(text(&client, &format!("{task} .task-state")).await?, *state);
        }
        let tasks = text(&client, "#run-tasks").await?;
        assert_eq!(tasks, "2 / 4");
        // The chart and the task graph are drawn.
        client.find(Locator::Css("svg.cost-chart polyline")).await?;
        client.find(Locator::Css("svg.task-graph rect")).await?;
        client.find(Locator::Css("svg.timeline rect")).await?;
        // The transcript: every turn, the model's text, each tool call with its arguments and
        // result, each check with its verdict, and how the run ended.
        let transcript = wait_text(&client, "#transcript", |t| t.contains("finished:")).await?;
        assert_eq!(client.find_all(Locator::Css(".tx-turn")).await?.len(), 3);
        let turn1 = text(&client, ".tx-turn[data-turn=\"1\"]").await?;
        for expected in ["Turn 1", "step 1", "shell", "make step1", "✔ · exit 0"] {
            assert!(turn1.contains(expected), "{expected:?} in {turn1}");
        }
        let turn2 = text(&client, ".tx-turn[data-turn=\"2\"]").await?;
        assert!(
            turn2.contains("model call failed (rate limited): 429 slow down"),
            "{turn2}"
        );
        assert!(
            turn2.contains("edit_file") && turn2.contains("edited"),
            "{turn2}"
        );
        for expected in [
            "check of setup: make check-setup ✔ passed",
            "check of docs: make check-docs ✘ failed (exit 2)",
            "✔ task parse verified: nested expressions parse",
            "✘ task docs failed: the grammar check kept failing",
            "finished: parser done; docs need a person",
        ] {
            assert!(
                transcript.contains(expected),
                "{expected:?} in {transcript}"
            );
        }
        // An ended run is not "live".
        assert!(
            !client
                .find(Locator::Id("live"))
                .await?
                .is_displayed()
                .await?
        );
        // Nothing missing shows through as "null", "undefined" or "NaN".
        let body = text(&client, "body").await?;
        for bad in ["null", "undefined", "NaN"] {
            assert!(!body.contains(bad), "the page shows {bad:?}: {body}");
        }
        let run_png = client.screenshot().await?;

        // A paused run: the pause in a neutral colour, long output cut, repeats folded.
        client
            .goto(&format!("{}/#/runs/{}", serve.base, paused))
            .await?;
        let pause = wait_text(&client, "#run-pause", |t| t.contains("max turns")).await?;
        assert!(pause.contains("baton resume continues"), "{pause}");
        let notice = client.find(Locator::Id("run-pause")).await?;
        assert_eq!(notice.attr("class").await?.as_deref(), Some("notice"));
        let badge = client.find(Locator::Css("#run-title .badge")).await?;
        let colour = badge.css_value("background-color").await?;
        assert_eq!(
            colour, "rgba(91, 100, 112, 1)",
            "the paused badge is neutral grey"
        );
        let transcript = wait_text(&client, "#transcript", |t| t.contains("paused (")).await?;
        assert!(
            transcript.contains("… 2 more attempts, same error"),
            "{transcript}"
        );
        assert!(transcript.contains("… 18 more lines"), "{transcript}");
        assert!(
            !transcript.contains("line 29"),
            "cut until asked: {transcript}"
        );
        assert!(
            !client
                .find(Locator::Id("live"))
                .await?
                .is_displayed()
                .await?
        );
        let paused_png = client.screenshot().await?;
        click(&client, "details.more summary").await?;
        let opened = wait_text(&client, "#transcript", |t| t.contains("line 29")).await?;
        assert_eq!(opened.matches("line 11").count(), 1, "shown once: {opened}");

        // Live updates: the running run's page follows its journal.
        client
            .goto(&format!("{}/#/runs/{}", serve.base, live.run_id))
            .await?;
        let short = live.run_id.short().to_owned();
        let title = wait_text(&client, "#run-title", |t| t.contains(&short)).await?;
        assert!(
            title.contains(&short),
            "the live run's page did not open: {title}"
        );
        assert_eq!(text(&client, "#run-cost").await?, "$0.2500");
        assert!(
            client
                .find(Locator::Id("live"))
                .await?
                .is_displayed()
                .await?
        );
        wait_text(&client, "#transcript", |t| t.contains("make step1")).await?;
        tokio::time::sleep(Duration::from_millis(500)).await; // the stream is open
        live.turn(2, usage(), Some(0.5), 10).await;
        let cost = wait_text(&client, "#run-cost", |t| t == "$0.7500").await?;
        let turn2 = wait_text(&client, ".tx-turn[data-turn=\"2\"]", |t| {
            t.contains("make step2")
        })
        .await?;
        assert_eq!(cost, "$0.7500", "the page did not update");
        assert!(turn2.contains("step 2") && turn2.contains("✔"), "{turn2}");
        // Each turn once, in order, although history and stream met.
        assert_eq!(client.find_all(Locator::Css(".tx-turn")).await?.len(), 2);
        let live_png = client.screenshot().await?;
        Ok::<_, fantoccini::error::CmdError>([
            ("dashboard-runs.png", list_png),
            ("dashboard-run-finished.png", run_png),
            ("dashboard-run-paused.png", paused_png),
            ("dashboard-run-live.png", live_png),
        ])
    }
    .await;
    let _ = client.close().await;
    let shots = result.expect("the dashboard flow");
    let dir = artifacts_dir();
    for (name, png) in shots {
        assert!(png.starts_with(b"\x89PNG"), "{name} is a PNG");
        let path = dir.join(name);
        std::fs::write(&path, png).unwrap();
        println!("screenshot: {}", path.display());
    }
    serve.stop();
    drop(driver);
    live.release().await;
    store.close().await;
}

/// A paused run: a turn whose model call failed three times the same way, then a tool call
/// with 30 lines of output, then a pause at the turn limit.
async fn paused_run(store: Arc<dyn Store>) -> RunId {
    let mut w = JournalWriter::start(store, "A run that reached its turn limit", "gpt-4o").await;
    let failed = |attempt| Event::ModelCallFailed {
        turn: 1,
        call: 1,
        attempt,
        class: ErrorClass::Transient,
        message: "502 bad gateway".into(),
        retry_in_ms: Some(1000),
    };
    let output: Vec<String> = (0..30).map(|i| format!("line {i}")).collect();
    w.push_all(vec![
        Event::TurnStarted { turn: 1 },
        failed(1),
        failed(2),
        failed(3),
        Event::ModelCallFinished {
            turn: 1,
            call: 1,
            message: AssistantMessage {
                content: Some("Running the tests.".into()),
                tool_calls: vec![],
                ..Default::default()
            },
            usage: Some(usage()),
            cost_usd: Some(0.01),
            finish_reason: Some("tool_calls".into()),
            served_model: None,
            duration_ms: 900,
        },
        Event::ToolCallStarted {
            turn: 1,
            call_id: "c1".into(),
            name: "shell".into(),
            arguments: "{\"command\":\"cargo test\"}".into(),
            effect: ToolEffect::Mutating,
        },
        Event::ToolCallFinished {
            turn: 1,
            call_id: "c1".into(),
            result: ToolResult {
                outcome: ToolOutcome::Error,
                content: output.join("\n"),
                exit_code: Some(101),
            },
            duration_ms: 2100,
        },
        Event::TurnFinished { turn: 1 },
        Event::RunPaused {
            reason: PauseReason::MaxTurns,
            detail: "reached the limit of 1 turn".into(),
        },
    ])
    .await;
    w.release().await;
    w.run_id.clone()
}

fn usage() -> Usage {
    Usage {
        prompt_tokens: 2000,
        completion_tokens: 200,
        ..Default::default()
    }
}
