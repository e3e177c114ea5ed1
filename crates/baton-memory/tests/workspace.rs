//! Memory search of workspace files: indexed incrementally by the one workspace index
//! (baton-index's code index) and found by path and line range through
//! `MemoryIndex::search`, against real SQLite FTS5 indexes and real files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

mod support;

use baton_core::EventRecord;
use baton_index::{CodeIndex, UpdateReport, WorkspaceLimits};
use baton_memory::{Hit, HitSource, MemoryError, MemoryIndex, Scope};
use support::journal::Journal;

/// What `search_memory` searches: the journal's index and the workspace's, whose database
/// lives outside the workspace (as baton keeps it in the state directory).
struct Indexes {
    memory: MemoryIndex,
    workspace: CodeIndex,
    _db: tempfile::TempDir,
}

impl Indexes {
    async fn new(root: &Path) -> Indexes {
        Indexes::with_limits(root, WorkspaceLimits::default()).await
    }

    async fn with_limits(root: &Path, limits: WorkspaceLimits) -> Indexes {
        let db = tempfile::tempdir().unwrap();
        Indexes {
            memory: MemoryIndex::new().await.unwrap(),
            workspace: support::workspace::open(root, db.path(), limits).await,
            _db: db,
        }
    }

    async fn index_workspace(&self) -> UpdateReport {
        self.workspace.update().await.unwrap()
    }

    async fn index_events(&self, events: &[EventRecord]) -> Result<usize, MemoryError> {
        self.memory.index_events(events).await
    }

    async fn search(
        &self,
        query: &str,
        scope: Scope,
        limit: usize,
    ) -> Result<Vec<Hit>, MemoryError> {
        self.memory
            .search(query, scope, limit, Some(&self.workspace))
            .await
    }

    /// Journal entries plus file chunks.
    async fn document_count(&self) -> Result<u64, MemoryError> {
        let chunks = self.workspace.stats(None).await.unwrap().chunks;
        Ok(self.memory.document_count().await? + chunks)
    }
}

fn write(root: &Path, rel: &str, text: impl AsRef<[u8]>) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn sources(hits: &[Hit]) -> Vec<String> {
    let mut found: Vec<String> = hits.iter().map(|h| h.source.to_string()).collect();
    found.sort();
    found
}

async fn find(index: &Indexes, query: &str) -> Vec<String> {
    sources(&index.search(query, Scope::Files, 50).await.unwrap())
}

/// `n` numbered lines, with `word` on line `at` (1-based).
fn lines_with(n: usize, at: usize, word: &str) -> String {
    (1..=n)
        .map(|i| {
            if i == at {
                format!("line {i} {word}\n")
            } else {
                format!("line {i}\n")
            }
        })
        .collect()
}

#[tokio::test]
async fn files_are_found_with_their_line_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "src/lib.rs", lines_with(100, 57, "frobnicate_widget"));
    write(
        root,
        "README.md",
        "# Project\nHow to frobnicate_widget safely.\n",
    );
    let index = Indexes::new(root).await;
    let report = index.index_workspace().await;
    assert_eq!(report.files_seen, 2);
    assert_eq!(report.files_indexed, 2);
    assert_eq!(report.chunks_written, 3 + 1, "100 lines are 3 chunks of 40");
    assert!(!report.file_cap_hit);

    let hits = index
        .search("frobnicate_widget", Scope::Files, 10)
        .await
        .unwrap();
    assert_eq!(sources(&hits), ["README.md:1-2", "src/lib.rs:41-80"]);
    let lib = hits
        .iter()
        .find(|h| matches!(&h.source, HitSource::File { path, .. } if path == "src/lib.rs"))
        .unwrap();
    assert_eq!(
        lib.source,
        HitSource::File {
            path: "src/lib.rs".into(),
            first_line: 41,
            last_line: 80
        }
    );
    assert!(
        lib.snippet.contains("line 57 «frobnicate_widget»"),
        "{}",
        lib.snippet
    );
    // The last, short chunk.
    write(root, "src/lib.rs", lines_with(100, 99, "tail_marker"));
    index.index_workspace().await;
    assert_eq!(find(&index, "tail_marker").await, ["src/lib.rs:81-100"]);
    // History scope holds no files; All does.
    assert!(
        index
            .search("frobnicate_widget", Scope::History, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        index
            .search("frobnicate_widget", Scope::All, 10)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn unchanged_files_are_not_read_again_changed_ones_are_and_deleted_ones_go() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.txt", "alpha original_text\n");
    write(root, "b.txt", "bravo\n");
    write(root, "c.txt", "charlie\n");
    let index = Indexes::new(root).await;
    assert_eq!(index.index_workspace().await.files_indexed, 3);

    let again = index.index_workspace().await;
    assert_eq!(
        (
            again.files_indexed,
            again.files_unchanged,
            again.chunks_written
        ),
        (0, 3, 0)
    );

    write(root, "a.txt", "alpha replacement_text, longer\n");
    std::fs::remove_file(root.join("c.txt")).unwrap();
    write(root, "d.txt", "delta\n");
    let report = index.index_workspace().await;
    assert_eq!(report.files_indexed, 2, "a changed, d new: {report:?}");
    assert_eq!(report.files_unchanged, 1);
    assert_eq!(report.files_removed, 1);
    assert!(find(&index, "original_text").await.is_empty());
    assert_eq!(find(&index, "replacement_text").await, ["a.txt:1-1"]);
    assert!(find(&index, "charlie").await.is_empty());
    assert_eq!(find(&index, "delta").await, ["d.txt:1-1"]);
    assert_eq!(index.document_count().await.unwrap(), 3, "no stale chunks");
}

#[tokio::test]
async fn a_change_keeping_the_size_is_seen_through_the_mtime() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.txt", "old_word\n");
    let index = Indexes::new(root).await;
    index.index_workspace().await;
    write(root, "a.txt", "new_word\n");
    let file = std::fs::File::options()
        .write(true)
        .open(root.join("a.txt"))
        .unwrap();
    file.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
        .unwrap();
    drop(file);
    assert_eq!(index.index_workspace().await.files_indexed, 1);
    assert!(find(&index, "old_word").await.is_empty());
    assert_eq!(find(&index, "new_word").await, ["a.txt:1-1"]);
}

#[tokio::test]
async fn gitignore_hidden_and_state_directories_are_respected() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // Not a git repository: .gitignore applies all the same.
    write(root, ".gitignore", "target/\n*.log\n");
    write(root, "src/main.rs", "fn main() { needle_word(); }\n");
    write(root, "target/debug/out.rs", "needle_word generated\n");
    write(root, "build.log", "needle_word in a log\n");
    write(root, ".baton/notes.txt", "needle_word in baton state\n");
    write(root, ".git/HEAD", "needle_word in git\n");
    write(root, ".env", "needle_word=secret\n");
    write(root, "sub/.gitignore", "local.txt\n");
    write(
        root,
        "sub/local.txt",
        "needle_word ignored by a nested gitignore\n",
    );
    write(root, "sub/kept.txt", "needle_word kept\n");
    let index = Indexes::new(root).await;
    let report = index.index_workspace().await;
    assert_eq!(
        find(&index, "needle_word").await,
        ["src/main.rs:1-1", "sub/kept.txt:1-1"]
    );
    assert_eq!(report.files_seen, 2, "{report:?}");

    // Un-ignoring brings a file in; ignoring drops it.
    write(root, ".gitignore", "target/\nsrc/\n");
    let report = index.index_workspace().await;
    assert_eq!(
        find(&index, "needle_word").await,
        ["build.log:1-1", "sub/kept.txt:1-1"]
    );
    assert_eq!(report.files_removed, 1);
}

#[tokio::test]
async fn binary_oversized_and_invalid_utf8_files() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let limits = WorkspaceLimits {
        max_file_bytes: 1000,
        ..WorkspaceLimits::default()
    };
    let mut binary = b"needle_word\0\x01\x02".to_vec();
    binary.extend_from_slice(b" more needle_word");
    write(root, "image.png", &binary);
    write(
        root,
        "big.txt",
        format!("needle_word {}", "x ".repeat(1000)),
    );
    write(root, "latin1.txt", b"caf\xe9 needle_word \xff\xfe end\n");
    write(root, "ok.txt", "needle_word\n");
    let index = Indexes::with_limits(root, limits).await;
    let report = index.index_workspace().await;
    assert_eq!(
        find(&index, "needle_word").await,
        ["latin1.txt:1-1", "ok.txt:1-1"]
    );
    assert_eq!(report.files_binary, 1, "{report:?}");
    assert_eq!(report.files_too_large, 1);
    assert_eq!(report.files_indexed, 2);
    assert_eq!(
        report.files_seen, 3,
        "the binary file is seen, the big one not"
    );
    // Lossy UTF-8: the valid text around the bad bytes is searchable.
    assert_eq!(find(&index, "end").await, ["latin1.txt:1-1"]);

    // An unchanged binary file is not read again but still reported as binary.
    let again = index.index_workspace().await;
    assert_eq!(
        (
            again.files_binary,
            again.files_indexed,
            again.files_unchanged
        ),
        (1, 0, 2)
    );

    // A file that grows over the cap is dropped.
    write(root, "ok.txt", format!("needle_word {}", "y ".repeat(1000)));
    let report = index.index_workspace().await;
    assert_eq!(report.files_removed, 1);
    assert_eq!(find(&index, "needle_word").await, ["latin1.txt:1-1"]);
}

#[tokio::test]
async fn the_file_cap_is_reported_and_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for i in 0..10 {
        write(root, &format!("f{i}.txt"), format!("capped_word {i}\n"));
    }
    let limits = WorkspaceLimits {
        max_files: 4,
        ..WorkspaceLimits::default()
    };
    let index = Indexes::with_limits(root, limits).await;
    let report = index.index_workspace().await;
    assert!(report.file_cap_hit);
    assert_eq!(report.files_seen, 4);
    // Walked in name order: the first four names.
    assert_eq!(
        find(&index, "capped_word").await,
        ["f0.txt:1-1", "f1.txt:1-1", "f2.txt:1-1", "f3.txt:1-1"]
    );
}

#[tokio::test]
async fn the_more_relevant_file_ranks_first_and_history_merges_by_score() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "weak.md",
        "This long page mentions retry once, and then talks about many other things: the build \
         system, the documentation, the tests and the release process.\n",
    );
    write(
        root,
        "strong.md",
        "retry policy: retry with backoff; retry limits\n",
    );
    write(root, "none.md", "unrelated\n");
    let index = Indexes::new(root).await;
    index.index_workspace().await;
    let hits = index.search("retry", Scope::Files, 10).await.unwrap();
    let order: Vec<String> = hits.iter().map(|h| h.source.to_string()).collect();
    assert_eq!(order, ["strong.md:1-1", "weak.md:1-1"]);
    assert!(hits[0].score > hits[1].score);

    // History and files share one index: `All` is both scopes' hits merged by score.
    let mut j = Journal::new();
    j.start("goal");
    j.note("retry retry retry retry");
    j.note("a long note that names retry once among a great many other words of no interest");
    index.index_events(&j.records).await.unwrap();
    let all = index.search("retry", Scope::All, 10).await.unwrap();
    let mut merged = index.search("retry", Scope::History, 10).await.unwrap();
    merged.extend(index.search("retry", Scope::Files, 10).await.unwrap());
    merged.sort_by(|a, b| b.score.total_cmp(&a.score));
    assert_eq!(all, merged);
    assert_eq!(all.len(), 4);
    assert_eq!(all[0].source.to_string(), "note#1");
}

#[tokio::test]
async fn concurrent_indexing_calls_do_not_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for i in 0..20 {
        write(root, &format!("f{i}.txt"), format!("word{i} common_word\n"));
    }
    let index = Indexes::new(root).await;
    let (a, b) = tokio::join!(index.index_workspace(), index.index_workspace());
    assert_eq!(a.files_indexed + b.files_indexed, 20);
    assert_eq!(index.document_count().await.unwrap(), 20);
    assert_eq!(find(&index, "common_word").await.len(), 20);
}

#[tokio::test]
async fn a_missing_root_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    assert!(
        CodeIndex::open_at(&dir.path().join("absent"), &dir.path().join("index.db"))
            .await
            .is_err()
    );
}
