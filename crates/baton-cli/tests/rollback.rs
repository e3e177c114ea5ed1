#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Self-healing with the real binary: a task that uses up its fix attempts is rolled back to the
//! snapshot it started from — byte for byte — and solved by a second approach; kill -9 right
//! after the rollback started, then resume, gives the same result.

mod support;

use std::path::Path;

use serde_json::json;
use support::*;

const PLAN: &str = r#"
[[task]]
id = "t"
title = "Make f.txt good"
instructions = "Write the word good into f.txt."
check = "grep -q good f.txt"
"#;

/// Approach 1 wrecks the workspace and gets the check wrong; approach 2 does it right.
async fn server() -> ScriptedServer {
    ScriptedServer::start_by_task(&[
        (
            "t",
            vec![turn(&[
                (
                    "shell",
                    json!({"command": "rm keep.bin && echo junk > junk.txt && mkdir -p new/dir && echo x > new/dir/y && printf bad > f.txt && echo changed >> orig.txt && chmod -x run.sh"}),
                ),
                ("finish", json!({"summary": "wrote f.txt"})),
            ])],
        ),
        (
            "t#2",
            vec![turn(&[
                ("write_file", json!({"path": "f.txt", "content": "good"})),
                ("finish", json!({"summary": "wrote good into f.txt"})),
            ])],
        ),
    ])
    .await
}

fn seed(ws: &Path) {
    std::fs::write(ws.join("orig.txt"), "original\n").unwrap();
    std::fs::write(ws.join("keep.bin"), [0u8, 159, 146, 150, 255, 0, 1]).unwrap();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
    std::fs::write(ws.join("run.sh"), "#!/bin/sh\necho hi\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(ws.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The workspace the run should end with: the seed, plus approach 2's file.
fn assert_rolled_back_and_solved(ws: &Path, initial: &[(String, Vec<u8>)]) {
    let mut expected = initial.to_vec();
    expected.push(("f.txt".into(), b"good".to_vec()));
    expected.sort();
    assert_eq!(snapshot_files(ws), expected);
    assert_eq!(mode(&ws.join("run.sh")), 0o755, "the exec bit is restored");
    assert!(
        !ws.join("new").exists(),
        "directories created by approach 1 are gone"
    );
}

fn plan_path(dir: &Path) -> String {
    let path = dir.join("plan.toml");
    std::fs::write(&path, PLAN).unwrap();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_exhausts_its_attempts_is_rolled_back_and_solved_another_way() {
    let server = server().await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    seed(ws.path());
    let initial = snapshot_files(ws.path());
    let plan = plan_path(dir.path());
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--plan", &plan, "--fix-attempts", "1", "goal"],
    )
    .await;
    assert_finished(&out);
    assert_rolled_back_and_solved(ws.path(), &initial);
    let events = journal(ws.path(), home.path());
    let started = of_type(&events, "rollback_started");
    assert_eq!(started.len(), 1);
    let reason = started[0]["reason"].as_str().unwrap();
    assert!(reason.contains("grep -q good f.txt"), "{reason}");
    // The rollback went to the snapshot the task started from.
    let first_snapshot = of_type(&events, "snapshot_taken")[0]["snapshot"].clone();
    assert_eq!(started[0]["snapshot"], first_snapshot);
    assert_eq!(of_type(&events, "rollback_finished").len(), 1);
    let approaches: Vec<u64> = of_type(&events, "task_started")
        .iter()
        .map(|e| e["approach"].as_u64().unwrap())
        .collect();
    assert_eq!(approaches, [1, 2]);
    // The second approach was told what failed, in a fresh context.
    let second = server
        .received()
        .into_iter()
        .find(|r| task_key(&r.body) == "t#2")
        .expect("approach 2 asked the model");
    let body = second.body.to_string();
    assert!(body.contains("Approach 1 failed"), "{body}");
    assert!(
        !body.contains("junk.txt"),
        "approach 1's conversation leaked: {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_rollback_then_resume_restores_and_goes_on() {
    let server = server().await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    seed(ws.path());
    // Enough files that the restore takes a moment.
    for i in 0..2000 {
        std::fs::write(ws.path().join(format!("src/m{i}.rs")), format!("// {i}\n")).unwrap();
    }
    let initial = snapshot_files(ws.path());
    let plan = plan_path(dir.path());
    let mut cmd = baton(ws.path(), home.path());
    cmd.args([
        "run",
        "--no-supervise",
        "--json",
        "--base-url",
        &server.base_url(),
        "--model",
        "m",
    ])
    .args(["--plan", &plan, "--fix-attempts", "1", "goal"]);
    let (mut child, mut lines) = spawn_json(cmd);
    let seen = tokio::task::spawn_blocking(move || {
        let event = lines.until(|e| e["type"] == "rollback_started");
        (event, lines)
    })
    .await
    .unwrap();
    assert!(seen.0.is_some(), "the rollback never started");
    child.kill().unwrap();
    child.wait().unwrap();
    drop(seen);

    let out = baton_blocking(
        ws.path(),
        home.path(),
        &["resume", "--last", "--no-supervise"],
    )
    .await;
    assert_finished(&out);
    assert_rolled_back_and_solved(ws.path(), &initial);
    let events = journal(ws.path(), home.path());
    assert_eq!(of_type(&events, "rollback_started").len(), 1);
    assert_eq!(of_type(&events, "rollback_finished").len(), 1);
    assert_eq!(of_type(&events, "task_finished").len(), 1);
}
