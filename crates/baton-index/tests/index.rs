//! The code index on real files: incremental updates, keyword/vector/hybrid search, the repo
//! map, rebuilding a broken database.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use baton_embed::{EmbedError, Embedded, Embedder, Metered, Purpose, normalize};
use baton_index::{CodeIndex, MapRequest, Opened, SearchMode, SearchRequest};

/// A stand-in for an embedding model: words hashed into 256 dimensions. Texts sharing words
/// are near; it counts what it is asked to embed.
#[derive(Default)]
struct BagOfWords {
    calls: AtomicUsize,
    inputs: AtomicUsize,
    /// Part of the model id (tests sharing a PostgreSQL cache keep apart by it).
    name: String,
    /// How long each call takes (so that two workspaces embed at the same time).
    delay: std::time::Duration,
    /// Every call fails for good.
    broken: bool,
}

fn words(text: &str) -> Vec<String> {
    baton_index::subwords::subwords(text)
        .split_whitespace()
        .map(str::to_owned)
        .chain(
            text.split(|c: char| !c.is_alphanumeric())
                .map(str::to_owned),
        )
        .filter(|w| w.len() > 2)
        .map(|w| w.to_lowercase())
        .collect()
}

#[async_trait]
impl Embedder for BagOfWords {
    fn model_id(&self) -> String {
        format!("test/bag-of-words{}", self.name)
    }
    fn max_batch(&self) -> usize {
        16
    }
    async fn embed(&self, texts: &[String], _: Purpose) -> Result<Embedded, EmbedError> {
        tokio::time::sleep(self.delay).await;
        if self.broken {
            return Err(EmbedError::Inference("this model is broken".into()));
        }
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inputs.fetch_add(texts.len(), Ordering::SeqCst);
        let vectors = texts
            .iter()
            .map(|t| {
                let mut v = vec![0.0f32; 256];
                for w in words(t) {
                    let h = w
                        .bytes()
                        .fold(5381u32, |h, b| h.wrapping_mul(33) ^ u32::from(b));
                    v[h as usize % 256] += 1.0;
                }
                normalize(&mut v);
                v
            })
            .collect();
        Ok(Embedded {
            vectors,
            input_tokens: texts.iter().map(|t| t.len() as u64 / 4).sum(),
        })
    }
}

/// The index of `root`, kept in its (walk-skipped) `.baton/` directory.
async fn open(root: &Path) -> CodeIndex {
    CodeIndex::open_at(root, &root.join(".baton/index/index.db"))
        .await
        .unwrap()
}

fn fixture(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    copy_dir(&src, dir.path());
    let root = dir.path().to_owned();
    (dir, root)
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// About four characters a token, as a stand-in for the model's tokenizer.
fn tokens(text: &str) -> usize {
    text.len().div_ceil(4)
}

fn request(query: &str, mode: SearchMode) -> SearchRequest<'_> {
    SearchRequest {
        query,
        k: 5,
        mode,
        path_prefix: None,
    }
}

#[tokio::test]
async fn update_is_incremental_and_tracks_changes() {
    let (_dir, root) = fixture("rust");
    let index = open(&root).await;
    assert_eq!(index.opened(), &Opened::Created);
    let first = index.update().await.unwrap();
    assert_eq!((first.files_seen, first.files_indexed), (3, 3), "{first:?}");
    let stats = index.stats(None).await.unwrap();
    assert_eq!(stats.languages.get("rust"), Some(&3));
    assert!(stats.definitions >= 8, "{stats:?}");

    let again = index.update().await.unwrap();
    assert_eq!(
        (again.files_indexed, again.chunks_written),
        (0, 0),
        "{again:?}"
    );

    // A rewrite with the same content is only touched; a real change is re-read.
    let report = root.join("src/report.rs");
    let text = std::fs::read_to_string(&report).unwrap();
    std::fs::write(&report, &text).unwrap();
    filetime_bump(&report);
    let touched = index.update().await.unwrap();
    assert_eq!(
        (touched.files_touched, touched.files_indexed),
        (1, 0),
        "{touched:?}"
    );
    std::fs::write(&report, text.replace("euros", "dollars")).unwrap();
    let changed = index.update().await.unwrap();
    assert_eq!(changed.files_indexed, 1, "{changed:?}");

    std::fs::remove_file(&report).unwrap();
    let removed = index.update().await.unwrap();
    assert_eq!(removed.files_removed, 1);
    let hits = index
        .search(&request("render_report", SearchMode::Keyword), None)
        .await
        .unwrap();
    assert!(
        hits.hits.iter().all(|h| h.path != "src/report.rs"),
        "{hits:?}"
    );
}

/// Moves a file's mtime forward so a same-size rewrite within the clock's granularity is seen.
fn filetime_bump(path: &Path) {
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(later).unwrap();
}

#[tokio::test]
async fn keyword_search_finds_definitions_by_name_and_words() {
    let (_dir, root) = fixture("python");
    let index = open(&root).await;
    index.update().await.unwrap();
    let results = index
        .search(
            &request(
                "where is the best applicable rule chosen",
                SearchMode::Hybrid,
            ),
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        results.mode,
        SearchMode::Keyword,
        "no embedder: keyword only"
    );
    assert_eq!(results.notes.len(), 1, "{:?}", results.notes);
    let best = &results.hits[0];
    assert_eq!(best.path, "shop/pricing.py");
    assert_eq!(best.symbol.as_deref(), Some("apply_discount"));
    assert_eq!((best.start_line, best.end_line), (12, 18));
    assert!(
        best.snippet
            .starts_with("def apply_discount(amount, rules):"),
        "{}",
        best.snippet
    );

    let scoped = SearchRequest {
        path_prefix: Some("shop/cart"),
        ..request("discount", SearchMode::Keyword)
    };
    let hits = index.search(&scoped, None).await.unwrap().hits;
    assert!(
        !hits.is_empty() && hits.iter().all(|h| h.path == "shop/cart.py"),
        "{hits:?}"
    );

    let err = index
        .search(&request("  ", SearchMode::Keyword), None)
        .await
        .unwrap_err();
    assert!(matches!(err, baton_index::IndexError::EmptyQuery), "{err}");
    let err = index
        .search(&request("cart", SearchMode::Vector), None)
        .await
        .unwrap_err();
    assert!(matches!(err, baton_index::IndexError::NoEmbedder), "{err}");
}

#[tokio::test]
async fn vectors_are_embedded_once_and_only_for_changed_chunks() {
    let (_dir, root) = fixture("typescript");
    let index = open(&root).await;
    index.update().await.unwrap();
    let model = Arc::new(BagOfWords::default());
    let metered = Metered::new(model.clone());
    let report = index
        .embed_missing(&metered, None, &|_, _| {})
        .await
        .unwrap();
    let chunks = index.stats(None).await.unwrap().distinct_chunks as usize;
    assert_eq!(report.embedded, chunks);
    assert_eq!(model.inputs.load(Ordering::SeqCst), chunks);
    let stats = index.stats(Some("test/bag-of-words")).await.unwrap();
    assert_eq!(stats.embedded_share(), 1.0);

    let again = index
        .embed_missing(&metered, None, &|_, _| {})
        .await
        .unwrap();
    assert_eq!(again.embedded, 0);

    // One method changes: exactly one chunk is embedded again.
    let queue = root.join("src/queue.ts");
    let text = std::fs::read_to_string(&queue).unwrap();
    std::fs::write(
        &queue,
        text.replace("this.pending.shift()", "this.pending.pop()"),
    )
    .unwrap();
    index.update().await.unwrap();
    let before = model.inputs.load(Ordering::SeqCst);
    let changed = index
        .embed_missing(&metered, None, &|_, _| {})
        .await
        .unwrap();
    assert_eq!(changed.embedded, 1, "{changed:?}");
    assert_eq!(model.inputs.load(Ordering::SeqCst) - before, 1);
}

#[tokio::test]
async fn vector_and_hybrid_search_rank_by_meaning() {
    let (_dir, root) = fixture("typescript");
    let index = open(&root).await;
    index.update().await.unwrap();
    let metered = Metered::new(Arc::new(BagOfWords::default()));
    index
        .embed_missing(&metered, None, &|_, _| {})
        .await
        .unwrap();
    let vector = index
        .search(
            &request("backoff delay attempts", SearchMode::Vector),
            Some(&metered),
        )
        .await
        .unwrap();
    assert_eq!(vector.hits[0].path, "src/retry.ts", "{:?}", vector.hits);
    assert!(vector.hits[0].score > 0.3 && vector.hits[0].score <= 1.0001);
    let hybrid = index
        .search(
            &request("enqueue a job", SearchMode::Hybrid),
            Some(&metered),
        )
        .await
        .unwrap();
    assert_eq!(hybrid.mode, SearchMode::Hybrid);
    assert!(hybrid.notes.is_empty(), "{:?}", hybrid.notes);
    // A class this small is one chunk, its methods included.
    assert_eq!(
        hybrid.hits[0].symbol.as_deref(),
        Some("JobQueue"),
        "{:?}",
        hybrid.hits
    );
    // Deterministic: the same index answers the same.
    let again = index
        .search(
            &request("enqueue a job", SearchMode::Hybrid),
            Some(&metered),
        )
        .await
        .unwrap();
    assert_eq!(hybrid, again);
}

async fn map_of(root: &Path, budget: usize, focus: &str) -> String {
    let index = open(root).await;
    index.update().await.unwrap();
    index
        .map(
            &MapRequest {
                focus,
                path_prefix: None,
                max_tokens: budget,
            },
            &tokens,
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn repo_maps_of_three_languages() {
    for lang in ["rust", "python", "typescript"] {
        let (_dir, root) = fixture(lang);
        let map = map_of(&root, 1_000, "").await;
        insta::assert_snapshot!(format!("map_{lang}"), map);
        // Rebuilt from nothing, the map is byte-identical.
        std::fs::remove_dir_all(root.join(".baton")).unwrap();
        assert_eq!(map_of(&root, 1_000, "").await, map, "{lang}");
    }
}

#[tokio::test]
async fn map_respects_its_budget_and_focus() {
    let (_dir, root) = fixture("rust");
    let full = map_of(&root, 10_000, "").await;
    for budget in [20, 40, 80] {
        let map = map_of(&root, budget, "").await;
        assert!(tokens(&map) <= budget, "{budget}: {map}");
        assert!(map.len() < full.len());
    }
    let small = map_of(&root, 30, "").await;
    assert!(
        small.contains("Ledger"),
        "the most used definition comes first: {small}"
    );
    let focused = map_of(&root, 30, "change render_report in src/report.rs").await;
    assert!(focused.contains("render_report"), "{focused}");
}

#[tokio::test]
async fn a_broken_database_is_rebuilt() {
    let (_dir, root) = fixture("python");
    let db = root.join(".baton/index/index.db");
    std::fs::create_dir_all(db.parent().unwrap()).unwrap();
    std::fs::write(
        &db,
        b"this is not a database, it is a file with words in it",
    )
    .unwrap();
    let index = open(&root).await;
    assert!(
        matches!(index.opened(), Opened::Rebuilt(_)),
        "{:?}",
        index.opened()
    );
    let report = index.update().await.unwrap();
    assert_eq!(report.files_indexed, 4);
    drop(index);
    let reopened = open(&root).await;
    assert_eq!(reopened.opened(), &Opened::Existing);
}

/// The local PostgreSQL's shared cache, and a model name no other test run uses.
async fn shared_cache() -> (baton_index::PostgresVectorCache, String) {
    let url = std::env::var("BATON_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let cache = baton_index::PostgresVectorCache::connect(&url)
        .await
        .expect("the local PostgreSQL (BATON_TEST_POSTGRES) for the shared cache test");
    let name = format!(
        "/{}",
        std::process::id() as u64 * 1_000_003
            + std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                % 1_000_003
    );
    (cache, name)
}

/// Two clones of one repository share vectors through PostgreSQL: the second embeds nothing.
#[tokio::test]
async fn a_shared_postgres_cache_embeds_each_chunk_once() {
    let (cache, name) = shared_cache().await;
    let (_a, first) = fixture("python");
    let (_b, second) = fixture("python");
    let mut counts = Vec::new();
    for root in [&first, &second] {
        let index = open(root).await;
        index.update().await.unwrap();
        let model = Arc::new(BagOfWords {
            name: name.clone(),
            ..BagOfWords::default()
        });
        let metered = Metered::new(model.clone());
        let report = index
            .embed_missing(&metered, Some(&cache), &|_, _| {})
            .await
            .unwrap();
        let stats = index.stats(Some(&model.model_id())).await.unwrap();
        assert_eq!(stats.embedded_share(), 1.0);
        counts.push((model.inputs.load(Ordering::SeqCst), report.from_cache));
    }
    let chunks = counts[0].0;
    assert!(chunks > 0);
    assert_eq!(counts[0], (chunks, 0), "the first clone embeds every chunk");
    assert_eq!(
        counts[1],
        (0, chunks),
        "the second finds them all in the cache"
    );
}

/// A fixture's index, updated, and a slow bag-of-words model of `name`.
async fn slow_clone(name: &str, delay_ms: u64) -> (tempfile::TempDir, CodeIndex, Arc<BagOfWords>) {
    let (dir, root) = fixture("python");
    let index = open(&root).await;
    index.update().await.unwrap();
    let model = Arc::new(BagOfWords {
        name: name.to_owned(),
        delay: std::time::Duration::from_millis(delay_ms),
        ..BagOfWords::default()
    });
    (dir, index, model)
}

/// A clone whose worker was "killed" while embedding: its future dropped after it claimed,
/// while its model was still working. Its index is closed; its claims stay in the cache.
async fn killed_while_embedding(
    cache: &baton_index::PostgresVectorCache,
    name: &str,
) -> tempfile::TempDir {
    let (dir, index, slow) = slow_clone(name, 60_000).await;
    let killed = tokio::time::timeout(
        std::time::Duration::from_millis(500),
        index.embed_missing(&Metered::new(slow), Some(cache), &|_, _| {}),
    )
    .await;
    assert!(killed.is_err(), "the worker was still embedding");
    dir
}

/// Two clones embedding at the same moment: the chunks one has claimed, the other waits for
/// instead of embedding them too. Without claims both would find the cache empty and each
/// embed every chunk.
#[tokio::test]
async fn two_clones_embedding_at_once_embed_each_chunk_once() {
    let (cache, name) = shared_cache().await;
    let (_a, first, model_a) = slow_clone(&name, 300).await;
    let (_b, second, model_b) = slow_clone(&name, 300).await;
    let chunks = first.missing_count(&model_a.model_id()).await.unwrap();
    assert!(chunks > 0);
    let (metered_a, metered_b) = (Metered::new(model_a.clone()), Metered::new(model_b.clone()));
    let (a, b) = tokio::join!(
        first.embed_missing(&metered_a, Some(&cache), &|_, _| {}),
        second.embed_missing(&metered_b, Some(&cache), &|_, _| {}),
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let embedded = model_a.inputs.load(Ordering::SeqCst) + model_b.inputs.load(Ordering::SeqCst);
    assert_eq!(
        embedded, chunks,
        "each chunk embedded once in all: {a:?} {b:?}"
    );
    assert_eq!(a.embedded + b.embedded, chunks);
    assert_eq!(
        a.from_cache + b.from_cache,
        chunks,
        "the rest came from the cache"
    );
    for index in [&first, &second] {
        let stats = index.stats(Some(&model_a.model_id())).await.unwrap();
        assert_eq!(stats.embedded_share(), 1.0);
    }
}

/// A worker killed while embedding leaves its claims behind; the next one waits for them only
/// until they are older than the claim timeout, then embeds the chunks itself.
#[tokio::test]
async fn a_dead_workers_claims_are_taken_over_when_stale() {
    let (cache, name) = shared_cache().await;
    let _first = killed_while_embedding(&cache, &name).await;

    let cache = cache.with_claim_timeout(std::time::Duration::from_secs(1));
    let (_b, second, model_b) = slow_clone(&name, 0).await;
    let chunks = second.missing_count(&model_b.model_id()).await.unwrap();
    let metered_b = Metered::new(model_b.clone());
    let report = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        second.embed_missing(&metered_b, Some(&cache), &|_, _| {}),
    )
    .await
    .expect("the stale claims were taken over, not waited for forever")
    .unwrap();
    assert_eq!(report.embedded, chunks);
    assert_eq!(model_b.inputs.load(Ordering::SeqCst), chunks);
}

/// A worker whose embedding fails gives its claims up at once: the next one (with the default,
/// five-minute claim timeout) embeds the chunks without waiting for them to go stale.
#[tokio::test]
async fn a_failed_embedding_releases_its_claims() {
    let (cache, name) = shared_cache().await;
    let (_a, first, _) = slow_clone(&name, 0).await;
    let broken = Arc::new(BagOfWords {
        name: name.clone(),
        broken: true,
        ..BagOfWords::default()
    });
    let failed = first
        .embed_missing(&Metered::new(broken), Some(&cache), &|_, _| {})
        .await;
    assert!(failed.is_err());

    let (_b, second, model_b) = slow_clone(&name, 0).await;
    let chunks = second.missing_count(&model_b.model_id()).await.unwrap();
    let report = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        second.embed_missing(&Metered::new(model_b.clone()), Some(&cache), &|_, _| {}),
    )
    .await
    .expect("released claims are not waited for")
    .unwrap();
    assert_eq!(report.embedded, chunks);
}

/// A worker killed while embedding and restarted on the same index takes its own claims back
/// at once: they are its own, not another worker's to wait for (the default claim timeout is
/// five minutes).
#[tokio::test]
async fn a_restarted_worker_takes_its_own_claims_back_at_once() {
    let (cache, name) = shared_cache().await;
    let dir = killed_while_embedding(&cache, &name).await;

    let again = open(dir.path()).await;
    let model = Arc::new(BagOfWords {
        name: name.clone(),
        ..BagOfWords::default()
    });
    let chunks = again.missing_count(&model.model_id()).await.unwrap();
    let report = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        again.embed_missing(&Metered::new(model.clone()), Some(&cache), &|_, _| {}),
    )
    .await
    .expect("its own claims are not waited for")
    .unwrap();
    assert_eq!(report.embedded, chunks);
}
