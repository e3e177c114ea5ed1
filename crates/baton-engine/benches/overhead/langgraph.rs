//! The peer: LangGraph's ReAct benchmark (`../shared/peers/langgraph_bench/bench.py`), run in
//! the same invocation when a Python with its pinned requirements is given.

use std::path::PathBuf;
use std::process::Command;

use serde::Deserialize;

/// One of the peer's `"kind": "run"` lines (the fields this table uses).
#[derive(Clone, Debug, Deserialize)]
pub struct PeerRun {
    pub mode: String,
    pub n_turns: usize,
    /// The whole `invoke()`, queued writes included (what async durability leaves out of turns).
    pub total_wall_s: f64,
    pub first10pct: Tenth,
    pub last10pct: Tenth,
    #[serde(default)]
    pub db_bytes: Option<u64>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Tenth {
    pub mean_ms: f64,
}

/// The modes the peer runs: no checkpointer (its baseline), `SqliteSaver` with
/// `durability="sync"` (what baton's journal promises), the library default (async), and the
/// beta `DeltaChannel`, its closest analogue of a journal.
const MODES: &[&str] = &["none", "sqlite_sync", "sqlite_async", "sqlite_delta"];

/// The peer's runs for each of `turns` it can do in reasonable time, or nothing (with a line
/// saying why) when it is not set up.
pub fn run(turns: &[usize]) -> Vec<PeerRun> {
    let (Some(python), Some(dir)) = (
        std::env::var_os("BATON_LANGGRAPH_PYTHON"),
        std::env::var_os("BATON_LANGGRAPH_BENCH"),
    ) else {
        eprintln!(
            "LangGraph: not run (set BATON_LANGGRAPH_PYTHON and BATON_LANGGRAPH_BENCH, or use \
             benches/overhead-vs-langgraph.sh)"
        );
        return vec![];
    };
    let reps = std::env::var("BATON_LANGGRAPH_REPS").unwrap_or_else(|_| "3".into());
    let max_turns: usize = std::env::var("BATON_LANGGRAPH_MAX_TURNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    // Stock LangGraph stores the whole history in every checkpoint: 1.2 GiB and ~18 s at 1,000
    // turns, growing as N²; 10,000 turns would need ~120 GiB. Above `max_turns` it is left out.
    let ns: Vec<String> = turns
        .iter()
        .filter(|&&n| n <= max_turns)
        .map(ToString::to_string)
        .collect();
    if ns.is_empty() {
        return vec![];
    }
    let dir = PathBuf::from(dir);
    eprintln!(
        "LangGraph: {} turns, {reps} reps of each mode",
        ns.join(", ")
    );
    let out = Command::new(python)
        .current_dir(&dir)
        .arg("bench.py")
        .arg("--n")
        .args(&ns)
        .arg("--modes")
        .args(MODES)
        .args(["--reps", &reps])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "LangGraph's benchmark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("\"kind\": \"run\"") && !l.contains("\"status\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
