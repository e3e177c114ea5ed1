//! The printed tables: baton's measurements with the targets beside them, then the
//! same-machine comparison with LangGraph as ratios.

use crate::langgraph::PeerRun;
use crate::run::Measured;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

/// The first and last tenth of the turns (at least one turn each).
struct Tenths {
    first_mean: f64,
    last_mean: f64,
    first_p50: f64,
    last_p50: f64,
}

impl Tenths {
    fn of(turn_ms: &[f64]) -> Tenths {
        let k = (turn_ms.len() / 10).max(1);
        let (first, last) = (&turn_ms[..k], &turn_ms[turn_ms.len() - k..]);
        Tenths {
            first_mean: mean(first),
            last_mean: mean(last),
            first_p50: median(first.to_vec()),
            last_p50: median(last.to_vec()),
        }
    }

    /// Last over first of the medians: the target's ratio. A median is what the p50 target is
    /// about, and a few slow fsyncs (a shared disk's spells) do not move it as they move a mean.
    fn ratio(&self) -> f64 {
        self.last_p50 / self.first_p50
    }

    fn mean_ratio(&self) -> f64 {
        self.last_mean / self.first_mean
    }
}

/// What the run added to the store, per turn: the stored bytes less the empty store's (its
/// schema, which a store pays once, not per turn).
fn grown_per_turn(m: &Measured) -> f64 {
    m.stored_bytes_per_turn - m.empty_store_bytes as f64 / m.turns as f64
}

fn mark(ok: bool) -> &'static str {
    if ok { "✓" } else { "✗" }
}

/// The row's name: its store, and its tool when that is not the read-only no-op of the peer's
/// shape.
fn label(m: &Measured) -> String {
    match m.tool.as_str() {
        "mutating" => format!("{} (mutating tool)", m.store),
        _ => m.store.clone(),
    }
}

/// The runs in the peer benchmark's shape: SQLite, the read-only no-op tool.
fn peers_shape(m: &Measured) -> bool {
    m.store == "sqlite" && m.tool != "mutating"
}

pub fn print(ours: &[Measured], peer: &[PeerRun], fsync_ms: f64) {
    println!(
        "\n## baton: harness overhead (zero-latency model, no-op tool; turn = model call i → i+1)\n"
    );
    println!(
        "| store | turns | p50 ms/turn | mean | first 10% (p50; mean) | last 10% (p50; mean) | last/first (p50; mean) | commits/turn (steady; all) | store ms/turn | \
         event JSON B/turn | stored B/turn (all; added by the run) | content B/turn | store ÷ content (added; all) | compactions | peak RSS MiB (run / +resume) | resume → ready ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for m in ours {
        let tenths = Tenths::of(&m.turn_ms);
        let stored = m.stored_bytes_per_turn;
        println!(
            "| {} | {} | {:.3} | {:.3} | {:.3}; {:.3} | {:.3}; {:.3} | {:.2}; {:.2} | {:.3}; {:.3} | {:.3} | {:.0} | {:.0}; {:.0} | {:.0} | {:.2}; {:.2} | {} | {:.1} / {:.1} | {:.1} |",
            label(m),
            m.turns,
            median(m.turn_ms.clone()),
            mean(&m.turn_ms),
            tenths.first_p50,
            tenths.first_mean,
            tenths.last_p50,
            tenths.last_mean,
            tenths.ratio(),
            tenths.mean_ratio(),
            m.steady_commits_per_turn,
            m.commits_per_turn,
            m.append_ms_per_turn,
            m.journal_bytes_per_turn,
            m.stored_bytes_per_turn,
            grown_per_turn(m),
            m.content_bytes_per_turn,
            grown_per_turn(m) / m.content_bytes_per_turn,
            stored / m.content_bytes_per_turn,
            m.compactions,
            m.peak_rss_run_kib as f64 / 1024.0,
            m.peak_rss_kib as f64 / 1024.0,
            m.resume_to_ready_ms,
        );
    }
    println!(
        "\nThis disk's fsync (append 4 KiB + fsync, median of 200, beside the stores): {fsync_ms:.3} ms. \
         A turn with the read-only tool makes one durable commit when its intent waits for the next \
         request's (the read-only commit delay), so it cannot take less than {fsync_ms:.3} ms; one \
         with the mutating tool makes two: {:.3} ms.",
        2.0 * fsync_ms
    );
    targets(ours, fsync_ms);
    if !peer.is_empty() {
        compare(ours, peer);
    }
}

/// The targets, each with the measurement it is about.
fn targets(ours: &[Measured], fsync_ms: f64) {
    println!("\n### Targets\n");
    for m in ours {
        let tenths = Tenths::of(&m.turn_ms);
        let p50 = median(m.turn_ms.clone());
        let stored = m.stored_bytes_per_turn;
        let mut line = format!(
            "- {} × {}: steady commits/turn {:.3} ≤ 2.0 {} (per effect started {:.3}: compactions' \
             summary calls are effects too); store ÷ content {:.2} ≤ 2 {} (what the run added; \
             with the empty store's {:.0} KiB: {:.2})",
            label(m),
            m.turns,
            m.steady_commits_per_turn,
            mark(m.commits_per_effect <= 1.0),
            m.commits_per_effect,
            grown_per_turn(m) / m.content_bytes_per_turn,
            mark(grown_per_turn(m) / m.content_bytes_per_turn <= 2.0),
            m.empty_store_bytes as f64 / 1024.0,
            stored / m.content_bytes_per_turn,
        );
        if m.store == "sqlite" {
            let (floor, commits) = match m.tool.as_str() {
                "mutating" => (2.0 * fsync_ms, "two fsyncs"),
                _ => (fsync_ms, "one fsync"),
            };
            line += &format!(
                "; p50 {p50:.3} ms ≤ 0.5 {} (this disk's floor of {commits}: {floor:.3} ms); \
                 last/first 10% p50 {:.2} ≤ 1.2 {} (means: {:.2})",
                mark(p50 <= 0.5),
                tenths.ratio(),
                mark(tenths.ratio() <= 1.2),
                tenths.mean_ratio(),
            );
        }
        if m.turns >= 10_000 {
            line += &format!(
                "; resume → ready {:.1} ms ≤ 100 {}",
                m.resume_to_ready_ms,
                mark(m.resume_to_ready_ms <= 100.0)
            );
        }
        println!("{line}");
    }
}

/// The peer's medians over reps for one (turns, mode): ms/turn from the whole invocation's wall
/// time (its README's "from total wall": with async durability the turns leave out the queued
/// writes), first 10% and last 10% ms/turn, and DB bytes.
fn peer_row(peer: &[PeerRun], turns: usize, mode: &str) -> Option<(f64, f64, f64, f64)> {
    let runs: Vec<&PeerRun> = peer
        .iter()
        .filter(|r| r.n_turns == turns && r.mode == mode)
        .collect();
    if runs.is_empty() {
        return None;
    }
    let of = |f: &dyn Fn(&PeerRun) -> f64| median(runs.iter().map(|r| f(r)).collect());
    Some((
        of(&|r| r.total_wall_s * 1_000.0 / r.n_turns as f64),
        of(&|r| r.first10pct.mean_ms),
        of(&|r| r.last10pct.mean_ms),
        of(&|r| r.db_bytes.unwrap_or(0) as f64),
    ))
}

fn compare(ours: &[Measured], peer: &[PeerRun]) {
    println!("\n## Side by side with LangGraph (same machine, same invocation)\n");
    println!(
        "LangGraph's overhead is its mode minus its no-checkpointer baseline (medians of reps); \
         baton's figure is its whole harness time, durability included (nothing subtracted).\n"
    );
    println!(
        "| turns | LangGraph mode | its ms/turn (mean) | its overhead ms/turn (mean; last 10%) | \
         baton SQLite ms/turn (mean; last 10%) | baton ÷ its overhead (mean; last 10%) | its DB B/turn | baton stored B/turn |"
    );
    // (The mean is from the wall time of the whole invocation; the last 10% from the turns.)
    println!("|---|---|---|---|---|---|---|---|");
    for m in ours.iter().filter(|m| peers_shape(m)) {
        let Some(none) = peer_row(peer, m.turns, "none") else {
            continue;
        };
        let ours_mean = mean(&m.turn_ms);
        let ours_last = Tenths::of(&m.turn_ms).last_mean;
        for mode in ["sqlite_sync", "sqlite_async", "sqlite_delta"] {
            let Some((total, _, last, db)) = peer_row(peer, m.turns, mode) else {
                continue;
            };
            let over = total - none.0;
            // Async durability moves writes out of the turns into the final drain: its last 10%
            // says nothing about its cost.
            let last_10 = |x: f64| match mode {
                "sqlite_async" => "—".to_owned(),
                _ => format!("{x:.2}"),
            };
            println!(
                "| {} | {mode} | {total:.2} | {over:.2}; {} | {ours_mean:.3}; {ours_last:.3} | 1/{:.1}; {} | {:.0} | {:.0} |",
                m.turns,
                last_10(last - none.2),
                over / ours_mean,
                match mode {
                    "sqlite_async" => "—".to_owned(),
                    _ => format!("1/{:.1}", (last - none.2) / ours_last),
                },
                db / m.turns as f64,
                m.stored_bytes_per_turn,
            );
        }
    }
    if let Some(m) = ours.iter().find(|m| peers_shape(m) && m.turns == 1_000)
        && let (Some(none), Some(sync)) = (
            peer_row(peer, 1_000, "none"),
            peer_row(peer, 1_000, "sqlite_sync"),
        )
    {
        let ratio = mean(&m.turn_ms) / (sync.0 - none.0);
        println!(
            "\nTarget: baton ≤ 1/10 of LangGraph sync's overhead at 1,000 turns: 1/{:.1} {}",
            1.0 / ratio,
            mark(ratio <= 0.1)
        );
    }
}
