#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `--store postgres://…` / `BATON_STORE`: a scripted run end to end with its journal on the
//! PostgreSQL test server (a schema of its own, `BATON_TEST_POSTGRES`), then `ls`, `status` and
//! `logs` reading it back from there.

mod support;

use assert_cmd::Command;
use baton_store::Store;
use baton_store::testing::PgTestSchema;
use serde_json::json;
use support::*;

fn script() -> Vec<Turn> {
    vec![
        turn(&[(
            "write_file",
            json!({"path": "notes.md", "content": "kept in postgres\n"}),
        )]),
        turn(&[("finish", json!({"summary": "notes written"}))]),
    ]
}

/// `baton ARGS…` in `workspace` as assert_cmd runs it, with a clean environment.
fn baton_cmd(workspace: &std::path::Path, home: &std::path::Path) -> Command {
    Command::from_std(baton(workspace, home))
}

fn stdout_of(out: &std::process::Output) -> String {
    assert_finished(out);
    String::from_utf8(out.stdout.clone()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_journaled_in_postgres_is_listed_and_shown_from_there() {
    let schema = PgTestSchema::create().await;
    let url = schema.url();
    let server = ScriptedServer::start(script()).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();

    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--store", &url, "--json", "write the notes"],
    )
    .await;
    assert_finished(&out);
    let mut streamed: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The journal's events, then the totals line.
    let totals = streamed.pop().unwrap();
    assert_eq!(totals["type"], "run_totals");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.md")).unwrap(),
        "kept in postgres\n"
    );
    // Nothing went to the workspace's SQLite store.
    assert!(!journal_path(ws.path(), home.path()).exists());

    // The store itself holds the run, for this (canonical) workspace.
    let store = schema.store().await;
    let runs = store.list_runs().await.unwrap();
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run.status, baton_core::RunStatus::Finished);
    assert_eq!(
        std::path::Path::new(&run.workspace),
        ws.path().canonicalize().unwrap()
    );
    assert_eq!(run.event_count as usize, streamed.len());

    let (ws_path, home_path) = (ws.path().to_owned(), home.path().to_owned());
    let url_for_cli = url.clone();
    let short = run.id.short().to_owned();
    let (ls, status, logs, env_status, other_ls) = tokio::task::spawn_blocking(move || {
        let ls = baton_cmd(&ws_path, &home_path)
            .args(["--store", &url_for_cli, "ls"])
            .output()
            .unwrap();
        let status = baton_cmd(&ws_path, &home_path)
            .args(["status", "--store", &url_for_cli])
            .output()
            .unwrap();
        let logs = baton_cmd(&ws_path, &home_path)
            .args(["logs", "--json", "--store", &url_for_cli])
            .output()
            .unwrap();
        // The environment variable works alike, and the flag wins over it.
        let env_status = baton_cmd(&ws_path, &home_path)
            .env("BATON_STORE", &url_for_cli)
            .args(["status", &short])
            .output()
            .unwrap();
        // A shared store lists, for another workspace, only that workspace's runs.
        let elsewhere = tempfile::tempdir().unwrap();
        let other_ls = baton_cmd(elsewhere.path(), &home_path)
            .env("BATON_STORE", "mysql://nobody@nowhere/x")
            .args(["ls", "--store", &url_for_cli])
            .output()
            .unwrap();
        (ls, status, logs, env_status, other_ls)
    })
    .await
    .unwrap();

    let ls = stdout_of(&ls);
    assert!(ls.contains(run.id.short()), "{ls}");
    assert!(ls.contains("finished"), "{ls}");
    assert!(ls.contains("write the notes"), "{ls}");

    let status = stdout_of(&status);
    assert!(
        status.contains(&format!("run        {}", run.id)),
        "{status}"
    );
    assert!(status.contains("status     finished"), "{status}");
    assert!(status.contains("summary    notes written"), "{status}");
    assert_eq!(stdout_of(&env_status), status);

    let logged: Vec<serde_json::Value> = stdout_of(&logs)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(logged, streamed, "the journal is what was streamed");

    assert_eq!(stdout_of(&other_ls).trim(), "no runs yet");
}

#[test]
fn an_unreachable_store_is_named_without_its_password() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = baton_cmd(ws.path(), home.path())
        .env("BATON_STORE", "postgres://baton:hunter2@127.0.0.1:1/runs")
        .arg("ls")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot reach the store at postgres://baton:***@127.0.0.1:1/runs"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2"), "{stderr}");

    let out = baton_cmd(ws.path(), home.path())
        .args(["ls", "--store", "mysql://root@127.0.0.1/runs"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unsupported store"), "{stderr}");
}

/// A run paused at its turn limit resumes from its Postgres journal (the store named by
/// `BATON_STORE` this time) without asking for any turn twice, and gives its lease back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_run_resumes_from_postgres_without_repeating_a_turn() {
    let schema = PgTestSchema::create().await;
    let url = schema.url();
    let server = ScriptedServer::start(script()).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();

    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--store", &url, "--max-turns", "1", "write the notes"],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");

    let (w, h, u) = (ws.path().to_owned(), home.path().to_owned(), url.clone());
    let out = tokio::task::spawn_blocking(move || {
        baton_cmd(&w, &h)
            .env("BATON_STORE", &u)
            .args(["resume", "--last", "--max-turns", "5"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_finished(&out);
    assert_eq!(
        server.requests_per_turn(),
        vec![1, 1],
        "no turn was asked twice"
    );
    let runs = schema.store().await.list_runs().await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, baton_core::RunStatus::Finished);
    assert!(runs[0].holder.is_none(), "the lease was released");
}
