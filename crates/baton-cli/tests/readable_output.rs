#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 16: readable output uses the documented words, not Rust names (`run_start`, not
//! `RunStart`; `max_turns`, not `MaxTurns`), and has no escape codes when stderr is not a
//! terminal or `NO_COLOR` is set.

mod support;

use serde_json::json;
use support::*;

fn script() -> Vec<Turn> {
    vec![
        turn(&[("write_file", json!({"path": "a.txt", "content": "1\n"}))]),
        turn(&[("write_file", json!({"path": "b.txt", "content": "2\n"}))]),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_uses_the_documented_words() {
    let server = ScriptedServer::start(script()).await;
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let out = run_against(&server, ws.path(), home.path(), &["--max-turns", "1", "go"]).await;
    assert_eq!(out.status.code(), Some(3));
    let progress = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(progress.contains("(run_start)"), "{progress}");
    // The one line at the end of every run.
    let last = progress.lines().last().unwrap();
    assert!(
        last.starts_with("paused (max_turns) after ")
            && last.contains(" · 1 turn · ")
            && last.ends_with(" · cost unknown"),
        "{last}"
    );
    assert!(
        !progress.contains('\x1b'),
        "escape codes without a terminal: {progress:?}"
    );
    let status = baton_blocking(ws.path(), home.path(), &["status"]).await;
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(status.contains("max_turns: "), "{status}");
    assert!(
        status.contains("1 of max 1") && status.contains("elapsed"),
        "{status}"
    );
    let logs = baton_blocking(ws.path(), home.path(), &["logs"]).await;
    let logs = String::from_utf8_lossy(&logs.stdout).into_owned();
    assert!(
        logs.contains("PAUSED [max_turns]") && logs.contains("(mutating)"),
        "{logs}"
    );
    for text in [&progress, &status, &logs] {
        for rust in ["RunStart", "MaxTurns", "Mutating", "Success"] {
            assert!(!text.contains(rust), "{rust} in: {text}");
        }
    }
}

/// Under a real terminal (`script` gives baton a pty) the live status line uses reverse video;
/// with `NO_COLOR` there are no escape codes at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_color_turns_escape_codes_off_on_a_terminal() {
    for no_color in [false, true] {
        let server = ScriptedServer::start(script()).await;
        let ws = tempfile::tempdir().unwrap();
        let home = tempfile::tempdir().unwrap();
        let line = format!(
            "{} --workspace '{}' run --base-url {} --model m --max-turns 1 go",
            baton_bin().display(),
            ws.path().display(),
            server.base_url()
        );
        let mut cmd = std::process::Command::new("script");
        cmd.args(["-qefc", &line, "/dev/null"])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("TERM", "xterm");
        if no_color {
            cmd.env("NO_COLOR", "1");
        }
        let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
            .await
            .unwrap();
        let shown = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(shown.contains("turn 1"), "{shown}");
        assert_eq!(
            shown.contains('\x1b'),
            !no_color,
            "NO_COLOR={no_color}: {shown:?}"
        );
    }
}

/// A bad number on a flag is told in words, not in Rust's ("invalid digit found in string",
/// "expected u32", "invalid float literal"), and nothing starts.
#[test]
fn a_bad_number_on_a_flag_is_told_in_words() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    for (args, expected) in [
        (
            &["run", "--max-turns", "many", "x"][..],
            "expected a whole number such as 200",
        ),
        (
            &["run", "--budget-tokens", "5k", "x"][..],
            "expected a whole number such as 200",
        ),
        (
            &["run", "--budget-usd", "two", "x"][..],
            "expected a number such as 2.50",
        ),
        (
            &["run", "--budget-usd=-1", "x"][..],
            "expected a number of 0 or more",
        ),
        (
            &["resume", "--max-turns", "1e9"][..],
            "expected a whole number such as 200",
        ),
        (
            &["serve", "--port", "70000"][..],
            "70000 is too large for this flag",
        ),
    ] {
        let out = baton(ws.path(), home.path()).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        for rust in [
            "invalid digit",
            "expected u",
            "float literal",
            "ParseIntError",
        ] {
            assert!(!stderr.contains(rust), "{args:?}: {stderr}");
        }
    }
    assert!(
        !journal_path(ws.path(), home.path()).exists(),
        "nothing started"
    );
}
