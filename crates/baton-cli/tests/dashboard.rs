//! The dashboard in a real browser: headless Chromium (Debian `chromium`) driven through
//! chromedriver (Debian `chromium-driver`) over WebDriver, against the real `baton serve`. It
//! loads the runs list for a store holding a finished run with a task graph and cost, finds the
//! run, opens it, sees its tasks, their states and its cost, and saves screenshots to
//! `target/test-artifacts/`.

mod support;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_serve::testing::{TASKS, finished_task_run};
use baton_store::{SqliteStore, Store};
use fantoccini::{ClientBuilder, Locator};
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
    let (run, other) = {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::for_workspace(ws.path()).await.unwrap());
        let run = finished_task_run(store.clone(), "Write a parser for nested expressions").await;
        let other = finished_task_run(store.clone(), "Another run").await;
        store.close().await;
        (run, other)
    };
    let serve = ServeProcess::start(ws.path(), home.path(), &[]);
    let driver = start_chromedriver().await;

    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": CHROMIUM,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1400"]
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
        client.goto(&format!("{}/", serve.base)).await?;
        // The runs list: both runs, ours with its status, progress and cost.
        let row_css = format!("tr.run-row[data-run-id=\"{}\"]", run.run_id);
        let row = client
            .wait()
            .at_most(wait)
            .for_element(Locator::Css(&row_css))
            .await?;
        client
            .find(Locator::Css(&format!("tr.run-row[data-run-id=\"{}\"]", other.run_id)))
            .await?;
        let row_text = row.text().await?;
        assert!(row_text.contains("finished"), "{row_text}");
        assert!(row_text.contains("2/4 tasks"), "{row_text}");
        assert!(row_text.contains("$0.0750"), "{row_text}");
        let list_png = client.screenshot().await?;

        // Open it.
        row.find(Locator::Css("a.run-link")).await?.click().await?;
        let cost = client
            .wait()
            .at_most(wait)
            .for_element(Locator::Id("run-cost"))
            .await?;
        assert_eq!(cost.text().await?, "$0.0750");
        let title = client.find(Locator::Id("run-title")).await?.text().await?;
        assert!(title.contains(run.run_id.short()), "{title}");
        for (id, task_title, state) in TASKS {
            let task = client
                .find(Locator::Css(&format!("li.task[data-task-id=\"{id}\"]")))
                .await?;
            assert_eq!(task.find(Locator::Css(".task-title")).await?.text().await?, *task_title);
            assert_eq!(task.find(Locator::Css(".task-state")).await?.text().await?, *state);
        }
        let tasks = client.find(Locator::Id("run-tasks")).await?.text().await?;
        assert_eq!(tasks, "2 / 4");
        // The chart and the task graph are drawn.
        client.find(Locator::Css("svg.cost-chart polyline")).await?;
        client.find(Locator::Css("svg.task-graph rect")).await?;
        client.find(Locator::Css("svg.timeline rect")).await?;
        let run_png = client.screenshot().await?;
        Ok::<_, fantoccini::error::CmdError>((list_png, run_png))
    }
    .await;
    let _ = client.close().await;
    let (list_png, run_png) = result.expect("the dashboard flow");
    let dir = artifacts_dir();
    for (name, png) in [("dashboard-runs.png", list_png), ("dashboard-run.png", run_png)] {
        assert!(png.starts_with(b"\x89PNG"), "{name} is a PNG");
        let path = dir.join(name);
        std::fs::write(&path, png).unwrap();
        println!("screenshot: {}", path.display());
    }
    serve.stop();
    drop(driver);
}
