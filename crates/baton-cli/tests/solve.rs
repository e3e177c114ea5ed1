#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The real `baton` binary solves a small task against a scripted OpenAI-compatible server.

mod support;

use serde_json::json;
use support::*;

fn fix_calc_script() -> Vec<Turn> {
    vec![
        turn(&[
            ("list_dir", json!({})),
            ("read_file", json!({"path": "calc.sh"})),
        ]),
        turn(&[(
            "edit_file",
            json!({"path": "calc.sh", "old_string": "2 - 2", "new_string": "2 + 2"}),
        )]),
        turn(&[("shell", json!({"command": "sh calc.sh"}))]),
        turn(&[
            (
                "write_file",
                json!({"path": "notes/done.md", "content": "calc fixed\n"}),
            ),
            ("finish", json!({"summary": "calc.sh now prints 4"})),
        ]),
    ]
}

async fn solve(stream: bool) {
    let server = ScriptedServer::start(fix_calc_script()).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("calc.sh"), "echo $((2 - 2))\n").unwrap();
    std::fs::write(ws.path().join("AGENTS.md"), "Keep scripts POSIX.\n").unwrap();

    let mut cmd = baton(ws.path(), home.path());
    cmd.args([
        "run",
        "--base-url",
        &server.base_url(),
        "--model",
        "scripted-model",
        "--json",
    ]);
    if !stream {
        cmd.args(["--no-stream", "--tool-choice", "required"]);
    }
    cmd.arg("Make calc.sh print 4");
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "baton failed: {stderr}");

    // baton's own state is not in the workspace (nor in the user's commits): it is in the
    // state directory under ~/.local/state/baton.
    // (`.baton/` itself may be there, empty: bubblewrap mounts it read-only, so the sandbox
    // creates it before the first command.)
    let inputs: Vec<_> = std::fs::read_dir(ws.path().join(".baton"))
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(inputs.iter().all(|n| n == ".gitignore"), "{inputs:?}");
    let state = state_dir(ws.path(), home.path());
    assert!(state.journal().is_file() && state.shadow_git().is_dir());
    assert_eq!(
        std::fs::read_to_string(state.root().join("baton-state"))
            .unwrap()
            .trim_end(),
        ws.path().canonicalize().unwrap().display().to_string()
    );
    // The files really changed.
    assert_eq!(
        std::fs::read_to_string(ws.path().join("calc.sh")).unwrap(),
        "echo $((2 + 2))\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes/done.md")).unwrap(),
        "calc fixed\n"
    );

    // The stdout event stream is the journal, one versioned object per line, and then one line
    // with the run's totals.
    let mut streamed: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(streamed.iter().all(|e| e["v"] == 1));
    let totals = streamed.pop().unwrap();
    assert_eq!(totals["type"], "run_totals");
    assert_eq!(totals["end"], "finished");
    assert_eq!(totals["turns"], 4);
    assert_eq!(totals["model_calls"], 4);
    assert!(
        totals["summary"].is_string() && totals["running_ms"].is_u64(),
        "{totals}"
    );
    let journal = journal(ws.path(), home.path());
    let prompt: u64 = of_type(&journal, "model_call_finished")
        .iter()
        .map(|e| e["usage"]["prompt_tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(
        totals["tokens"]["prompt"], prompt,
        "the totals add up the journal"
    );
    assert_eq!(streamed, journal, "--json stream and journal differ");
    let seqs: Vec<u64> = journal.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..journal.len() as u64).collect::<Vec<_>>());

    assert_eq!(of_type(&journal, "model_call_finished").len(), 4);
    assert_eq!(
        of_type(&journal, "turn_finished").len(),
        3,
        "the finish turn ends the run, not the turn"
    );
    let finished = of_type(&journal, "model_call_finished");
    assert_eq!(
        finished[0]["usage"],
        json!({"prompt_tokens": 100, "completion_tokens": 10, "cached_prompt_tokens": 50})
    );
    let tool_results = of_type(&journal, "tool_call_finished");
    assert_eq!(tool_results.len(), 6);
    let shell = tool_results[3];
    assert_eq!(shell["result"]["exit_code"], 0);
    assert!(
        shell["result"]["content"].as_str().unwrap().contains('4'),
        "{shell}"
    );
    assert_eq!(
        of_type(&journal, "run_finished")[0]["summary"],
        "calc.sh now prints 4"
    );
    let started = &of_type(&journal, "run_started")[0];
    assert_eq!(started["project_instructions"], "Keep scripts POSIX.\n");

    // The server saw each turn once, and turn 4's request carried turn 3's real shell output.
    assert_eq!(server.requests_per_turn(), vec![1, 1, 1, 1]);
    let received = server.received();
    let last = &received[3].body["messages"];
    let tool_msg = last
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(tool_msg["content"].as_str().unwrap().contains('4'));
    assert!(
        received[0].body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Keep scripts POSIX.")
    );
    assert_eq!(received[0].body["stream"], stream);
    let expected_choice = if stream {
        serde_json::Value::Null
    } else {
        json!("required")
    };
    assert!(
        received
            .iter()
            .all(|r| r.body["tool_choice"] == expected_choice)
    );

    // Readable surfaces.
    let logs = baton(ws.path(), home.path()).arg("logs").output().unwrap();
    let logs = String::from_utf8_lossy(&logs.stdout);
    assert!(
        logs.contains("edit_file") && logs.contains("FINISHED: calc.sh now prints 4"),
        "{logs}"
    );
    let status = baton(ws.path(), home.path())
        .arg("status")
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains("finished") && status.contains("406 prompt"),
        "{status}"
    );
    let ls = baton(ws.path(), home.path()).arg("ls").output().unwrap();
    assert!(String::from_utf8_lossy(&ls.stdout).contains("Make calc.sh print 4"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn solves_a_task_with_streamed_responses() {
    solve(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn solves_a_task_with_whole_responses() {
    solve(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pauses_at_the_turn_limit_and_resume_raises_it() {
    let server = ScriptedServer::start(fix_calc_script()).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("calc.sh"), "echo $((2 - 2))\n").unwrap();
    let base = server.base_url();
    let (w, h) = (ws.path().to_path_buf(), home.path().to_path_buf());
    let out = tokio::task::spawn_blocking(move || {
        baton(&w, &h)
            .args([
                "run",
                "--base-url",
                &base,
                "--model",
                "m",
                "--max-turns",
                "2",
                "Fix calc",
            ])
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("paused"));

    let (w, h) = (ws.path().to_path_buf(), home.path().to_path_buf());
    let out = tokio::task::spawn_blocking(move || {
        baton(&w, &h)
            .args(["resume", "--last", "--max-turns", "10"])
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        server.requests_per_turn(),
        vec![1, 1, 1, 1],
        "no turn was asked for twice"
    );
    let journal = journal(ws.path(), home.path());
    let resumed = of_type(&journal, "run_resumed");
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0]["settings"]["limits"]["max_turns"], 10);
    // The recorded base URL was reused without being given again.
    assert_eq!(
        resumed[0]["settings"]["model"]["base_url"],
        server.base_url()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_is_priced_from_config_and_baton_cost_adds_them_up() {
    let server = ScriptedServer::start(fix_calc_script()).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("calc.sh"), "echo $((2 - 2))\n").unwrap();
    std::fs::create_dir_all(ws.path().join(".baton")).unwrap();
    // The scripted server reports model "scripted": unknown to the built-in table, priced here.
    std::fs::write(
        ws.path().join(".baton/config.toml"),
        "[prices.scripted]\ninput_per_mtok = 2.0\ncached_input_per_mtok = 0.5\noutput_per_mtok = 8.0\n",
    )
    .unwrap();
    trust_workspace(ws.path(), home.path());
    let mut cmd = baton(ws.path(), home.path());
    cmd.args([
        "run",
        "--base-url",
        &server.base_url(),
        "--model",
        "m",
        "Fix calc",
    ]);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Call t (0-based) used 100+t prompt tokens (50 cached) and 10+t completion tokens.
    let journal = journal(ws.path(), home.path());
    let costs: Vec<f64> = of_type(&journal, "model_call_finished")
        .iter()
        .map(|e| e["cost_usd"].as_f64().unwrap())
        .collect();
    for (t, cost) in costs.iter().enumerate() {
        let t = t as f64;
        let expected = ((50.0 + t) * 2.0 + 50.0 * 0.5 + (10.0 + t) * 8.0) / 1e6;
        assert!(
            (cost - expected).abs() < 1e-12,
            "call {t}: {cost} != {expected}"
        );
    }
    let table = baton(ws.path(), home.path()).arg("cost").output().unwrap();
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("total: 4 model calls, 406 input + 46 output tokens, $0.0009"),
        "{table}"
    );
    let status = baton(ws.path(), home.path())
        .arg("status")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&status.stdout).contains("cost       $0.0009"));
}
