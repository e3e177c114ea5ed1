#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A USD budget with the real binary: the run pauses (exit 3, `paused: budget`) before a call
//! whose worst case could pass the ceiling, and `baton resume --budget-usd` continues it to the
//! end.

mod support;

use serde_json::json;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_pauses_at_its_usd_budget_and_resumes_with_a_raised_one() {
    let mut script: Vec<Turn> = (0..4)
        .map(|_| turn(&[("list_dir", json!({"path": "."}))]))
        .collect();
    script.push(turn(&[("finish", json!({"summary": "listed"}))]));
    let server = ScriptedServer::start(script).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".baton")).unwrap();
    // Only output is priced: $1,000 per million tokens. A call's worst case is 4,096 completion
    // tokens ($4.096); the scripted server reports 10, 11, 12, … completion tokens ($0.010,
    // $0.011, …). With a $4.125 budget the fourth call's worst case ($0.033 spent + $4.096)
    // would pass it: three calls are made, then the run pauses.
    std::fs::write(
        ws.path().join(".baton/config.toml"),
        "[prices.\"m\"]\ninput_per_mtok = 0.0\noutput_per_mtok = 1000.0\n",
    )
    .unwrap();
    trust_workspace(ws.path(), home.path());
    let out = run_against(
        &server,
        ws.path(),
        home.path(),
        &["--budget-usd", "4.125", "list files"],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("could cost up to $4.0960"), "{stdout}");
    assert!(stdout.contains("--budget-usd"), "{stdout}");
    let first = journal(ws.path(), home.path());
    assert_eq!(of_type(&first, "model_call_finished").len(), 3);
    let paused = of_type(&first, "run_paused");
    assert_eq!(paused[0]["reason"], "budget");

    let status = baton(ws.path(), home.path())
        .arg("status")
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(status.contains("paused     budget: "), "{status}");

    let out = baton_blocking(
        ws.path(),
        home.path(),
        &["resume", "--last", "--budget-usd", "20"],
    )
    .await;
    assert_finished(&out);
    let journal = journal(ws.path(), home.path());
    assert_eq!(of_type(&journal, "model_call_finished").len(), 5);
    let resumed = of_type(&journal, "run_resumed");
    assert_eq!(resumed[0]["settings"]["budget"]["usd"], 20.0);
    assert_eq!(of_type(&journal, "run_finished").len(), 1);
}
