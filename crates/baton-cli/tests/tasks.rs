#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Task graphs with the real binary and a scripted model: verify-and-fix, fresh contexts with a
//! handoff, dependent tasks skipped after a failure, the planner and plan review, plan
//! validation errors, and kill -9 during a check.

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::*;

fn write_and_finish(path: &str, content: &str, summary: &str) -> Turn {
    turn(&[
        ("write_file", json!({"path": path, "content": content})),
        ("finish", json!({"summary": summary})),
    ])
}

fn plan_file(dir: &Path, text: &str) -> String {
    let path = dir.join("plan.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect()
}

const THREE_TASKS: &str = r#"
[[task]]
id = "a"
title = "Write a"
instructions = "Create a.txt."
check = "test -f a.txt"

[[task]]
id = "b"
title = "Write b"
instructions = "Create b.txt containing the word fixed."
deps = ["a"]
check = "grep -q fixed b.txt"

[[task]]
id = "c"
title = "Write c"
instructions = "Create c.txt."
deps = ["b"]
check = "test -f c.txt"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_tasks_where_the_second_check_fails_twice_then_passes() {
    let server = ScriptedServer::start_by_task(&[
        (
            "a",
            vec![write_and_finish("a.txt", "A", "wrote the first file")],
        ),
        (
            "b",
            vec![
                write_and_finish("b.txt", "broken", "b written"),
                write_and_finish("b.txt", "still broken", "b rewritten"),
                write_and_finish("b.txt", "fixed", "b fixed for good"),
            ],
        ),
        ("c", vec![write_and_finish("c.txt", "C", "c written")]),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plan = plan_file(dir.path(), THREE_TASKS);
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &[
            "--plan",
            &plan,
            "--check",
            "test -f a.txt && test -f c.txt",
            "three files",
        ],
    )
    .await;
    assert_finished(&out);
    let events = journal(ws.path(), home.path());
    let checks: Vec<(String, bool)> = of_type(&events, "check_finished")
        .iter()
        .map(|e| {
            (
                e["task"].as_str().unwrap_or("(final)").to_string(),
                e["passed"].as_bool().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, bool)> = [
        ("a", true),
        ("b", false),
        ("b", false),
        ("b", true),
        ("c", true),
        ("(final)", true),
    ]
    .iter()
    .map(|(t, p)| (t.to_string(), *p))
    .collect();
    assert_eq!(checks, expected);
    let finished: Vec<&str> = of_type(&events, "task_finished")
        .iter()
        .map(|e| e["task"].as_str().unwrap())
        .collect();
    assert_eq!(finished, ["a", "b", "c"]);
    let kinds = types(&events);
    assert_eq!(kinds.last().unwrap(), "run_finished");
    assert_eq!(kinds.iter().filter(|k| *k == "plan_set").count(), 1);
    let report = of_type(&events, "run_finished")[0]["summary"]
        .as_str()
        .unwrap();
    assert!(
        report.starts_with("3 of 3 tasks verified; the final check passed"),
        "{report}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("b.txt")).unwrap(),
        "fixed"
    );

    // Fresh context per task: task b's first request carries a's summary (the handoff) but
    // none of a's conversation; its later requests carry the failed check's real output.
    let received = server.received();
    let b_requests: Vec<String> = received
        .iter()
        .filter(|r| task_key(&r.body) == "b")
        .map(|r| r.body.to_string())
        .collect();
    assert_eq!(b_requests.len(), 3);
    assert!(b_requests[0].contains("wrote the first file"));
    assert!(!b_requests[0].contains("a.txt"), "{}", b_requests[0]);
    assert!(
        b_requests[1].contains("The acceptance check `grep -q fixed b.txt` failed (exit code 1)")
    );
    assert!(!b_requests[0].contains("acceptance check `grep"));

    // `baton plan` and `baton status` show the graph.
    let shown = baton(ws.path(), home.path()).arg("plan").output().unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    for line in ["a ", "b ", "c "] {
        assert!(
            shown
                .lines()
                .any(|l| l.starts_with(line) && l.contains("verified")),
            "{shown}"
        );
    }
    assert!(shown.contains("final check (passed)"), "{shown}");
    let status = baton(ws.path(), home.path())
        .arg("status")
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains("task graph") && status.contains("Write b"),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_task_skips_its_dependents_and_the_rest_still_runs() {
    let server = ScriptedServer::start_by_task(&[
        ("a", vec![turn(&[("finish", json!({"summary": "tried"}))])]),
        ("c", vec![write_and_finish("c.txt", "C", "c written")]),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plan = plan_file(
        dir.path(),
        r#"
[[task]]
id = "a"
instructions = "Make the impossible check pass."
check = "false"
[[task]]
id = "b"
instructions = "Build on a."
deps = ["a"]
check = "true"
[[task]]
id = "c"
instructions = "Independent work."
check = "test -f c.txt"
"#,
    );
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &[
            "--plan",
            &plan,
            "--fix-attempts",
            "1",
            "--approaches",
            "1",
            "goal",
        ],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = journal(ws.path(), home.path());
    assert_eq!(of_type(&events, "task_failed")[0]["task"], "a");
    let skipped = of_type(&events, "task_skipped");
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0]["task"], "b");
    assert!(skipped[0]["reason"].as_str().unwrap().contains("`a`"));
    assert_eq!(of_type(&events, "task_finished")[0]["task"], "c");
    let report = of_type(&events, "run_failed")[0]["error"].as_str().unwrap();
    assert!(
        report.starts_with("1 of 3 tasks verified, 1 failed, 1 skipped"),
        "{report}"
    );
    // b never started: no model call was made for it.
    assert!(server.received().iter().all(|r| task_key(&r.body) != "b"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_planner_plans_pauses_for_review_and_an_edited_plan_replaces_it() {
    let submitted = json!({"tasks": [
        {"id": "one", "title": "First", "instructions": "Create one.txt.", "deps": [], "check": "test -f one.txt"},
        {"id": "two", "title": "Second", "instructions": "Create two.txt.", "deps": ["one"], "check": "test -f two.txt"}
    ]});
    let server = ScriptedServer::start_by_task(&[
        (
            "plan",
            vec![
                // An invalid plan first: the model is told what is wrong and tries again.
                turn(&[("submit_plan", json!({"tasks": [{"id": "x", "title": "X", "instructions": "i", "deps": ["nope"], "check": "true"}]}))]),
                turn(&[("submit_plan", submitted)]),
            ],
        ),
        ("one", vec![write_and_finish("one.txt", "1", "one done")]),
        ("three", vec![write_and_finish("three.txt", "3", "three done")]),
    ])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--plan-only", "make files"],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = journal(ws.path(), home.path());
    let results = of_type(&events, "tool_call_finished");
    assert!(
        results[0]["result"]["content"]
            .as_str()
            .unwrap()
            .contains("depends on `nope`")
    );
    assert_eq!(of_type(&events, "plan_set")[0]["source"], "planner");
    assert_eq!(of_type(&events, "run_paused")[0]["reason"], "plan_review");
    let run_id = events[0]["run_id"].as_str().unwrap().to_string();
    let review = ws.path().join(format!(".baton/plans/{run_id}.toml"));
    let written = std::fs::read_to_string(&review).unwrap();
    assert!(written.contains("id = \"two\""), "{written}");

    // The person replaces task two with task three and resumes with the edited file.
    let edited = written
        .replace("\"two\"", "\"three\"")
        .replace("two.txt", "three.txt")
        .replace("Second", "Third");
    std::fs::write(&review, edited).unwrap();
    let review_arg = review.display().to_string();
    let out = baton_blocking(
        ws.path(),
        home.path(),
        &["resume", "--last", "--plan", &review_arg],
    )
    .await;
    assert_finished(&out);
    let events = journal(ws.path(), home.path());
    let sources: Vec<&str> = of_type(&events, "plan_set")
        .iter()
        .map(|e| e["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources, ["planner", "user"]);
    let finished: Vec<&str> = of_type(&events, "task_finished")
        .iter()
        .map(|e| e["task"].as_str().unwrap())
        .collect();
    assert_eq!(finished, ["one", "three"]);
    assert!(ws.path().join("three.txt").exists() && !ws.path().join("two.txt").exists());
}

#[test]
fn invalid_plan_files_are_usage_errors_naming_the_problem() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[[task]]\nid = \"a\"\ninstructions = \"i\"\ncheck = \"true\"\ndeps = [\"b\"]\n\
             [[task]]\nid = \"b\"\ninstructions = \"i\"\ncheck = \"true\"\ndeps = [\"a\"]\n",
            "cycle: a -> b -> a",
        ),
        (
            "[[task]]\nid = \"a\"\ninstructions = \"i\"\n",
            "task `a` has no `check`",
        ),
        (
            "[[task]]\nid = \"a\"\ninstructions = \"i\"\ncheck = \"true\"\n\
             [[task]]\nid = \"a\"\ninstructions = \"i\"\ncheck = \"true\"\n",
            "used twice",
        ),
        (
            "[[task]]\nid = \"a\"\ninstructions = \"i\"\ncheck = \"true\"\ndeps = [\"ghost\"]\n",
            "depends on `ghost`",
        ),
    ];
    for (text, expected) in cases {
        let plan = plan_file(ws.path(), text);
        let out = baton(ws.path(), home.path())
            .args([
                "run",
                "--base-url",
                "http://127.0.0.1:9/v1",
                "--model",
                "m",
                "--plan",
            ])
            .args([plan.as_str(), "goal"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expected), "{expected:?} not in {stderr}");
        assert!(
            stderr.contains("plan.toml"),
            "the error names the file: {stderr}"
        );
    }
    // A valid file with --plan-only is checked and printed; nothing starts.
    let plan = plan_file(ws.path(), THREE_TASKS);
    let out = baton(ws.path(), home.path())
        .args([
            "run",
            "--model",
            "m",
            "--plan",
            &plan,
            "--plan-only",
            "goal",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("plan OK: 3 tasks"));
    assert!(!journal_path(ws.path(), home.path()).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_check_reruns_the_check_on_resume_without_asking_the_model_again() {
    let server = ScriptedServer::start_by_task(&[(
        "slow",
        vec![write_and_finish("done.txt", "ok", "done")],
    )])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The first run of the check blocks (baton is killed meanwhile); a rerun passes at once.
    let plan = plan_file(
        dir.path(),
        r#"
[[task]]
id = "slow"
instructions = "Create done.txt."
check = "if [ -f .check-ran ]; then test -f done.txt; else touch .check-ran; sleep 60; fi"
"#,
    );
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
    .args(["--plan", &plan, "goal"]);
    let (mut child, mut lines) = spawn_json(cmd);
    let started = tokio::task::spawn_blocking(move || {
        let event = lines.until(|e| e["type"] == "check_started");
        (event, lines)
    })
    .await
    .unwrap();
    assert!(started.0.is_some(), "the check never started");
    // Wait until the check's first run has begun, then kill baton mid-check.
    for _ in 0..200 {
        if ws.path().join(".check-ran").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ws.path().join(".check-ran").exists());
    child.kill().unwrap();
    child.wait().unwrap();
    drop(started);

    let requests_before = server.received().len();
    let out = baton_blocking(
        ws.path(),
        home.path(),
        &["resume", "--last", "--no-supervise"],
    )
    .await;
    assert_finished(&out);
    assert_eq!(
        server.received().len(),
        requests_before,
        "the model was asked again"
    );
    let events = journal(ws.path(), home.path());
    let checks = of_type(&events, "check_started");
    assert_eq!(
        checks.len(),
        1,
        "the open check is rerun, not journaled again"
    );
    let finished = of_type(&events, "check_finished");
    assert_eq!(finished.len(), 1);
    assert_eq!(finished[0]["passed"], true);
    assert_eq!(of_type(&events, "task_finished").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_budget_pauses_the_run_and_resume_raises_it() {
    let server = ScriptedServer::start_by_task(&[(
        "a",
        vec![
            turn(&[("write_file", json!({"path": "a.txt", "content": "A"}))]),
            turn(&[("finish", json!({"summary": "a done"}))]),
        ],
    )])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".baton")).unwrap();
    // Output at $1,000 per million tokens: a call's worst case is 4,096 tokens ($4.096); the
    // scripted calls cost about $0.01. With $4.10 per task the task's second call could pass it.
    std::fs::write(
        ws.path().join(".baton/config.toml"),
        "[prices.\"m\"]\ninput_per_mtok = 0.0\noutput_per_mtok = 1000.0\n",
    )
    .unwrap();
    trust_workspace(ws.path(), home.path());
    let plan = plan_file(
        dir.path(),
        "[[task]]\nid = \"a\"\ninstructions = \"Create a.txt.\"\ncheck = \"test -f a.txt\"\n",
    );
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--plan", &plan, "--task-budget-usd", "4.10", "goal"],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = journal(ws.path(), home.path());
    let paused = of_type(&events, "run_paused");
    assert_eq!(paused[0]["reason"], "budget");
    let detail = paused[0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("task `a`") && detail.contains("--task-budget-usd"),
        "{detail}"
    );
    assert_eq!(of_type(&events, "model_call_finished").len(), 1);

    let out = baton_blocking(
        ws.path(),
        home.path(),
        &["resume", "--last", "--task-budget-usd", "20"],
    )
    .await;
    assert_finished(&out);
    let events = journal(ws.path(), home.path());
    let resumed = of_type(&events, "run_resumed");
    assert_eq!(resumed[0]["settings"]["tasks"]["budget"]["usd"], 20.0);
    assert_eq!(of_type(&events, "task_finished").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_risky_task_snapshots_the_workspace_before_each_changing_call() {
    let server = ScriptedServer::start_by_task(&[(
        "wild",
        vec![turn(&[
            ("write_file", json!({"path": "a.txt", "content": "A"})),
            ("shell", json!({"command": "cp a.txt b.txt"})),
            ("finish", json!({"summary": "copied"})),
        ])],
    )])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plan = plan_file(
        dir.path(),
        "[[task]]\nid = \"wild\"\ninstructions = \"i\"\ncheck = \"test -f b.txt\"\nrisky = true\n",
    );
    let out = run_against(&server, ws.path(), home.path(), &["--plan", &plan, "goal"]).await;
    assert_finished(&out);
    let events = journal(ws.path(), home.path());
    // The snapshot right before the shell call holds a.txt (written by the call before it).
    let shell_start = events
        .iter()
        .position(|e| e["type"] == "tool_call_started" && e["name"] == "shell")
        .unwrap();
    let before = &events[shell_start - 1];
    assert_eq!(before["type"], "snapshot_taken", "{before}");
    assert_eq!(before["reason"], "before_risky");
    let reasons: Vec<&str> = of_type(&events, "snapshot_taken")
        .iter()
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons.first(), Some(&"run_start"));
    assert_eq!(reasons.last(), Some(&"task_verified"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_turn_limit_pauses_the_run_and_resume_raises_it() {
    let server = ScriptedServer::start_by_task(&[(
        "long",
        vec![
            turn(&[("write_file", json!({"path": "a.txt", "content": "A"}))]),
            turn(&[("write_file", json!({"path": "b.txt", "content": "B"}))]),
            turn(&[("finish", json!({"summary": "both written"}))]),
        ],
    )])
    .await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plan = plan_file(
        dir.path(),
        "[[task]]\nid = \"long\"\ninstructions = \"i\"\ncheck = \"test -f b.txt\"\n",
    );
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--plan", &plan, "--task-max-turns", "2", "goal"],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = journal(ws.path(), home.path());
    assert_eq!(of_type(&events, "turn_started").len(), 2);
    let paused = of_type(&events, "run_paused");
    assert_eq!(paused[0]["reason"], "max_turns");
    let detail = paused[0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("task `long`") && detail.contains("--task-max-turns 4"),
        "{detail}"
    );

    let out = baton_blocking(
        ws.path(),
        home.path(),
        &["resume", "--last", "--task-max-turns", "4"],
    )
    .await;
    assert_finished(&out);
    let events = journal(ws.path(), home.path());
    assert_eq!(of_type(&events, "turn_started").len(), 3);
    assert_eq!(
        of_type(&events, "run_resumed")[0]["settings"]["tasks"]["max_turns"],
        4
    );
}
