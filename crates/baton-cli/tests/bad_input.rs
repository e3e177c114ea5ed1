#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Bad input of every kind gets a clear error and loses nothing.

mod support;

use std::time::Duration;

use serde_json::json;
use support::*;

fn run_output(cmd: std::process::Command) -> std::process::Output {
    let mut cmd = cmd;
    cmd.output().expect("run baton")
}

#[test]
fn no_model_configured_explains_how_and_exits_2() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.args(["run", "do something"]);
    let out = run_output(cmd);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "no model configured",
        "BATON_BASE_URL",
        "--base-url",
        ".baton/config.toml",
        "BATON_API_KEY",
    ] {
        assert!(stderr.contains(needle), "missing {needle:?} in: {stderr}");
    }
    assert!(
        !ws.path().join(".baton").exists() && !state_dir(ws.path(), home.path()).root().exists(),
        "nothing should be created without a model"
    );
}

#[test]
fn malformed_config_file_is_named() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".baton")).unwrap();
    std::fs::write(ws.path().join(".baton/config.toml"), "base_url = [unclosed").unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.args(["run", "x"]);
    let out = run_output(cmd);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(".baton/config.toml"));
}

#[test]
fn garbage_database_is_named_and_left_untouched() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let db = journal_path(ws.path(), home.path());
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    let garbage: Vec<u8> = (0..10_000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&db, &garbage).unwrap();
    for args in [
        vec![
            "run",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
            "x",
        ],
        vec!["status"],
        vec!["resume", "--last"],
    ] {
        let mut cmd = baton(ws.path(), home.path());
        cmd.args(&args);
        let out = run_output(cmd);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&db.display().to_string()),
            "{args:?}: {stderr}"
        );
        assert_eq!(
            std::fs::read(&db).unwrap(),
            garbage,
            "{args:?} changed the file"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_database_is_named_and_left_untouched() {
    let server = ScriptedServer::start(vec![turn(&[("finish", json!({"summary": "ok"}))])]).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = run_against(&server, ws.path(), home.path(), &["x"]).await;
    assert_finished(&out);
    let db = journal_path(ws.path(), home.path());
    // A clean exit checkpoints the WAL, so the main file holds the whole journal.
    let wal = db.with_file_name("baton.db-wal");
    assert!(!wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0);
    let bytes = std::fs::read(&db).unwrap();
    let truncated = &bytes[..bytes.len() / 2];
    std::fs::write(&db, truncated).unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.arg("status");
    let out = run_output(cmd);
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&db.display().to_string()));
    assert_eq!(std::fs::read(&db).unwrap(), truncated);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_arguments_and_unknown_tools_go_back_to_the_model() {
    let server = ScriptedServer::start(vec![
        raw_turn(&[
            ("write_file", r#"{"path": "x.txt", "content": "#),
            ("launch_rockets", "{}"),
        ]),
        turn(&[("finish", json!({"summary": "recovered"}))]),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = run_against(&server, ws.path(), home.path(), &["x"]).await;
    assert_finished(&out);
    let journal = journal(ws.path(), home.path());
    let results = of_type(&journal, "tool_call_finished");
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["result"]["outcome"], "error");
    assert_eq!(results[1]["result"]["outcome"], "error");
    assert!(!ws.path().join("x.txt").exists());
    let second = &server.received()[1].body["messages"];
    let tool_texts: Vec<&str> = second
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert!(
        tool_texts[0].to_lowercase().contains("json"),
        "{tool_texts:?}"
    );
    assert!(
        tool_texts[1].contains("launch_rockets") && tool_texts[1].contains("read_file"),
        "{tool_texts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_megabytes_of_output_are_capped() {
    let server = ScriptedServer::start(vec![
        turn(&[(
            "shell",
            json!({"command": "yes 0123456789 | head -c 50000000; echo END"}),
        )]),
        turn(&[("finish", json!({"summary": "ok"}))]),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = run_against(&server, ws.path(), home.path(), &["x"]).await;
    assert_finished(&out);
    let journal = journal(ws.path(), home.path());
    let content = of_type(&journal, "tool_call_finished")[0]["result"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        content.len() < 200_000,
        "output not capped: {} bytes",
        content.len()
    );
    assert!(content.contains("cut"), "no note of what was cut");
    assert!(
        content.contains("END"),
        "the tail of the output was not kept"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_process_cannot_resume_a_run_in_progress() {
    let mut slow = turn(&[("finish", json!({"summary": "ok"}))]);
    // Long enough that the second process certainly tries while the first still holds the run.
    slow.delay = Some(Duration::from_secs(8));
    let server = ScriptedServer::start(vec![slow]).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.args([
        "run",
        "--base-url",
        &server.base_url(),
        "--model",
        "m",
        "--json",
        "x",
    ]);
    let (w, h) = (ws.path().to_path_buf(), home.path().to_path_buf());
    let second = tokio::task::spawn_blocking(move || {
        let (child, mut events) = spawn_json(cmd);
        events
            .until(|e| e["type"] == "model_call_started")
            .expect("run started");
        let mut resume = baton(&w, &h);
        resume.args(["resume", "--last"]);
        let second = run_output(resume);
        let first = child.wait_with_output().unwrap();
        (second, first)
    })
    .await
    .unwrap();
    let (second, first) = second;
    assert_eq!(second.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains("pid"), "{stderr}");
    assert_eq!(
        first.status.code(),
        Some(0),
        "the first process was disturbed"
    );
    let journal = journal(ws.path(), home.path());
    assert_eq!(of_type(&journal, "run_resumed").len(), 0);
    assert_eq!(server.requests_per_turn(), vec![1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_key_never_reaches_the_journal_or_commands() {
    let secret = "sk-test-0123456789abcdef";
    let server = ScriptedServer::start(vec![
        turn(&[(
            "shell",
            json!({"command": format!("echo key=$BATON_API_KEY; echo {secret}")}),
        )]),
        turn(&[("finish", json!({"summary": "ok"}))]),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.env("BATON_API_KEY", secret).args([
        "run",
        "--base-url",
        &server.base_url(),
        "--model",
        "m",
        "--json",
        "x",
    ]);
    let out = tokio::task::spawn_blocking(move || run_output(cmd))
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains(secret));
    let journal = journal(ws.path(), home.path());
    let shell = of_type(&journal, "tool_call_finished")[0]["result"]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        shell.contains("key=\n") || shell.contains("key=\r\n") || shell.contains("key="),
        "{shell}"
    );
    assert!(
        !shell.contains(secret) && shell.contains("[REDACTED]"),
        "{shell}"
    );
    // Everything in the state directory, the journal and the log files included.
    let contains_secret =
        |bytes: &[u8]| bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
    let state = state_dir(ws.path(), home.path());
    assert!(state.logs().is_dir() && state.journal().is_file());
    let mut dirs = vec![state.root().to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                assert!(
                    !contains_secret(&bytes),
                    "secret found in {}",
                    path.display()
                );
            }
        }
    }
    // Snapshot objects are compressed: read every one of them back through git.
    let objects = std::process::Command::new("git")
        .args(["cat-file", "--batch-all-objects", "--batch"])
        .env("GIT_DIR", state.shadow_git())
        .output()
        .expect("git is needed for this test (apt-get install git)");
    assert!(objects.status.success());
    assert!(!objects.stdout.is_empty(), "the run took snapshots");
    assert!(
        !contains_secret(&objects.stdout),
        "secret found in a snapshot"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_a_copied_workspace_refuses_to_touch_the_original() {
    let server = ScriptedServer::start(vec![turn(&[("finish", json!({"summary": "ok"}))])]).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.args([
        "run",
        "--base-url",
        &server.base_url(),
        "--model",
        "m",
        "--max-turns",
        "0",
        "x",
    ]);
    let out = tokio::task::spawn_blocking(move || run_output(cmd))
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Copied in the old layout (`.baton/baton.db`), which the next command moves to the copy's
    // own state directory first.
    let copy = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(copy.path().join(".baton")).unwrap();
    std::fs::copy(
        journal_path(ws.path(), home.path()),
        copy.path().join(".baton/baton.db"),
    )
    .unwrap();
    let mut cmd = baton(copy.path(), home.path());
    cmd.args(["resume", "--last", "--max-turns", "5"]);
    let out = run_output(cmd);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&ws.path().canonicalize().unwrap().display().to_string()),
        "{stderr}"
    );
    assert!(
        stderr.contains("moved this workspace's state (baton.db)"),
        "{stderr}"
    );
    assert!(!copy.path().join(".baton/baton.db").exists());
    assert!(journal_path(copy.path(), home.path()).is_file());
    assert!(
        server.received().is_empty(),
        "nothing may run for a refused resume"
    );
}

#[test]
fn an_unknown_tool_choice_is_a_usage_error() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.args([
        "run",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--tool-choice",
        "launch_rockets",
        "x",
    ]);
    let out = run_output(cmd);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("launch_rockets") && stderr.contains("write_file"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_tool_choice_on_resume_is_a_usage_error_and_the_run_is_untouched() {
    let server = ScriptedServer::start(vec![turn(&[("finish", json!({"summary": "ok"}))])]).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let url = server.base_url();
    let out = baton_blocking(
        ws.path(),
        home.path(),
        &[
            "run",
            "--base-url",
            &url,
            "--model",
            "m",
            "--max-turns",
            "0",
            "x",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(3), "paused at max turns: {out:?}");
    let before = journal(ws.path(), home.path());
    let out = baton_blocking(
        ws.path(),
        home.path(),
        &["resume", "--last", "--tool-choice", "launch_rockets"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("launch_rockets") && stderr.contains("write_file"),
        "{stderr}"
    );
    assert_eq!(journal(ws.path(), home.path()), before, "nothing journaled");
    assert!(server.received().is_empty(), "nothing sent to the model");
}

#[test]
fn an_unknown_provider_is_a_usage_error_naming_the_known_ones() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.args(["run", "--provider", "skynet", "--model", "m", "x"]);
    let out = run_output(cmd);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("skynet") && stderr.contains("anthropic") && stderr.contains("llamacpp"),
        "{stderr}"
    );
}

#[test]
fn a_missing_base_url_is_named_and_the_real_user_config_path_shown() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let xdg = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.env("XDG_CONFIG_HOME", xdg.path())
        .args(["run", "--model", "m", "x"]);
    let out = run_output(cmd);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no base URL configured"), "{stderr}");
    assert!(
        stderr.contains(&xdg.path().join("baton/config.toml").display().to_string()),
        "{stderr}"
    );
}

#[test]
fn a_malformed_settings_layer_from_a_supervisor_is_a_usage_error_naming_the_key() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut cmd = baton(ws.path(), home.path());
    cmd.args([
        "run",
        "--no-supervise",
        "--settings-layer",
        r#"{"modle": "m"}"#,
        "goal",
    ]);
    let out = run_output(cmd);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--settings-layer"), "{stderr}");
    assert!(stderr.contains("modle"), "{stderr}");
}
