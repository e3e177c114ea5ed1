#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shared embedding cache for teams (issue 21), with the real binary: two `baton worker`
//! processes on the PostgreSQL test server, each indexing its own copy of one repository, with
//! `[embeddings] cache = "postgres"`. The first embeds every chunk (through an OpenAI-compatible
//! embeddings server that counts its inputs); the second finds every vector in PostgreSQL and
//! sends only its run's search query.

mod support;

use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use baton_core::{Event, RunId, RunStatus};
use baton_store::Store;
use baton_store::testing::PgTestSchema;
use serde_json::json;
use support::*;

const QUERY: &str = "wait before the next attempt";

fn write(root: &Path, path: &str, text: &str) {
    let file = root.join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, text).unwrap();
}

/// A repository of a few files in three languages.
fn repository(root: &Path) {
    write(
        root,
        "src/retry.rs",
        "/// How long to wait before the next attempt.\npub fn backoff_delay(attempt: u32) -> u64 {\n    250 * 2u64.pow(attempt.min(8))\n}\n",
    );
    write(
        root,
        "src/client.rs",
        "use crate::retry::backoff_delay;\n\npub struct Client {\n    attempts: u32,\n}\n\nimpl Client {\n    pub fn send_with_retries(&mut self) -> u64 {\n        self.attempts += 1;\n        backoff_delay(self.attempts)\n    }\n}\n",
    );
    write(
        root,
        "tools/report.py",
        "def summarize_invoices(rows):\n    \"\"\"Total amount per customer.\"\"\"\n    totals = {}\n    for customer, amount in rows:\n        totals[customer] = totals.get(customer, 0) + amount\n    return totals\n",
    );
    write(
        root,
        "web/format.ts",
        "export function formatPrice(cents: number): string {\n  return `$${(cents / 100).toFixed(2)}`;\n}\n",
    );
    write(root, "README.md", "# demo\n\nA client that retries.\n");
}

struct Team {
    schema: PgTestSchema,
    server: ScriptedServer,
    home: tempfile::TempDir,
    source: tempfile::TempDir,
    artifacts: tempfile::TempDir,
}

impl Team {
    fn baton(&self) -> std::process::Command {
        let mut cmd = baton(self.source.path(), self.home.path());
        cmd.args(["--store", &self.schema.url()]);
        cmd
    }

    async fn submit(&self, goal: &str) -> RunId {
        let mut cmd = self.baton();
        cmd.args(["submit", "--base-url"])
            .arg(self.server.base_url())
            .args(["--model", "m", "--workspace-source"])
            .arg(self.source.path())
            .arg("--artifacts")
            .arg(self.artifacts.path())
            .arg(goal);
        let out = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .unwrap()
            .unwrap();
        assert_finished(&out);
        RunId::from_string(String::from_utf8(out.stdout).unwrap().trim())
    }

    fn worker(&self, workdir: &Path) -> Child {
        let mut cmd = self.baton();
        cmd.args(["worker", "--concurrency", "1", "--artifacts"])
            .arg(self.artifacts.path())
            .arg("--workdir")
            .arg(workdir)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        cmd.spawn().unwrap()
    }

    /// Rows of the shared cache.
    async fn cached(&self) -> i64 {
        let pool = sqlx::PgPool::connect(&self.schema.url()).await.unwrap();
        let n = sqlx::query_scalar("SELECT count(*) FROM baton_embedding_cache")
            .fetch_one(&pool)
            .await
            .unwrap_or(0);
        pool.close().await;
        n
    }
}

/// (chunks, chunks with a vector) in the code index of the worker's copy of `run`.
async fn index_coverage(workdir: &Path, home: &Path, run: &RunId) -> Option<(i64, i64)> {
    let db = state_dir(&workdir.join(run.as_str()), home).code_index();
    if !db.is_file() {
        return None;
    }
    let url = format!("sqlite://{}?mode=ro", db.display());
    let pool = sqlx::SqlitePool::connect(&url).await.ok()?;
    let row: Option<(i64, i64)> = sqlx::query_as(
        "SELECT count(DISTINCT c.hash), \
         (SELECT count(DISTINCT v.hash) FROM vectors v WHERE v.hash IN (SELECT hash FROM chunks)) \
         FROM chunks c",
    )
    .fetch_one(&pool)
    .await
    .ok();
    pool.close().await;
    row
}

async fn wait_for(limit: Duration, what: &str, mut check: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn stop(mut child: Child) {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0));
}

async fn finished(store: &dyn Store, run: &RunId) -> bool {
    store.get_run(run).await.unwrap().unwrap().status == RunStatus::Finished
}

/// What a run's journal says it spent on embeddings: inputs embedded.
async fn journaled_inputs(store: &dyn Store, run: &RunId) -> u64 {
    store
        .load_events(run)
        .await
        .unwrap()
        .iter()
        .map(|r| match &r.event {
            Event::EmbeddingsUsed { inputs, .. } => *inputs,
            _ => 0,
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_worker_embeds_nothing_the_first_did() {
    let source = tempfile::tempdir().unwrap();
    repository(source.path());
    let home = tempfile::tempdir().unwrap();
    let embed = wiremock::MockServer::start().await;
    let inputs = Arc::new(Mutex::new(Vec::new()));
    wiremock::Mock::given(wiremock::matchers::path("/v1/embeddings"))
        .respond_with(EmbeddingServer {
            inputs: inputs.clone(),
        })
        .mount(&embed)
        .await;
    write_user_config(
        home.path(),
        &format!(
            "[embeddings]\nprovider = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock-embed\"\ncache = \"postgres\"\n",
            embed.uri()
        ),
    );
    let team = Team {
        schema: PgTestSchema::create().await,
        server: ScriptedServer::start(vec![
            turn(&[("search_code", json!({"query": QUERY}))]),
            turn(&[("finish", json!({"summary": "found it"}))]),
        ])
        .await,
        home,
        source,
        artifacts: tempfile::tempdir().unwrap(),
    };
    let store = team.schema.store().await;
    let documents = |sent: &[String]| sent.iter().filter(|t| *t != QUERY).count();

    // The first worker: its run finishes and its index gets every vector, which it embedded.
    let first = team.submit("find the retry delay").await;
    let workdir_1 = tempfile::tempdir().unwrap();
    let worker = team.worker(workdir_1.path());
    wait_for(
        Duration::from_secs(120),
        "the first run's index embedded",
        async || {
            let covered = index_coverage(workdir_1.path(), team.home.path(), &first).await;
            finished(&store, &first).await && covered.is_some_and(|(c, v)| c > 0 && c == v)
        },
    )
    .await;
    stop(worker).await;
    let (chunks, _) = index_coverage(workdir_1.path(), team.home.path(), &first)
        .await
        .unwrap();
    let sent_1 = inputs.lock().unwrap().clone();
    assert_eq!(documents(&sent_1) as i64, chunks, "{sent_1:?}");
    assert_eq!(team.cached().await, chunks);
    eprintln!("the first worker embedded {chunks} chunks");

    // The second worker, on a copy of its own: every vector from PostgreSQL, only the query sent.
    let second = team.submit("find the retry delay again").await;
    let workdir_2 = tempfile::tempdir().unwrap();
    let worker = team.worker(workdir_2.path());
    wait_for(
        Duration::from_secs(120),
        "the second run's index complete",
        async || {
            let covered = index_coverage(workdir_2.path(), team.home.path(), &second).await;
            finished(&store, &second).await && covered.is_some_and(|(c, v)| c > 0 && c == v)
        },
    )
    .await;
    stop(worker).await;
    let sent = inputs.lock().unwrap().clone();
    let sent_2 = &sent[sent_1.len()..];
    assert_eq!(
        sent_2,
        [QUERY.to_owned()],
        "the second worker embedded chunks again"
    );
    assert_eq!(team.cached().await, chunks);
    // Each run's journal accounts for what its worker embedded.
    assert_eq!(journaled_inputs(&store, &second).await, 1);
    // The first run's end waited for its index's refresh: everything its worker sent — every
    // chunk and the query — is in its journal.
    assert_eq!(
        journaled_inputs(&store, &first).await,
        sent_1.len() as u64,
        "{sent_1:?}"
    );
}
