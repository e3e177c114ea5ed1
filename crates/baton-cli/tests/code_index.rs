#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The code index with the real binary: `baton index`, `baton search`, `baton map` in a fresh
//! checkout, the local MiniLM embedder through `BATON_EMBED_MODEL_DIR`, a kill -9 in the middle
//! of indexing, and a run whose brief carries the repo map and whose model calls `search_code`.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn write(root: &Path, path: &str, text: &str) {
    let file = root.join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, text).unwrap();
}

fn small_repo(root: &Path) {
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
    write(root, "README.md", "# demo\n\nA client that retries.\n");
}

fn output(cmd: &mut Command) -> (String, String) {
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    (stdout, stderr)
}

fn hits(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn search_index_and_map_work_in_a_fresh_checkout() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    small_repo(ws.path());
    // No index yet: search builds it.
    let (stdout, stderr) = output(baton(ws.path(), home.path()).args([
        "search",
        "backoff_delay",
        "--json",
        "--k",
        "3",
    ]));
    assert!(
        stderr.contains("keyword search only"),
        "said once: {stderr}"
    );
    let found = hits(&stdout);
    assert_eq!(found[0]["path"], "src/retry.rs", "{stdout}");
    assert_eq!(found[0]["symbol"], "backoff_delay");
    assert_eq!(
        (
            found[0]["start_line"].as_u64(),
            found[0]["end_line"].as_u64()
        ),
        (Some(2), Some(4))
    );
    assert!(found[0]["score"].as_f64().unwrap() > 0.0);
    for hit in &found {
        for key in [
            "path",
            "start_line",
            "end_line",
            "score",
            "symbol",
            "snippet",
        ] {
            assert!(hit.get(key).is_some(), "{key} in {hit}");
        }
    }
    assert!(
        !ws.path().join(".baton").exists(),
        "the index is kept in the state directory"
    );
    assert!(state_dir(ws.path(), home.path()).code_index().is_file());

    let (stdout, _) = output(baton(ws.path(), home.path()).args(["index", "--json"]));
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["files"], 4, "{report}");
    assert_eq!(report["languages"]["rust"], 2);
    assert_eq!(report["languages"]["python"], 1);
    assert_eq!(
        report["update"]["files_indexed"], 0,
        "already up to date: {report}"
    );
    assert!(report["embedded_share"].is_null() && report["embedder"].is_null());

    let (map, _) = output(baton(ws.path(), home.path()).args(["map", "--tokens", "200"]));
    assert!(
        map.contains("src/retry.rs:\n")
            && map.contains("pub fn backoff_delay(attempt: u32) -> u64 {"),
        "{map}"
    );
    let (again, _) = output(baton(ws.path(), home.path()).args(["map", "--tokens", "200"]));
    assert_eq!(map, again, "deterministic");
    let (tools, _) = output(baton(ws.path(), home.path()).args(["map", "tools"]));
    assert_eq!(
        tools,
        "tools/report.py:\n    1│ def summarize_invoices(rows):\n"
    );

    // A changed file is re-read by the next search.
    write(
        ws.path(),
        "tools/report.py",
        "def summarize_payments(rows):\n    return sum(rows)\n",
    );
    let (stdout, _) = output(baton(ws.path(), home.path()).args([
        "search",
        "summarize_payments",
        "--json",
        "--mode",
        "keyword",
    ]));
    assert_eq!(hits(&stdout)[0]["path"], "tools/report.py");

    let out = baton(ws.path(), home.path())
        .args(["search", "x", "--mode", "vector"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "vector search without an embedder is a usage error"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("BATON_EMBED_MODEL_DIR"));
}

fn model_dir() -> String {
    baton_embed::testing::model_dir()
        .unwrap()
        .display()
        .to_string()
}

#[test]
fn the_local_model_embeds_and_finds_code_by_meaning() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    small_repo(ws.path());
    let (stdout, _) = output(
        baton(ws.path(), home.path())
            .env("BATON_EMBED_MODEL_DIR", model_dir())
            .args(["index", "--json"]),
    );
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["embedded_share"], 1.0, "{report}");
    assert!(
        report["embedding_model"]
            .as_str()
            .unwrap()
            .starts_with("local/all-MiniLM-L6-v2/")
    );
    assert!(report["embedding"]["input_tokens"].as_u64().unwrap() > 0);
    let (stdout, stderr) = output(
        baton(ws.path(), home.path())
            .env("BATON_EMBED_MODEL_DIR", model_dir())
            .args([
                "search",
                "add up the money each buyer owes",
                "--mode",
                "vector",
                "--json",
                "--k",
                "2",
            ]),
    );
    assert!(stderr.is_empty(), "{stderr}");
    assert_eq!(hits(&stdout)[0]["path"], "tools/report.py", "{stdout}");
    // Nothing changed: nothing is embedded again.
    let (stdout, _) = output(
        baton(ws.path(), home.path())
            .env("BATON_EMBED_MODEL_DIR", model_dir())
            .args(["index", "--json"]),
    );
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["embedding"]["embedded"], 0, "{report}");
}

#[test]
fn kill_9_while_indexing_leaves_an_index_the_next_run_completes() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let files = 600;
    for i in 0..files {
        write(
            ws.path(),
            &format!("pkg/m{:02}/mod_{i}.py", i % 40),
            &format!(
                "def unique_name_{i}(value):\n    \"\"\"Scales value by {i}.\"\"\"\n    return value * {i}\n\n\nclass Holder{i}:\n    size = {i}\n"
            ),
        );
    }
    let mut child = baton(ws.path(), home.path())
        .env("BATON_EMBED_MODEL_DIR", model_dir())
        .args(["index"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let (stdout, _) = output(
        baton(ws.path(), home.path())
            .env("BATON_EMBED_MODEL_DIR", model_dir())
            .args(["index", "--json"]),
    );
    let report: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(report["files"], files, "{report}");
    assert_eq!(report["embedded_share"], 1.0, "{report}");
    assert_eq!(report["chunks"], files * 2, "{report}");
    // Every file's chunks are its own: a search for its unique name finds exactly it.
    for i in (0..files).step_by(97) {
        let (stdout, _) = output(baton(ws.path(), home.path()).args([
            "search",
            &format!("unique_name_{i}"),
            "--mode",
            "keyword",
            "--json",
            "--k",
            "1",
        ]));
        let hit = &hits(&stdout)[0];
        assert_eq!(
            hit["path"],
            format!("pkg/m{:02}/mod_{i}.py", i % 40),
            "{hit}"
        );
        assert_eq!(
            (hit["start_line"].as_u64(), hit["end_line"].as_u64()),
            (Some(1), Some(3))
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_gets_the_repo_map_in_its_brief_and_searches_code() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    small_repo(ws.path());
    let server = ScriptedServer::start(vec![
        turn(&[("search_code", json!({"query": "send_with_retries"}))]),
        turn(&[("repo_map", json!({"path": "tools"}))]),
        turn(&[("finish", json!({"summary": "looked around"}))]),
    ])
    .await;
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["make the client retry less"],
    )
    .await;
    assert_finished(&out);
    let events = journal(ws.path(), home.path());
    let started = &of_type(&events, "run_started")[0];
    let tools: Vec<&str> = started["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let at = |name: &str| tools.iter().position(|t| *t == name).unwrap();
    assert!(
        at("finish") < at("search_code") && at("search_code") < at("repo_map"),
        "{tools:?}"
    );
    let maps = of_type(&events, "repo_map_rendered");
    assert_eq!(maps.len(), 1);
    let map = maps[0]["map"].as_str().unwrap();
    assert!(
        map.contains("src/client.rs:") && map.contains("pub fn send_with_retries"),
        "{map}"
    );
    let results: Vec<&Value> = of_type(&events, "tool_call_finished");
    let search = results[0]["result"]["content"].as_str().unwrap_or_default();
    // The impl block is small enough to be one chunk, so the hit names it.
    assert!(
        search.starts_with("src/client.rs:7-12 (Client)"),
        "{search}"
    );
    let listing = results[1]["result"]["content"].as_str().unwrap_or_default();
    assert!(listing.starts_with("tools/report.py:"), "{listing}");
    // Every request shows the same map, in the prefix right after the goal.
    for request in server.received() {
        let messages = request.body["messages"].as_array().unwrap();
        let text = messages[2]["content"].as_str().unwrap_or_default();
        assert!(
            text.starts_with("Repository map") && text.contains(map),
            "{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedding_calls_are_journaled_and_billed_once_across_a_resume() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    small_repo(ws.path());
    let (_embed, inputs) = priced_embeddings(home.path(), Duration::ZERO).await;
    // Two turns, then the turn limit pauses the run; the resumed run searches once more.
    let server = ScriptedServer::start(vec![
        turn(&[(
            "search_code",
            json!({"query": "wait before the next attempt"}),
        )]),
        turn(&[("list_dir", json!({}))]),
        turn(&[("search_code", json!({"query": "total per customer"}))]),
        turn(&[("finish", json!({"summary": "done"}))]),
    ])
    .await;
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--max-turns", "2", "look"],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = baton_blocking(
        ws.path(),
        home.path(),
        &[
            "resume",
            "--last",
            "--max-turns",
            "10",
            "--base-url",
            &server.base_url(),
        ],
    )
    .await;
    assert_finished(&out);

    let events = journal(ws.path(), home.path());
    let used = of_type(&events, "embeddings_used");
    assert!(!used.is_empty());
    let journaled: u64 = used.iter().map(|e| e["inputs"].as_u64().unwrap()).sum();
    let cost: f64 = used.iter().map(|e| e["cost_usd"].as_f64().unwrap()).sum();
    let tokens: u64 = used
        .iter()
        .map(|e| e["input_tokens"].as_u64().unwrap())
        .sum();
    let sent = inputs.lock().unwrap().clone();
    // Every input the server embedded is journaled exactly once, with the server's count.
    assert_eq!(
        journaled,
        sent.len() as u64,
        "journaled {used:?}, sent {sent:?}"
    );
    assert!((cost - tokens as f64 * 100.0 / 1e6).abs() < 1e-9);
    // The resumed process found the chunks' vectors in the index: each chunk was embedded
    // once, and only the two queries were sent besides.
    let mut documents: Vec<&String> = sent
        .iter()
        .filter(|t| !t.starts_with("wait before") && !t.starts_with("total per"))
        .collect();
    let all = documents.len();
    documents.sort();
    documents.dedup();
    assert_eq!(documents.len(), all, "a chunk was embedded twice: {sent:?}");
    assert_eq!(sent.len() - all, 2, "{sent:?}");
    let status = baton_blocking(ws.path(), home.path(), &["status", "--json"]).await;
    assert_finished(&status);
    // `baton cost` bills the same embeddings, once, and counts their price in the total.
    let cost_out = baton_blocking(ws.path(), home.path(), &["cost", "--json"]).await;
    assert_finished(&cost_out);
    let billed: Value = serde_json::from_slice(&cost_out.stdout).unwrap();
    let rows = billed["embeddings"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{billed}");
    assert_eq!(rows[0]["input_tokens"].as_u64(), Some(tokens), "{billed}");
    assert_eq!(rows[0]["inputs"].as_u64(), Some(journaled), "{billed}");
    assert!((rows[0]["cost_usd"].as_f64().unwrap() - cost).abs() < 1e-9);
    assert!(
        billed["cost"]["usd"].as_f64().unwrap() >= cost - 1e-12,
        "{billed}"
    );
    let text = baton_blocking(ws.path(), home.path(), &["cost"]).await;
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("texts, {tokens} tokens, ${cost:.4}")),
        "{text}"
    );
}

/// The embedding server, answering each request after `delay`.
struct SlowEmbeddings {
    inner: EmbeddingServer,
    delay: Duration,
}

impl wiremock::Respond for SlowEmbeddings {
    fn respond(&self, request: &wiremock::Request) -> wiremock::ResponseTemplate {
        self.inner.respond(request).set_delay(self.delay)
    }
}

/// An OpenAI-compatible embedding server (answering after `delay`), configured in `home` as
/// the priced embedder; the texts it was sent.
async fn priced_embeddings(
    home: &Path,
    delay: Duration,
) -> (
    wiremock::MockServer,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    priced_embeddings_with(home, delay, "").await
}

/// [`priced_embeddings`] with more `[embeddings]` keys (`extra`, whole lines).
async fn priced_embeddings_with(
    home: &Path,
    delay: Duration,
    extra: &str,
) -> (
    wiremock::MockServer,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
) {
    let embed = wiremock::MockServer::start().await;
    let inputs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    wiremock::Mock::given(wiremock::matchers::path("/v1/embeddings"))
        .respond_with(SlowEmbeddings {
            inner: EmbeddingServer {
                inputs: inputs.clone(),
            },
            delay,
        })
        .mount(&embed)
        .await;
    write_user_config(
        home,
        &format!(
            "[embeddings]\nprovider = \"openai\"\nbase_url = \"{}/v1\"\nmodel = \"mock-embed\"\nprice_per_mtok = 100.0\n{extra}",
            embed.uri()
        ),
    );
    (embed, inputs)
}

/// The refresh after the run's last change embeds in the background while the model gives its
/// final answer; the run's end waits for it, so those embeddings are journaled (and billed) with
/// the run instead of being spent after it ended, or cut off when the process exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_of_the_last_change_are_journaled_before_the_run_ends() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    small_repo(ws.path());
    let (_embed, inputs) = priced_embeddings(home.path(), Duration::from_millis(700)).await;
    let server = ScriptedServer::start(vec![
        turn(&[(
            "write_file",
            json!({
                "path": "src/invoice.rs",
                "content": "/// The total of an invoice in cents.\npub fn invoice_total_cents(lines: &[u64]) -> u64 {\n    lines.iter().sum()\n}\n",
            }),
        )]),
        turn(&[("finish", json!({"summary": "added invoice_total_cents"}))]),
    ])
    .await;
    let out = run_against(&server, ws.path(), home.path(), &["add an invoice total"]).await;
    assert_finished(&out);

    let sent = inputs.lock().unwrap().clone();
    assert!(
        sent.iter().any(|t| t.contains("invoice_total_cents")),
        "the new function was never embedded before the run ended: {sent:?}"
    );
    assert_sent_is_journaled_before_the_end(&journal(ws.path(), home.path()), &sent);
}

/// Every text the embedding server was sent is journaled as `embeddings_used` — before the
/// run's end, which closes its journal.
fn assert_sent_is_journaled_before_the_end(events: &[Value], sent: &[String]) {
    let used = of_type(events, "embeddings_used");
    let journaled: u64 = used.iter().map(|e| e["inputs"].as_u64().unwrap()).sum();
    assert_eq!(
        journaled,
        sent.len() as u64,
        "every text the server embedded is journaled: {used:?}, sent {sent:?}"
    );
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let last_used = kinds.iter().rposition(|k| *k == "embeddings_used").unwrap();
    let finished = kinds.iter().position(|k| *k == "run_finished").unwrap();
    assert!(last_used < finished, "{kinds:?}");
}

/// A refresh that outlasts the run's end wait (10 s) is held there: no new embedding request
/// starts, the one in flight is answered and journaled. Every text the server was sent is
/// journaled — none is spent after the run ended, none is cut off unaccounted by the exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_outlasting_the_runs_end_is_held_and_what_it_spent_journaled() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    small_repo(ws.path());
    // Two texts a request, three seconds each: the new file's 30 functions take 45 s.
    let (_embed, inputs) =
        priced_embeddings_with(home.path(), Duration::from_secs(3), "batch_size = 2\n").await;
    let functions: String = (0..30)
        .map(|i| format!("/// Step {i} of the ledger.\npub fn ledger_step_{i}(x: u64) -> u64 {{\n    x * {i} + 1\n}}\n\n"))
        .collect();
    let server = ScriptedServer::start(vec![
        turn(&[(
            "write_file",
            json!({"path": "src/ledger.rs", "content": functions}),
        )]),
        turn(&[("finish", json!({"summary": "added the ledger"}))]),
    ])
    .await;
    let out = run_against(&server, ws.path(), home.path(), &["add a ledger"]).await;
    assert_finished(&out);

    let sent = inputs.lock().unwrap().clone();
    assert_sent_is_journaled_before_the_end(&journal(ws.path(), home.path()), &sent);
    assert!(
        sent.len() < 30,
        "the refresh was held at the run's end, not run to completion: {} texts sent",
        sent.len()
    );
    // Nothing more reaches the server once the run has ended.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(inputs.lock().unwrap().len(), sent.len());
}
