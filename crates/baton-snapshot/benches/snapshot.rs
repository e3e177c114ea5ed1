//! Snapshot cost on a large workspace: the first snapshot, then — the case that matters during
//! a run — a snapshot after a 10-file change, a restore after a 10-file change, and a diff of
//! the workspace against the first snapshot. Prints p50 / p95 / max over several repetitions.
//!
//! Run with `cargo bench -p baton-snapshot --bench snapshot` (10,000 files, 100 MB, under
//! cargo's target tmp dir). `cargo test --all-targets` runs it as a smoke test at a fiftieth of
//! the size.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use baton_snapshot::{Change, DiffFormat, ShadowRepo};

fn full() -> bool {
    std::env::args().any(|arg| arg == "--bench")
}

const TOTAL_BYTES: usize = 100 * 1024 * 1024;
const CHANGED: usize = 10;

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn path_of(i: usize) -> String {
    // 100 directories of 100 files, two levels deep, like a source tree.
    format!("src/m{:02}/d{:02}/file{i:05}.rs", i / 1000, (i / 100) % 10)
}

fn content(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        out.extend_from_slice(format!("let v{} = {};\n", rng.below(1000), rng.next()).as_bytes());
    }
    out.truncate(len);
    out
}

fn change_files(root: &Path, files: usize, rng: &mut Rng, round: usize) {
    for _ in 0..CHANGED {
        let path = root.join(path_of(rng.below(files)));
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(format!("// round {round}\n").as_bytes());
        std::fs::write(path, bytes).unwrap();
    }
}

struct Stats(Vec<Duration>);

impl Stats {
    fn row(&mut self, what: &str) {
        self.0.sort();
        let n = self.0.len();
        let at = |q: f64| self.0[((n as f64 - 1.0) * q).round() as usize];
        println!(
            "| {what:<44} | {:>4} | {:>9.1} | {:>9.1} | {:>9.1} |",
            n,
            ms(at(0.5)),
            ms(at(0.95)),
            ms(self.0[n - 1])
        );
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn timed<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let started = Instant::now();
    let out = f();
    (started.elapsed(), out)
}

fn main() {
    let (files, reps, cold_reps) = if full() { (10_000, 15, 3) } else { (200, 3, 1) };
    let bytes_per_file = TOTAL_BYTES / 10_000;
    let dir = tempfile::Builder::new()
        .prefix("baton-snapshot-bench")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let root = dir.path();
    let mut rng = Rng(0x5eed);
    let started = Instant::now();
    for i in 0..files {
        let path = root.join(path_of(i));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content(&mut rng, bytes_per_file)).unwrap();
    }
    println!(
        "workspace: {files} files, {:.1} MB (written in {:.1} s); {reps} repetitions",
        (files * bytes_per_file) as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    println!();
    println!(
        "| operation                                    | reps |   p50 ms |   p95 ms |   max ms |"
    );
    println!("|---|---|---|---|---|");

    let at = |n: usize| jiff::Timestamp::from_second(1_790_000_000 + n as i64).unwrap();
    let mut first = Stats(Vec::new());
    let mut first_id = None;
    for rep in 0..cold_reps {
        // A brand-new shadow repository each time: every file is hashed and written.
        let _ = std::fs::remove_dir_all(baton_state::StateDir::for_workspace(root).shadow_git());
        let (took, id) = timed(|| {
            let repo = ShadowRepo::open(root).unwrap();
            repo.snapshot("bench", "run_start", at(rep)).unwrap().id
        });
        first.0.push(took);
        first_id = Some(id);
    }
    first.row("first snapshot (new repository, all files)");
    let first_id = first_id.unwrap();
    let repo = ShadowRepo::open(root).unwrap();

    let mut unchanged = Stats(Vec::new());
    for rep in 0..reps {
        let (took, snap) = timed(|| repo.snapshot("bench", "idle", at(100 + rep)).unwrap());
        assert_eq!(snap.change, Change::Unchanged);
        unchanged.0.push(took);
    }
    unchanged.row("snapshot, nothing changed");

    let mut after_change = Stats(Vec::new());
    let mut last = first_id.clone();
    for rep in 0..reps {
        change_files(root, files, &mut rng, rep);
        let (took, snap) = timed(|| {
            repo.snapshot("bench", "after_tools", at(200 + rep))
                .unwrap()
        });
        assert_eq!(snap.change, Change::Created);
        last = snap.id;
        after_change.0.push(took);
    }
    after_change.row("snapshot after a 10-file change");

    let mut restore = Stats(Vec::new());
    for rep in 0..reps {
        change_files(root, files, &mut rng, 1000 + rep);
        let (took, report) = timed(|| repo.restore("bench", &last).unwrap());
        assert!(!report.rewritten.is_empty());
        restore.0.push(took);
    }
    restore.row("restore after a 10-file change");

    let mut diff = Stats(Vec::new());
    change_files(root, files, &mut rng, 5000);
    for _ in 0..reps {
        let (took, text) = timed(|| {
            repo.diff("bench", Some(&first_id), None, DiffFormat::Patch)
                .unwrap()
        });
        assert!(text.contains("// round"));
        diff.0.push(took);
    }
    diff.row("diff: first snapshot → workspace now");

    let mut stat = Stats(Vec::new());
    for _ in 0..reps {
        let (took, _) = timed(|| {
            repo.diff("bench", Some(&first_id), Some(&last), DiffFormat::Stat)
                .unwrap()
        });
        stat.0.push(took);
    }
    stat.row("diff --stat between two snapshots");

    // `--parallel`: making a task's worktree (every file written), then merging its 10-file
    // change back and restoring the workspace to the merge.
    repo.restore("bench", &last).unwrap();
    let mut worktree = Stats(Vec::new());
    let mut merge = Stats(Vec::new());
    let mut merge_restore = Stats(Vec::new());
    let mut ours = last.clone();
    for rep in 0..cold_reps {
        let child = format!("child-{rep}");
        let dir = repo.worktree_dir(&child);
        let (took, tree) = timed(|| repo.create_worktree(&dir, &child, &ours).unwrap());
        worktree.0.push(took);
        change_files(&dir, files, &mut rng, 9000 + rep);
        let theirs = tree.snapshot(&child, "done", at(900 + rep)).unwrap().id;
        let (took, merged) = timed(|| {
            repo.merge("bench", &ours, &ours, &theirs, "merge", at(950 + rep))
                .unwrap()
        });
        merge.0.push(took);
        let baton_snapshot::MergeOutcome::Merged(id) = merged else {
            panic!("a change against an unchanged side merges")
        };
        let (took, _) = timed(|| repo.restore("bench", &id).unwrap());
        merge_restore.0.push(took);
        std::fs::remove_dir_all(&dir).unwrap();
        ours = id;
    }
    worktree.row("worktree for a parallel task (all files)");
    merge.row("merge a task's 10-file change (merge-tree)");
    merge_restore.row("restore the workspace to the merge");
}
