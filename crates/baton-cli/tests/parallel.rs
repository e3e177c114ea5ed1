#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `--parallel` with the real binary: independent tasks worked on at once in their own
//! worktrees and merged back; a merge conflict becomes a follow-up task; kill -9 while the
//! children work and during a merge, then resume, ends in the same workspace without asking the
//! model again for work already done.

mod support;

use std::path::Path;

use serde_json::{Value, json};
use support::*;

const BASE: &str = "line 1\nline 2\nline 3\n";

/// `a` and `b` are independent; `c` needs both.
fn plan(dir: &Path) -> String {
    let text = r#"
[[task]]
id = "a"
title = "Add a"
instructions = "Create a.txt and mark line 1 of shared.txt."
check = "grep -q 'from a' a.txt && grep -q 'line 1 by a' shared.txt"

[[task]]
id = "b"
title = "Add b"
instructions = "Create b.txt and mark a line of shared.txt."
check = "grep -q 'from b' b.txt && grep -q 'by b' shared.txt"

[[task]]
id = "c"
title = "Add c"
deps = ["a", "b"]
instructions = "Create c.txt listing what a and b did."
check = "test -f a.txt && test -f b.txt && grep -q 'by a' shared.txt && grep -q 'by b' shared.txt && test -f c.txt"
"#;
    let path = dir.join("plan.toml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn write(path: &str, content: &str) -> (&'static str, Value) {
    ("write_file", json!({"path": path, "content": content}))
}

fn finish(summary: &str) -> (&'static str, Value) {
    ("finish", json!({"summary": summary}))
}

/// `a`'s answer; with `generated` > 0 it also creates that many files under `gen/`, so that
/// merging it takes a while.
fn a_turn(generated: usize) -> Turn {
    let mut calls = vec![
        write("a.txt", "from a\n"),
        write("shared.txt", "line 1 by a\nline 2\nline 3\n"),
    ];
    if generated > 0 {
        calls.push((
            "shell",
            json!({"command": format!("mkdir -p gen && for i in $(seq 1 {generated}); do echo $i > gen/f$i; done")}),
        ));
    }
    calls.push(finish("added a.txt, marked line 1"));
    turn(&calls)
}

fn b_turn() -> Turn {
    turn(&[
        write("b.txt", "from b\n"),
        write("shared.txt", "line 1\nline 2\nline 3 by b\n"),
        finish("added b.txt"),
    ])
}

/// `b` marks line 3 (merges cleanly with `a`) or line 1 (conflicts with `a`).
async fn server(
    b_shared: &str,
    follow_ups: Option<Vec<(&str, Vec<Turn>)>>,
    generated: usize,
) -> ScriptedServer {
    let mut script = vec![
        (
            "a",
            // A second answer for a run killed in the middle of the first turn's tool calls.
            vec![a_turn(generated), a_turn(generated)],
        ),
        (
            "b",
            vec![turn(&[
                write("b.txt", "from b\n"),
                write("shared.txt", b_shared),
                finish("added b.txt, marked shared.txt"),
            ])],
        ),
        (
            "c",
            vec![turn(&[write("c.txt", "a and b\n"), finish("added c.txt")])],
        ),
    ];
    script.extend(follow_ups.unwrap_or_default());
    ScriptedServer::start_by_task(&script).await
}

fn seed(ws: &Path) {
    std::fs::write(ws.join("shared.txt"), BASE).unwrap();
    std::fs::write(ws.join("README"), "a workspace\n").unwrap();
}

fn index_of(events: &[Value], pred: impl Fn(&Value) -> bool) -> usize {
    events
        .iter()
        .position(pred)
        .unwrap_or_else(|| panic!("no such event"))
}

fn task_event(events: &[Value], kind: &str, task: &str) -> usize {
    index_of(events, |e| e["type"] == kind && e["task"] == task)
}

/// Model requests per task context.
fn asked(server: &ScriptedServer, key: &str) -> usize {
    server
        .received()
        .iter()
        .filter(|r| task_key(&r.body) == key)
        .count()
}

fn assert_merged_workspace(ws: &Path) {
    let files = snapshot_files(ws);
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["README", "a.txt", "b.txt", "c.txt", "shared.txt"],
        "{files:?}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("shared.txt")).unwrap(),
        "line 1 by a\nline 2\nline 3 by b\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_independent_tasks_run_at_once_and_are_merged() {
    let server = server("line 1\nline 2\nline 3 by b\n", None, 0).await;
    let (ws, home, out) = run_to_the_end(&server).await;
    // The progress lines of each child run are marked with its task.
    let progress = String::from_utf8_lossy(&out.stderr);
    for expected in [
        "▶ task a in parallel run",
        "┆ a: ✔ passed check",
        "┆ b: ✔ passed check",
        "⇄ merging task b",
        "✔ task b verified",
    ] {
        assert!(progress.contains(expected), "{expected:?} in {progress}");
    }

    // `baton logs` shows the parent run (children are never "the latest run").
    let events = journal(ws.path(), home.path());
    let delegated = of_type(&events, "task_delegated");
    let tasks: Vec<&str> = delegated
        .iter()
        .map(|e| e["task"].as_str().unwrap())
        .collect();
    assert_eq!(tasks, ["a", "b"]);
    assert_eq!(delegated[0]["base_snapshot"], delegated[1]["base_snapshot"]);
    assert_ne!(delegated[0]["child_run"], delegated[1]["child_run"]);
    // Both were handed out before either came back, each merged as it came back, and `c`
    // began only after both merges.
    let last_delegated = task_event(&events, "task_delegated", "b");
    assert!(last_delegated < index_of(&events, |e| e["type"] == "task_returned"));
    for task in ["a", "b"] {
        assert!(
            task_event(&events, "task_returned", task) < task_event(&events, "merge_started", task)
        );
        assert!(
            task_event(&events, "merge_started", task) < task_event(&events, "task_finished", task)
        );
    }
    let merged_a = task_event(&events, "task_finished", "a");
    let merged_b = task_event(&events, "task_finished", "b");
    assert!(merged_b.max(merged_a) < begun(&events, "c"));
    assert_eq!(of_type(&events, "merge_conflicted").len(), 0);
    // The merge commits are the parent's snapshots from then on.
    let merges: Vec<&str> = of_type(&events, "merge_started")
        .iter()
        .map(|e| e["snapshot"].as_str().unwrap())
        .collect();
    assert_eq!(merges.len(), 2);
    // Each child worked in its own fresh context, told about the other tasks running.
    for key in ["a", "b", "c"] {
        assert_eq!(asked(&server, key), 1, "task {key}");
    }
    let a_request = server
        .received()
        .into_iter()
        .find(|r| task_key(&r.body) == "a")
        .unwrap();
    assert!(
        a_request
            .body
            .to_string()
            .contains("in its own copy of the workspace"),
        "the child's goal says it works in a worktree"
    );
    // Merged worktrees are removed; the children's runs are listed with their own journals.
    let worktrees = state_dir(ws.path(), home.path()).root().join("worktrees");
    let left: Vec<_> = std::fs::read_dir(&worktrees)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    let child = delegated[0]["child_run"].as_str().unwrap();
    let out = baton_blocking(ws.path(), home.path(), &["logs", child, "--json"]).await;
    let child_log = String::from_utf8_lossy(&out.stdout);
    assert!(child_log.contains("\"check_finished\""), "{child_log}");
    // The plan view shows every task verified.
    let out = baton_blocking(ws.path(), home.path(), &["plan"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("verified").count(), 3, "{text}");

    // `baton ls`: the children right under their parent, indented, in delegation order.
    let out = baton_blocking(ws.path(), home.path(), &["ls", "--json"]).await;
    let runs: Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = runs.as_array().unwrap();
    let parent = &runs[0];
    assert_eq!(parent["depth"], 0, "{runs:?}");
    let children: Vec<&Value> = runs[1..].iter().collect();
    assert_eq!(children.len(), 2, "{runs:?}");
    for (i, child) in children.iter().enumerate() {
        assert_eq!(child["id"], delegated[i]["child_run"]);
        assert_eq!(child["parent"], parent["id"]);
        assert_eq!(child["depth"], 1);
        assert_eq!(parent["children"][i], delegated[i]["child_run"]);
    }
    let out = baton_blocking(ws.path(), home.path(), &["ls"]).await;
    let table = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].contains("TURNS") && lines[0].contains("ELAPSED"),
        "{table}"
    );
    let short = |v: &Value| v["short_id"].as_str().unwrap().to_owned();
    assert!(lines[1].starts_with(&short(parent)), "{table}");
    for (i, child) in children.iter().enumerate() {
        assert!(
            lines[2 + i].starts_with(&format!("└ {}", short(child))),
            "{table}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_conflict_becomes_a_follow_up_task_that_dependents_wait_for() {
    // `b` changes line 1 too: whichever of `a` and `b` comes back second conflicts with the
    // first one's merge. Its follow-up redoes it on the merged workspace (b marks line 3 this
    // time, which its check accepts).
    let redone = "line 1 by a\nline 2\nline 3 by b\n";
    let follow_ups = [
        (
            "a-merge",
            vec![turn(&[
                write("a.txt", "from a\n"),
                write("shared.txt", redone),
                finish("redid a on top of b"),
            ])],
        ),
        (
            "b-merge",
            vec![turn(&[
                write("b.txt", "from b\n"),
                write("shared.txt", redone),
                finish("redid b on top of a"),
            ])],
        ),
    ];
    let server = server(
        "line 1 by b\nline 2\nline 3\n",
        Some(follow_ups.to_vec()),
        0,
    )
    .await;
    let (ws, home, _) = run_to_the_end(&server).await;
    let events = journal(ws.path(), home.path());
    let conflicts = of_type(&events, "merge_conflicted");
    assert_eq!(conflicts.len(), 1);
    let task = conflicts[0]["task"].as_str().unwrap();
    let merged_first = task_event(
        &events,
        "task_finished",
        if task == "a" { "b" } else { "a" },
    );
    assert!(merged_first < task_event(&events, "merge_conflicted", task));
    assert_eq!(conflicts[0]["conflicts"], json!(["shared.txt"]));
    let follow_up = format!("{task}-merge");
    assert_eq!(conflicts[0]["follow_up"]["id"], follow_up.as_str());
    let instructions = conflicts[0]["follow_up"]["instructions"].as_str().unwrap();
    assert!(
        instructions.contains(&format!("+line 1 by {task}")),
        "the follow-up gets the task's diff: {instructions}"
    );
    // `c` waited for the follow-up.
    assert!(task_event(&events, "task_finished", &follow_up) < begun(&events, "c"));
    let follow_up_request = server
        .received()
        .into_iter()
        .find(|r| task_key(&r.body) == follow_up)
        .unwrap();
    assert!(follow_up_request.body.to_string().contains("conflict"));
    // The conflicted task's worktree, kept while its follow-up worked, is gone at the end.
    let left = std::fs::read_dir(state_dir(ws.path(), home.path()).root().join("worktrees"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert_eq!(left, 0);
}

/// Where work on `task` began: in the workspace or in a worktree.
fn begun(events: &[Value], task: &str) -> usize {
    index_of(events, |e| {
        (e["type"] == "task_started" || e["type"] == "task_delegated") && e["task"] == task
    })
}

/// Kills `baton run --parallel 2` when `kill_at` is seen on its event stream, resumes it, and
/// checks the end state and that no finished model work was asked for again.
/// `generated`: files `a` creates (see [`a_turn`]).
async fn kill_and_resume(
    generated: usize,
    kill_at: impl Fn(&Value) -> bool + Send + 'static,
) -> (Vec<Value>, ScriptedServer) {
    let server = server("line 1\nline 2\nline 3 by b\n", None, generated).await;
    let (ws, home, dir) = (tempdir(), tempdir(), tempdir());
    seed(ws.path());
    // Enough files that restoring a merge takes a moment.
    for i in 0..1500 {
        let file = ws.path().join(format!("src/m{i}.rs"));
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, format!("// {i}\n")).unwrap();
    }
    let plan = plan(dir.path());
    let cmd = parallel_run(&server, ws.path(), home.path(), &plan);
    let (mut child, mut lines) = spawn_json(cmd);
    let seen = tokio::task::spawn_blocking(move || {
        let event = lines.until(kill_at);
        (event, lines)
    })
    .await
    .unwrap();
    assert!(seen.0.is_some(), "the run ended before the kill point");
    child.kill().unwrap();
    child.wait().unwrap();
    drop(seen);
    // Where the kill landed (the parent's last event), for the record: with 2000 files of `a`
    // to merge, a kill at `merge_started` lands before the restore has written them.
    let before = journal(ws.path(), home.path());
    let restored = (1..=generated)
        .filter(|i| ws.path().join(format!("gen/f{i}")).exists())
        .count();
    eprintln!(
        "killed after {:?}; {restored} of {generated} generated files in the workspace",
        before.last().map(|e| e["type"].clone())
    );

    let out = baton_blocking(
        ws.path(),
        home.path(),
        &["resume", "--last", "--no-supervise"],
    )
    .await;
    assert_finished(&out);
    let files = snapshot_files(ws.path());
    assert_eq!(files.len(), 5 + 1500 + generated);
    assert_eq!(
        std::fs::read_to_string(ws.path().join("shared.txt")).unwrap(),
        "line 1 by a\nline 2\nline 3 by b\n"
    );
    let events = journal(ws.path(), home.path());
    for task in ["a", "b", "c"] {
        let finished = events
            .iter()
            .filter(|e| e["type"] == "task_finished" && e["task"] == task)
            .count();
        assert_eq!(finished, 1, "task {task} finished once");
    }
    assert_eq!(
        of_type(&events, "task_delegated").len(),
        2,
        "not delegated twice"
    );
    (events, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_a_merge_then_resume_merges_once() {
    // The second merge: both children have come back by then.
    let merges = std::sync::atomic::AtomicUsize::new(0);
    let (events, server) = kill_and_resume(2000, move |e| {
        e["type"] == "merge_started"
            && merges.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 1
    })
    .await;
    assert_eq!(of_type(&events, "merge_started").len(), 2);
    assert_eq!(of_type(&events, "task_returned").len(), 2);
    // Both children were done before the first merge: nothing of theirs was asked again.
    for task in ["a", "b", "c"] {
        assert_eq!(asked(&server, task), 1, "task {task}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_while_the_children_check_then_resume_resumes_them() {
    // A child's check_started comes through the parent's event stream.
    let (events, server) =
        kill_and_resume(0, |e| e["type"] == "check_started" && e["task"] == "b").await;
    assert_eq!(of_type(&events, "task_returned").len(), 2);
    // `b` had its answer journaled: its resumed run reruns the check without asking again.
    assert_eq!(asked(&server, "b"), 1);
    // `a` may have been cut off in its turn (asked again, as for any run killed there).
    assert!(asked(&server, "a") <= 3);
}

/// `baton run --plan PLAN --parallel 2` as one process with its events on stdout, to be
/// killed or signalled part-way.
fn parallel_run(
    server: &ScriptedServer,
    ws: &Path,
    home: &Path,
    plan: &str,
) -> std::process::Command {
    let mut cmd = baton(ws, home);
    cmd.args([
        "run",
        "--no-supervise",
        "--json",
        "--base-url",
        &server.base_url(),
    ])
    .args(["--model", "m", "--plan", plan, "--parallel", "2", "goal"]);
    cmd
}

/// Runs the plan of `a`, `b` and `c` with `--parallel 2` in a seeded workspace and checks that
/// it finished with the work of all three merged; returns the workspace, home and output.
async fn run_to_the_end(
    server: &ScriptedServer,
) -> (tempfile::TempDir, tempfile::TempDir, std::process::Output) {
    let (ws, home, dir) = (tempdir(), tempdir(), tempdir());
    seed(ws.path());
    let plan = plan(dir.path());
    let out = run_against(
        server,
        ws.path(),
        home.path(),
        &["--plan", &plan, "--parallel", "2", "goal"],
    )
    .await;
    assert_finished(&out);
    assert_merged_workspace(ws.path());
    (ws, home, out)
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_wave_pauses_parent_and_children_and_resume_finishes() {
    // `a` first starts a long command; after the pause its resumed run is told the command was
    // interrupted and answers with the real work.
    let script = vec![
        (
            "a",
            vec![
                turn(&[("shell", json!({"command": "sleep 30"}))]),
                a_turn(0),
            ],
        ),
        // `b` runs beside `a`: the stop may cut its turn short too, and its resumed run asks
        // again.
        ("b", vec![b_turn(), b_turn()]),
        (
            "c",
            vec![turn(&[write("c.txt", "a and b\n"), finish("added c.txt")])],
        ),
    ];
    let server = ScriptedServer::start_by_task(&script).await;
    let (ws, home, dir) = (tempdir(), tempdir(), tempdir());
    seed(ws.path());
    let plan = plan(dir.path());
    let cmd = parallel_run(&server, ws.path(), home.path(), &plan);
    let first = tokio::task::spawn_blocking(move || {
        let (child, mut events) = spawn_json(cmd);
        events
            .until(|e| e["type"] == "tool_call_started" && e["name"] == "shell")
            .unwrap();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(first.status.code(), Some(3), "paused");
    let events = journal(ws.path(), home.path());
    let paused = of_type(&events, "run_paused");
    assert_eq!(paused.len(), 1);
    assert_eq!(paused[0]["reason"], "interrupted");
    // The child that was not interrupted came back; the other is resumed below.
    assert!(of_type(&events, "task_returned").len() <= 1);

    let out = baton_blocking(
        ws.path(),
        home.path(),
        &["resume", "--last", "--no-supervise"],
    )
    .await;
    assert_finished(&out);
    assert_merged_workspace(ws.path());
    let events = journal(ws.path(), home.path());
    assert_eq!(of_type(&events, "task_delegated").len(), 2);
    assert!(asked(&server, "b") <= 2, "b's finished work was not redone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_freed_by_a_fast_task_is_refilled_while_a_slow_one_works() {
    // `a`'s answer takes 10 s; meanwhile `b` is verified and merged and `c` (which needs only
    // `b`) starts in b's slot from the merged workspace, without waiting for `a`.
    let mut slow_a = a_turn(0);
    slow_a.delay = Some(std::time::Duration::from_secs(10));
    let plan_text = r#"
[[task]]
id = "a"
title = "Add a"
instructions = "Create a.txt and mark line 1 of shared.txt."
check = "grep -q 'from a' a.txt && grep -q 'line 1 by a' shared.txt"

[[task]]
id = "b"
title = "Add b"
instructions = "Create b.txt and mark line 3 of shared.txt."
check = "grep -q 'from b' b.txt && grep -q 'by b' shared.txt"

[[task]]
id = "c"
title = "Add c"
deps = ["b"]
instructions = "Create c.txt."
check = "test -f b.txt && test -f c.txt"
"#;
    let server = ScriptedServer::start_by_task(&[
        ("a", vec![slow_a]),
        (
            "b",
            vec![turn(&[
                write("b.txt", "from b\n"),
                write("shared.txt", "line 1\nline 2\nline 3 by b\n"),
                finish("added b.txt"),
            ])],
        ),
        (
            "c",
            vec![turn(&[write("c.txt", "after b\n"), finish("added c.txt")])],
        ),
    ])
    .await;
    let (ws, home, dir) = (tempdir(), tempdir(), tempdir());
    seed(ws.path());
    let plan = dir.path().join("plan.toml");
    std::fs::write(&plan, plan_text).unwrap();
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--plan", plan.to_str().unwrap(), "--parallel", "2", "goal"],
    )
    .await;
    assert_finished(&out);
    assert_merged_workspace(ws.path());
    let events = journal(ws.path(), home.path());
    let returned = |task: &str| task_event(&events, "task_returned", task);
    assert!(task_event(&events, "task_delegated", "c") < returned("a"));
    assert!(task_event(&events, "task_finished", "b") < returned("a"));
    // c's worktree was made from the workspace with b merged.
    let merged_b = &of_type(&events, "merge_started")
        .into_iter()
        .find(|e| e["task"] == "b")
        .unwrap()["snapshot"];
    let c = of_type(&events, "task_delegated")
        .into_iter()
        .find(|e| e["task"] == "c")
        .unwrap();
    assert_eq!(&c["base_snapshot"], merged_b);
}
