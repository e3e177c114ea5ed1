#![allow(clippy::unwrap_used, clippy::expect_used)]
//! How runs end, with the real binary against a scripted OpenAI-compatible server whose model
//! ends the way most models do — a final reply without a tool call — and keeps saying it:
//! `baton run` finishes after one nudge (exit 0), `--on-text-reply pause` pauses, a kill -9
//! after the nudge resumes without a second nudge; planning runs offer only read-only tools,
//! `--plan-only` leaves the workspace byte-identical and writes a loadable plan, and a planner
//! that never plans pauses with `no_plan`.

mod support;

use serde_json::{Value, json};
use support::*;

fn script() -> Vec<Turn> {
    vec![
        turn(&[("list_dir", json!({}))]),
        turn(&[(
            "write_file",
            json!({"path": "answer.txt", "content": "4\n"}),
        )]),
        text_turn("Done: answer.txt holds 4."),
    ]
}

fn pause_reason(events: &[Value]) -> Option<String> {
    of_type(events, "run_paused")
        .last()
        .map(|e| e["reason"].as_str().unwrap().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_ends_with_text_finishes_after_one_nudge() {
    let server = ScriptedServer::start_repeating_last(script()).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = run_against(&server, ws.path(), home.path(), &["write the answer"]).await;
    assert_finished(&out);
    // The script, plus the one request after the nudge (not 200).
    assert_eq!(server.received().len(), script().len() + 1);
    let events = journal(ws.path(), home.path());
    assert_eq!(of_type(&events, "note_added").len(), 1);
    assert_eq!(of_type(&events, "text_end_accepted").len(), 1);
    let finished = of_type(&events, "run_finished");
    assert_eq!(finished[0]["finished_by"], "text");
    assert_eq!(finished[0]["summary"], "Done: answer.txt holds 4.");
    let status = baton(ws.path(), home.path())
        .arg("status")
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("finished"), "{status}");
    assert!(status.contains("the model's text reply"), "{status}");
    let logs = baton(ws.path(), home.path()).arg("logs").output().unwrap();
    let logs = String::from_utf8_lossy(&logs.stdout);
    assert!(logs.contains("FINISHED (by a text reply)"), "{logs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_text_reply_pause_pauses_and_resume_can_accept_the_ending() {
    let server = ScriptedServer::start_repeating_last(script()).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--on-text-reply", "pause", "write the answer"],
    )
    .await;
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        pause_reason(&journal(ws.path(), home.path())).as_deref(),
        Some("text_reply")
    );
    let out = baton_blocking(
        ws.path(),
        home.path(),
        &["resume", "--last", "--on-text-reply", "finish"],
    )
    .await;
    assert_finished(&out);
    assert_eq!(server.received().len(), script().len() + 2);
    // A bad mode is a usage error that names the choices.
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--on-text-reply", "stop", "x"],
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("finish, nudge or pause"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nudge_mode_and_the_config_key_pause_with_loop_after_no_tool_turns() {
    let server = ScriptedServer::start_repeating_last(script()).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".baton")).unwrap();
    std::fs::write(
        ws.path().join(".baton/config.toml"),
        "on_text_reply = \"nudge\"\nno_tool_turns = 4\n",
    )
    .unwrap();
    trust_workspace(ws.path(), home.path());
    let out = run_against(&server, ws.path(), home.path(), &["write the answer"]).await;
    assert_eq!(out.status.code(), Some(3));
    let events = journal(ws.path(), home.path());
    assert_eq!(pause_reason(&events).as_deref(), Some("loop"));
    // Two tool turns, then four text replies in a row.
    assert_eq!(server.received().len(), 2 + 4);
    assert_eq!(of_type(&events, "text_end_accepted").len(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_nudge_resumes_without_a_second_nudge() {
    // The reply after the nudge is held back, so the kill lands while it is in flight.
    let mut turns = script();
    turns.push(Turn {
        delay: Some(std::time::Duration::from_secs(2)),
        ..text_turn("Done: answer.txt holds 4.")
    });
    let server = ScriptedServer::start(turns).await;
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
        "write the answer",
    ]);
    let (mut child, mut events) = spawn_json(cmd);
    assert!(events.until(|e| e["type"] == "note_added").is_some());
    assert!(
        events
            .until(|e| e["type"] == "model_call_started" && e["call"] == 4)
            .is_some()
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let out = baton_blocking(ws.path(), home.path(), &["resume", "--last"]).await;
    assert_finished(&out);
    let events = journal(ws.path(), home.path());
    assert_eq!(of_type(&events, "note_added").len(), 1);
    // Four answers journaled, none twice; only the one cut off in flight was asked for again.
    assert_eq!(of_type(&events, "model_call_finished").len(), 4);
    // The cut-off request may or may not have reached the server before the kill.
    let per_turn = server.requests_per_turn();
    assert_eq!(per_turn[..3], [1, 1, 1]);
    assert!((1..=2).contains(&per_turn[3]), "{per_turn:?}");
    assert_eq!(of_type(&events, "run_finished")[0]["finished_by"], "text");
}

fn workspace_with_calc() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("calc.py"), "print(2 - 2)\n").unwrap();
    ws
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_only_never_changes_the_workspace_and_writes_a_loadable_plan() {
    let plan = json!({"tasks": [
        {"id": "fix", "title": "Fix calc", "instructions": "Make calc.py print 4.", "deps": [],
         "check": "grep -q '2 + 2' calc.py"}
    ]});
    // Models do what they are not offered: write, a writing command, `finish` — then plan.
    let server = ScriptedServer::start_by_task(&[
        (
            "plan",
            vec![
                turn(&[("read_file", json!({"path": "calc.py"}))]),
                turn(&[(
                    "write_file",
                    json!({"path": "calc.py", "content": "print(4)\n"}),
                )]),
                turn(&[("shell", json!({"command": "echo 'print(4)' > calc.py"}))]),
                turn(&[("finish", json!({"summary": "fixed calc.py"}))]),
                turn(&[("submit_plan", plan)]),
            ],
        ),
        (
            "fix",
            vec![
                turn(&[(
                    "edit_file",
                    json!({"path": "calc.py", "old_string": "2 - 2", "new_string": "2 + 2"}),
                )]),
                text_turn("calc.py now prints 4."),
                text_turn("calc.py now prints 4."),
            ],
        ),
    ])
    .await;
    let ws = workspace_with_calc();
    let home = tempfile::tempdir().unwrap();
    let before = snapshot_files(ws.path());
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--plan-only", "make calc.py print 4"],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        snapshot_files(ws.path()),
        before,
        "--plan-only changed files"
    );
    let events = journal(ws.path(), home.path());
    assert_eq!(pause_reason(&events).as_deref(), Some("plan_review"));
    let results = of_type(&events, "tool_call_finished");
    let content = |i: usize| {
        results[i]["result"]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        content(1).contains("not available while planning"),
        "{}",
        content(1)
    );
    assert_ne!(results[2]["result"]["exit_code"], 0, "{}", content(2));
    assert!(content(3).contains("submit_plan"), "{}", content(3));
    assert_eq!(of_type(&events, "run_finished").len(), 0);
    // Planning requests offer only read-only tools, the shell and submit_plan.
    let offered = tool_names(&server.received()[0].body);
    assert!(offered.contains(&"submit_plan".to_string()), "{offered:?}");
    assert!(offered.contains(&"shell".to_string()), "{offered:?}");
    for absent in ["write_file", "edit_file", "finish"] {
        assert!(!offered.contains(&absent.to_string()), "{offered:?}");
    }

    // The plan file names the run and loads as a plan.
    let run_id = events[0]["run_id"].as_str().unwrap().to_string();
    let file = ws.path().join(format!(".baton/plans/{run_id}.toml"));
    let file_arg = file.display().to_string();
    let checked = baton(ws.path(), home.path())
        .args(["run", "--plan", &file_arg, "--plan-only", "x"])
        .output()
        .unwrap();
    assert_eq!(checked.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&checked.stdout).starts_with("plan OK: 1 tasks"));

    // `baton resume` works through it; now the tools that change files are offered.
    let out = baton_blocking(ws.path(), home.path(), &["resume", "--last"]).await;
    assert_finished(&out);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("calc.py")).unwrap(),
        "print(2 + 2)\n"
    );
    let task_request = server
        .received()
        .into_iter()
        .find(|r| task_key(&r.body) == "fix")
        .unwrap();
    assert!(tool_names(&task_request.body).contains(&"edit_file".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planner_that_never_plans_pauses_with_no_plan_after_one_nudge() {
    let server = ScriptedServer::start_by_task(&[
        (
            "plan",
            vec![
                text_turn("I would split this into three steps: read, fix, test."),
                text_turn("Done: the plan is read, fix, test."),
                text_turn("never asked for"),
            ],
        ),
        (
            "fix",
            vec![
                text_turn("Nothing to change: calc.py is fine."),
                text_turn("Nothing to change: calc.py is fine."),
            ],
        ),
    ])
    .await;
    let ws = workspace_with_calc();
    let home = tempfile::tempdir().unwrap();
    let before = snapshot_files(ws.path());
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--plan", "auto", "make calc.py print 4"],
    )
    .await;
    assert_eq!(out.status.code(), Some(3));
    let events = journal(ws.path(), home.path());
    assert_eq!(pause_reason(&events).as_deref(), Some("no_plan"));
    assert_eq!(server.received().len(), 2);
    assert_eq!(of_type(&events, "note_added").len(), 1);
    assert_eq!(snapshot_files(ws.path()), before);
    let plan = baton(ws.path(), home.path()).arg("plan").output().unwrap();
    let plan = String::from_utf8_lossy(&plan.stdout);
    assert!(plan.contains("never submitted a plan"), "{plan}");
    assert!(!plan.contains("start one with"), "{plan}");

    // A person supplies the plan instead: the paused run works through it.
    let file = ws.path().join("plan.toml");
    std::fs::write(
        &file,
        "[[task]]\nid = \"fix\"\ntitle = \"Fix\"\ninstructions = \"Check calc.py.\"\ncheck = \"test -f calc.py\"\n",
    )
    .unwrap();
    let file_arg = file.display().to_string();
    let out = baton_blocking(
        ws.path(),
        home.path(),
        &["resume", "--last", "--plan", &file_arg],
    )
    .await;
    assert_finished(&out);
    let events = journal(ws.path(), home.path());
    assert_eq!(of_type(&events, "task_finished")[0]["task"], "fix");
}
