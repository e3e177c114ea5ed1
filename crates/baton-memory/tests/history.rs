//! Indexing journal events and finding them by handle, against a real SQLite FTS5 index.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use baton_core::Event;
use baton_memory::{Hit, HitSource, MemoryError, MemoryIndex, Scope};
use support::journal::Journal;

fn handles(hits: &[Hit]) -> Vec<String> {
    hits.iter().map(|h| h.source.to_string()).collect()
}

/// A small run: goal, a model call asking for a shell command, its output, a note.
fn sample() -> Journal {
    let mut j = Journal::new();
    j.start("migrate the payment service to the new ledger API");
    j.push(Event::TurnStarted { turn: 1 });
    j.model(
        Some("I will look at the failing test first."),
        &[("c1", "shell", r#"{"command":"cargo test ledger_balance"}"#)],
    );
    j.tool(
        "c1",
        "shell",
        r#"{"command":"cargo test ledger_balance"}"#,
        "thread 'ledger_balance' panicked: overdraft_limit exceeded",
    );
    j.note("Remember to use tools; answer with a tool call.");
    j
}

#[tokio::test]
async fn events_are_found_by_their_handles() {
    let index = MemoryIndex::new().await.unwrap();
    let j = sample();
    let added = index.index_events(&j.records).await.unwrap();
    assert_eq!(added, 4, "goal, model message, tool result, note");

    let hits = index
        .search("ledger API", Scope::History, 10, None)
        .await
        .unwrap();
    assert_eq!(handles(&hits), ["goal#0"]);
    let HitSource::History { run_id, .. } = &hits[0].source else {
        panic!("not a history hit: {hits:?}");
    };
    assert_eq!(run_id, &j.run_id);

    // The tool result: named by the tool from its ToolCallStarted, seq of ToolCallFinished.
    let hits = index
        .search("overdraft_limit", Scope::History, 10, None)
        .await
        .unwrap();
    assert_eq!(handles(&hits), ["shell#4"]);
    assert!(
        hits[0].snippet.contains("«overdraft_limit»"),
        "{}",
        hits[0].snippet
    );

    // The assistant message, by its text and by its tool call's arguments.
    let hits = index
        .search("failing test", Scope::History, 10, None)
        .await
        .unwrap();
    assert_eq!(handles(&hits), ["model#2"]);
    let hits = index
        .search("ledger_balance", Scope::History, 10, None)
        .await
        .unwrap();
    assert_eq!(handles(&hits).len(), 2);
    assert!(handles(&hits).contains(&"model#2".to_owned()));
    assert!(handles(&hits).contains(&"shell#4".to_owned()));

    let hits = index
        .search("tool call", Scope::History, 10, None)
        .await
        .unwrap();
    assert_eq!(handles(&hits), ["note#5"]);

    // Files scope sees none of it.
    let (_dir, workspace) = support::workspace::empty().await;
    assert!(
        index
            .search("ledger", Scope::Files, 10, Some(&workspace))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn indexing_again_adds_nothing_twice() {
    let index = MemoryIndex::new().await.unwrap();
    let mut j = sample();
    assert_eq!(index.index_events(&j.records).await.unwrap(), 4);
    assert_eq!(index.index_events(&j.records).await.unwrap(), 0);
    assert_eq!(index.document_count().await.unwrap(), 4);

    // The journal grows; the whole journal is passed again and only the new events count.
    j.note("ledger migration half done");
    assert_eq!(index.index_events(&j.records).await.unwrap(), 1);
    assert_eq!(index.document_count().await.unwrap(), 5);
    let hits = index
        .search("migration", Scope::History, 10, None)
        .await
        .unwrap();
    assert_eq!(handles(&hits), ["note#6"]);
    let hits = index
        .search("ledger", Scope::History, 10, None)
        .await
        .unwrap();
    let mut found = handles(&hits);
    found.sort();
    // `model#2` and `shell#4` hold `ledger_balance`: found by its part, once each.
    assert_eq!(found, ["goal#0", "model#2", "note#6", "shell#4"]);
}

#[tokio::test]
async fn a_tool_result_is_named_from_a_start_indexed_earlier() {
    let index = MemoryIndex::new().await.unwrap();
    let mut j = Journal::new();
    j.start("goal");
    let finish = j.tool(
        "c9",
        "read_file",
        r#"{"path":"src/quux.rs"}"#,
        "fn quux() {}",
    );
    // Index the start alone, then the rest: the finish still gets the tool's name.
    let (first, rest) = j.records.split_at(finish as usize);
    index.index_events(first).await.unwrap();
    index.index_events(rest).await.unwrap();
    let hits = index
        .search("quux", Scope::History, 10, None)
        .await
        .unwrap();
    assert_eq!(handles(&hits), [format!("read_file#{finish}")]);
    // The arguments are searchable with the result.
    let hits = index
        .search("src/quux.rs", Scope::History, 10, None)
        .await
        .unwrap();
    assert_eq!(handles(&hits), [format!("read_file#{finish}")]);
}

#[tokio::test]
async fn a_result_without_a_known_start_is_a_generic_tool_handle() {
    let index = MemoryIndex::new().await.unwrap();
    let mut j = Journal::new();
    j.start("goal");
    let finish = j.tool("c1", "grep", "{}", "zebra stripes");
    // Only the finish is given.
    index
        .index_events(&j.records[finish as usize..])
        .await
        .unwrap();
    let hits = index
        .search("zebra", Scope::History, 10, None)
        .await
        .unwrap();
    assert_eq!(handles(&hits), [format!("tool#{finish}")]);
}

#[tokio::test]
async fn events_in_any_order_and_runs_are_kept_apart() {
    let index = MemoryIndex::new().await.unwrap();
    let mut a = Journal::new();
    a.start("alpha goal");
    a.note("shared word");
    let mut b = Journal::new();
    b.start("beta goal");
    b.note("shared word");
    let mut mixed: Vec<_> = a.records.iter().chain(&b.records).cloned().collect();
    mixed.reverse();
    assert_eq!(index.index_events(&mixed).await.unwrap(), 4);
    assert_eq!(index.index_events(&mixed).await.unwrap(), 0);
    let hits = index
        .search("shared", Scope::History, 10, None)
        .await
        .unwrap();
    let mut runs: Vec<_> = hits
        .iter()
        .map(|h| match &h.source {
            HitSource::History { run_id, handle } => (run_id.clone(), handle.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    runs.sort();
    let mut want = vec![
        (a.run_id.clone(), "note#1".to_owned()),
        (b.run_id, "note#1".to_owned()),
    ];
    want.sort();
    assert_eq!(runs, want);
}

#[tokio::test]
async fn the_more_relevant_entry_ranks_first() {
    let index = MemoryIndex::new().await.unwrap();
    let mut j = Journal::new();
    j.start("goal");
    let weak = j.note(
        "A long note that mentions the tokenizer once among many other words about the build, \
         the tests, the release process, documentation, benchmarks and deployment.",
    );
    let strong = j.note("tokenizer: the tokenizer splits words; tokenizer options");
    j.note("nothing relevant here");
    index.index_events(&j.records).await.unwrap();
    let hits = index
        .search("tokenizer", Scope::History, 10, None)
        .await
        .unwrap();
    assert_eq!(
        handles(&hits),
        [format!("note#{strong}"), format!("note#{weak}")]
    );
    assert!(hits[0].score > hits[1].score, "higher is better: {hits:?}");
}

#[tokio::test]
async fn identifiers_match_whole_and_by_their_parts() {
    let index = MemoryIndex::new().await.unwrap();
    let mut j = Journal::new();
    j.start("goal");
    let exact = j.note("the balance is wrong");
    let snake = j.note("see ledger_balance");
    let camel = j.note("see getBalance");
    j.note("see balanced");
    index.index_events(&j.records).await.unwrap();
    // The whole identifier finds only itself.
    let hits = index
        .search("ledger_balance", Scope::History, 10, None)
        .await
        .unwrap();
    assert_eq!(handles(&hits), [format!("note#{snake}")]);
    // A part finds the word itself first, then identifiers made of it; not other words that
    // merely start with it.
    let hits = index
        .search("balance", Scope::History, 10, None)
        .await
        .unwrap();
    let found = handles(&hits);
    assert_eq!(found.len(), 3, "{found:?}");
    assert_eq!(found[0], format!("note#{exact}"));
    assert!(found.contains(&format!("note#{snake}")));
    assert!(found.contains(&format!("note#{camel}")));
}

#[tokio::test]
async fn all_words_first_then_any_word() {
    let index = MemoryIndex::new().await.unwrap();
    let mut j = Journal::new();
    j.start("goal");
    let both = j.note("apple banana");
    let apple = j.note("apple only");
    index.index_events(&j.records).await.unwrap();
    // Both words: only the entry holding both.
    let hits = index
        .search("banana apple", Scope::History, 10, None)
        .await
        .unwrap();
    assert_eq!(handles(&hits), [format!("note#{both}")]);
    // No entry holds both: any word matches.
    let hits = index
        .search("apple cherry", Scope::History, 10, None)
        .await
        .unwrap();
    let mut found = handles(&hits);
    found.sort();
    assert_eq!(found, [format!("note#{both}"), format!("note#{apple}")]);
    // FTS5 syntax is plain text.
    let hits = index
        .search("apple OR NOT (\"", Scope::History, 10, None)
        .await
        .unwrap();
    assert_eq!(hits.len(), 2);
}

#[tokio::test]
async fn empty_queries_and_limits() {
    let index = MemoryIndex::new().await.unwrap();
    let mut j = Journal::new();
    j.start("goal");
    for i in 0..5 {
        j.note(&format!("repeated entry {i}"));
    }
    index.index_events(&j.records).await.unwrap();
    for query in ["", "  \n", "*", "\"\"", "()"] {
        assert!(
            matches!(
                index.search(query, Scope::All, 10, None).await,
                Err(MemoryError::EmptyQuery)
            ),
            "{query:?}"
        );
    }
    assert_eq!(
        index
            .search("repeated", Scope::All, 3, None)
            .await
            .unwrap()
            .len(),
        3
    );
    assert!(
        index
            .search("repeated", Scope::All, 0, None)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        index
            .search("absent", Scope::All, 10, None)
            .await
            .unwrap()
            .is_empty()
    );
}

/// The engine holds the index in an `Arc` and calls it from spawned tasks.
#[tokio::test]
async fn the_index_and_its_futures_are_send_and_sync() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    let index = MemoryIndex::new().await.unwrap();
    send_sync(&index);
    let (_dir, workspace) = support::workspace::empty().await;
    send(&index.index_events(&[]));
    send(&index.search("x", Scope::All, 1, Some(&workspace)));
}
