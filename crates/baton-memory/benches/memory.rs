//! `search_memory` benchmarks: indexing a synthetic workspace from scratch and incrementally
//! (the one workspace index, baton-index's code index), indexing a long journal (this crate's
//! index), and search latency over both.
//!
//! Run with `cargo bench -p baton-memory`. The workspace (5,000 files, ~20 MB of code-like
//! text) and the index live under cargo's target tmp dir.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/journal.rs"]
mod journal;

use std::path::Path;
use std::time::{Duration, Instant};

use baton_index::CodeIndex;
use baton_memory::{MemoryIndex, Scope};
use journal::Journal;

/// Sizes of a real run (`cargo bench`, which passes `--bench`); `cargo test --all-targets`
/// runs this binary as a smoke test with a fiftieth of them.
fn files() -> usize {
    if full() { 5_000 } else { 100 }
}

fn events() -> usize {
    if full() { 10_000 } else { 200 }
}

fn full() -> bool {
    std::env::args().any(|arg| arg == "--bench")
}
const FILE_BYTES: usize = 4_000;
const CHANGED_FILES: usize = 10;
const SEARCHES_PER_QUERY: usize = 20;

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

    /// Roughly Zipf-distributed index below `n`: a few words are very common, most are rare.
    fn zipf(&mut self, n: usize) -> usize {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((n as f64).powf(u) as usize).saturating_sub(1).min(n - 1)
    }
}

fn vocabulary(rng: &mut Rng) -> Vec<String> {
    const SYLLABLES: &[&str] = &[
        "ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "sa", "do", "fu", "gre", "bli",
        "tor", "man", "sel", "dir", "qua", "pin",
    ];
    (0..5_000)
        .map(|i| {
            let parts = 2 + rng.below(3);
            let word: String = (0..parts)
                .map(|_| SYLLABLES[rng.below(SYLLABLES.len())])
                .collect();
            // Some compound identifiers, as code has.
            if i % 5 == 0 {
                format!("{word}_{}", SYLLABLES[rng.below(SYLLABLES.len())])
            } else {
                word
            }
        })
        .collect()
}

fn code_text(rng: &mut Rng, words: &[String], bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 100);
    while out.len() < bytes {
        let indent = rng.below(3) * 4;
        out.extend(std::iter::repeat_n(' ', indent));
        match rng.below(4) {
            0 => out.push_str(&format!(
                "let {} = {}({}, {});\n",
                words[rng.zipf(words.len())],
                words[rng.zipf(words.len())],
                words[rng.zipf(words.len())],
                rng.below(1000)
            )),
            1 => out.push_str(&format!(
                "// {} {} {} {}\n",
                words[rng.zipf(words.len())],
                words[rng.zipf(words.len())],
                words[rng.zipf(words.len())],
                words[rng.zipf(words.len())]
            )),
            2 => out.push_str(&format!(
                "fn {}(&self) -> {} {{\n",
                words[rng.zipf(words.len())],
                words[rng.zipf(words.len())]
            )),
            _ => out.push_str("}\n"),
        }
    }
    out
}

fn make_workspace(root: &Path, rng: &mut Rng, words: &[String]) -> usize {
    let mut total = 0;
    for i in 0..files() {
        let dir = root.join(format!("src/mod{:03}", i / 50));
        std::fs::create_dir_all(&dir).unwrap();
        let size = FILE_BYTES / 2 + rng.below(FILE_BYTES);
        let text = code_text(rng, words, size);
        total += text.len();
        std::fs::write(dir.join(format!("file{i:05}.rs")), text).unwrap();
    }
    total
}

fn make_journal(rng: &mut Rng, words: &[String]) -> Journal {
    let mut j = Journal::new();
    j.start("migrate the synthetic service to the new storage layer");
    let mut call = 0;
    while j.records.len() < events() {
        call += 1;
        let id = format!("c{call}");
        let args = format!(
            "{{\"command\":\"grep -rn {} src\"}}",
            words[rng.zipf(words.len())]
        );
        let thought = code_text(rng, words, 200);
        j.model(Some(&thought), &[(&id, "shell", &args)]);
        let len = 500 + rng.below(2_000);
        let output = code_text(rng, words, len);
        j.tool(&id, "shell", &args, &output);
        if call % 10 == 0 {
            j.note(&code_text(rng, words, 100));
        }
    }
    j.records.truncate(events());
    j
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    if !full() {
        println!("smoke run (pass --bench, as `cargo bench` does, for real numbers)");
    }
    runtime.block_on(run());
}

async fn run() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let root = tmp.path().join("workspace");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let words = vocabulary(&mut rng);
    let bytes = make_workspace(&root, &mut rng, &words);
    println!(
        "baton-memory benchmark: {} files, {:.1} MB, in {}",
        files(),
        bytes as f64 / 1e6,
        root.display()
    );

    let index = MemoryIndex::new_in(tmp.path()).await.unwrap();
    let workspace = CodeIndex::open_at(&root, &tmp.path().join("index/index.db"))
        .await
        .unwrap();

    let started = Instant::now();
    let report = workspace.update().await.unwrap();
    let cold = started.elapsed();
    assert_eq!(report.files_indexed, files(), "{report:?}");
    println!(
        "index workspace from scratch: {:>8.0} ms  ({} files, {} chunks, {:.1} MB/s)",
        cold.as_secs_f64() * 1e3,
        report.files_indexed,
        report.chunks_written,
        bytes as f64 / 1e6 / cold.as_secs_f64()
    );

    let started = Instant::now();
    let report = workspace.update().await.unwrap();
    let noop = started.elapsed();
    assert_eq!(report.files_unchanged, files());
    println!(
        "re-index, nothing changed:    {:>8.1} ms",
        noop.as_secs_f64() * 1e3
    );

    for i in 0..CHANGED_FILES {
        let n = i * (files() / CHANGED_FILES);
        let path = root.join(format!("src/mod{:03}/file{n:05}.rs", n / 50));
        let text = code_text(&mut rng, &words, FILE_BYTES + 17);
        std::fs::write(path, text).unwrap();
    }
    let started = Instant::now();
    let report = workspace.update().await.unwrap();
    let incremental = started.elapsed();
    assert_eq!(report.files_indexed, CHANGED_FILES, "{report:?}");
    println!(
        "re-index, {CHANGED_FILES} files changed:    {:>8.1} ms",
        incremental.as_secs_f64() * 1e3
    );

    let journal = make_journal(&mut rng, &words);
    let started = Instant::now();
    let added = index.index_events(&journal.records).await.unwrap();
    let indexing = started.elapsed();
    println!(
        "index {} events:           {:>8.0} ms  ({added} documents)",
        events(),
        indexing.as_secs_f64() * 1e3
    );
    let started = Instant::now();
    assert_eq!(index.index_events(&journal.records).await.unwrap(), 0);
    println!(
        "index the same events again:  {:>8.1} ms  (0 documents)",
        started.elapsed().as_secs_f64() * 1e3
    );
    println!(
        "documents in the indexes:     {:>8}",
        index.document_count().await.unwrap() + workspace.stats(None).await.unwrap().chunks
    );

    // Queries: a common word, a rare word, two words, a code-like phrase, a compound's part,
    // and a word with one that is nowhere (the AND finds nothing; falls back to OR).
    let common = words[0].clone();
    // Zipf: word 4,000 of 5,000 turns up a few dozen times in the whole corpus.
    let rare = words[4_000].clone();
    let mid = words[50].clone();
    let compound = words.iter().find(|w| w.contains('_')).unwrap().clone();
    let part = compound.split('_').next().unwrap().to_owned();
    let queries = [
        ("common word", common.clone()),
        ("rare word", rare.clone()),
        ("two words", format!("{common} {mid}")),
        ("code phrase", format!("let {mid} = {common}(")),
        ("identifier part", part),
        ("fallback to OR", format!("{rare} zzzunknownzzz")),
    ];
    println!();
    println!("search latency, limit 10, {SEARCHES_PER_QUERY} runs per query and scope:");
    let mut all = Vec::new();
    for scope in [Scope::All, Scope::Files, Scope::History] {
        for (name, query) in &queries {
            let mut times = Vec::new();
            let mut hits = 0;
            for _ in 0..SEARCHES_PER_QUERY {
                let started = Instant::now();
                hits = index
                    .search(query, scope, 10, Some(&workspace))
                    .await
                    .unwrap()
                    .len();
                times.push(started.elapsed());
            }
            times.sort();
            println!(
                "  {:<8} {:<16} p50 {:>7.2} ms  p95 {:>7.2} ms  ({hits} hits)",
                format!("{scope:?}"),
                name,
                percentile(&times, 0.5).as_secs_f64() * 1e3,
                percentile(&times, 0.95).as_secs_f64() * 1e3
            );
            all.extend(times);
        }
    }
    all.sort();
    println!(
        "  all searches ({}): p50 {:.2} ms  p95 {:.2} ms  max {:.2} ms",
        all.len(),
        percentile(&all, 0.5).as_secs_f64() * 1e3,
        percentile(&all, 0.95).as_secs_f64() * 1e3,
        all.last().unwrap().as_secs_f64() * 1e3
    );
}
