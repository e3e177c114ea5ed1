#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Harness overhead, side by side with LangGraph (issue 20): the real engine and a real store
//! drive a ReAct loop of the shape of `../shared/peers/langgraph_bench` — a zero-latency
//! in-process model that calls one in-process no-op tool per turn with 400 characters of text,
//! which the tool echoes back, and answers after N turns — at 100, 1,000 and 10,000 turns.
//!
//! Per run, in a fresh process of its own: harness ms per turn (a turn is the time between model
//! call i and i+1, as in the LangGraph benchmark: everything but the model and the tool, which
//! take no time), p50 and the means of the first and last 10% of turns; durable commits per
//! turn; journal and store-file bytes per turn against the turn's content; peak RSS; and the
//! time a resume takes from opening the store to the first model request (the run pauses at its
//! turn limit, and is resumed in a fresh engine on a freshly opened store).
//!
//! The tool is read-only (it changes nothing, as the peer's), so its intent may wait for the
//! next request's commit: a turn costs one commit. On SQLite each size is measured again with the
//! same tool declared mutating, whose intent must be durable before it runs: two commits a turn,
//! what a turn that changes something costs.
//!
//! With `BATON_LANGGRAPH_PYTHON` (a Python with the peer's pinned requirements) and
//! `BATON_LANGGRAPH_BENCH` (its directory), LangGraph's benchmark runs in the same invocation
//! and its numbers are printed beside ours, as ratios. `benches/overhead-vs-langgraph.sh` sets
//! both up and runs everything.
//!
//! `cargo bench -p baton-engine --bench overhead [-- TURNS...]`; `BATON_OVERHEAD_STORES=sqlite`
//! leaves the PostgreSQL rows out (they need the `BATON_TEST_POSTGRES` server);
//! `BATON_OVERHEAD_KEEP=DIR` keeps each SQLite run's file, as `DIR/TURNS-sqlite-TOOL/baton.db`;
//! `BATON_OVERHEAD_TEXT=words` sends the 18-word salad of earlier measurements instead of source
//! code (it compresses far better than real tool traffic).

#[path = "../../tests/support/counting.rs"]
mod counting;
mod langgraph;
mod run;
mod table;

use std::process::Command;

use run::{BackendKind, Measured, ToolKind};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let turns: usize = args[i + 1].parse().unwrap();
        let backend = BackendKind::parse(&args[i + 2]);
        let tool = args
            .get(i + 3)
            .map_or(ToolKind::ReadOnly, |t| ToolKind::parse(t));
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let measured = runtime.block_on(run::measure(turns, backend, tool));
        println!("{}", serde_json::to_string(&measured).unwrap());
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this as a smoke test.
    let full = args.iter().any(|a| a == "--bench");
    let mut turns: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    if turns.is_empty() {
        turns = if full {
            vec![100, 1_000, 10_000]
        } else {
            vec![30]
        };
    }
    let backends = backends();

    let mut ours = Vec::new();
    for &n in &turns {
        for &backend in &backends {
            for tool in tools(backend) {
                eprintln!(
                    "baton: {n} turns on {}, {} tool",
                    backend.name(),
                    tool.name()
                );
                let measured = child(n, backend, tool);
                if !full {
                    smoke_checks(&measured, tool);
                }
                ours.push(measured);
            }
        }
    }
    let peer = langgraph::run(&turns);
    table::print(&ours, &peer, run::fsync_median_ms());
}

fn backends() -> Vec<BackendKind> {
    let wanted =
        std::env::var("BATON_OVERHEAD_STORES").unwrap_or_else(|_| "sqlite,postgres".into());
    wanted
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(BackendKind::parse)
        .collect()
}

/// The tools measured on `backend`: the read-only no-op tool everywhere; on SQLite (whose p50
/// has a target) the same tool declared mutating too, whose intent cannot wait — what a turn
/// that changes something costs.
fn tools(backend: BackendKind) -> Vec<ToolKind> {
    match backend {
        BackendKind::Sqlite => vec![ToolKind::ReadOnly, ToolKind::Mutating],
        BackendKind::Postgres => vec![ToolKind::ReadOnly],
    }
}

/// One measured run in a process of its own, so that peak RSS is this run's alone.
fn child(turns: usize, backend: BackendKind, tool: ToolKind) -> Measured {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--child", &turns.to_string(), backend.name(), tool.name()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the {turns}-turn run on {} failed: {}",
        backend.name(),
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

/// What the smoke run (`cargo test`) holds the benchmark's own bookkeeping to: a number that
/// cannot be right means the measurement, not the machine, is broken.
fn smoke_checks(m: &Measured, tool: ToolKind) {
    assert_eq!(m.turn_ms.len(), m.turns, "one interval per turn");
    assert!(
        m.commits_per_turn > 1.0 && m.commits_per_turn < 3.0,
        "{m:?}"
    );
    // A read's intent is written with the next request's when the machine is quick enough,
    // on its own otherwise; a mutating call's always on its own.
    let fewest = match tool {
        ToolKind::ReadOnly => 1.0,
        ToolKind::Mutating => 2.0,
    };
    assert!(
        m.steady_commits_per_turn >= fewest && m.steady_commits_per_turn <= m.commits_per_turn,
        "{m:?}"
    );
    assert!(m.journal_bytes_per_turn > m.content_bytes_per_turn, "{m:?}");
    assert!(m.peak_rss_kib > 0 && m.resume_to_ready_ms > 0.0, "{m:?}");
}
