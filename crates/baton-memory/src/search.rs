//! Searching: the journal from this crate's index, the workspace's files from the code index.

use std::fmt;

use baton_core::RunId;
use baton_index::query::to_fts;
use baton_index::{CodeIndex, ELLIPSIS, MATCH_END, MATCH_START, TextHit, tidy_snippet};

use crate::error::db;
use crate::{MemoryError, MemoryIndex};

/// Words of context FTS5 puts in a snippet (its maximum is 64).
const SNIPPET_TOKENS: i64 = 24;
/// `limit` is capped at this many hits.
pub const MAX_LIMIT: usize = 200;

/// What to search.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Journaled history: goal, assistant messages and tool calls, tool results, notes.
    History,
    /// Workspace files (the code index).
    Files,
    /// Both, merged by score.
    All,
}

/// Where a hit comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HitSource {
    /// A journal entry; `handle` is `KIND#SEQ` ([`baton_core::handle`]) within `run_id`.
    History { run_id: RunId, handle: String },
    /// Lines `first_line..=last_line` (1-based) of a workspace file; `path` is relative to the
    /// workspace root, `/`-separated.
    File {
        path: String,
        first_line: u32,
        last_line: u32,
    },
}

/// `shell#42` or `src/lib.rs:41-80`: the form a model uses to read the content back.
impl fmt::Display for HitSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HitSource::History { handle, .. } => f.write_str(handle),
            HitSource::File {
                path,
                first_line,
                last_line,
            } => write!(f, "{path}:{first_line}-{last_line}"),
        }
    }
}

/// One search result.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    pub source: HitSource,
    /// Up to [`MAX_SNIPPET_CHARS`](crate::MAX_SNIPPET_CHARS) characters of the matching text
    /// around the best match, the matched words marked `«like this»`, cut text marked `…`,
    /// whitespace runs (newlines included) collapsed to one space.
    pub snippet: String,
    /// Relevance: FTS5's BM25 negated, so **higher is better**. History and files are scored
    /// by their own indexes, alike in scale (see the [crate docs](crate)). Not comparable
    /// across searches or bounded; only the order means something.
    pub score: f64,
}

impl From<TextHit> for Hit {
    fn from(hit: TextHit) -> Hit {
        Hit {
            source: HitSource::File {
                path: hit.path,
                first_line: hit.start_line,
                last_line: hit.end_line,
            },
            snippet: hit.snippet,
            score: hit.score,
        }
    }
}

impl MemoryIndex {
    /// The best `limit` (at most [`MAX_LIMIT`]) documents of `scope` for `query`, best first:
    /// journal entries from this index, files from `workspace` as it is (the caller brings it
    /// up to date; without one there are no files to find). [`Scope::All`] merges both by
    /// score, a journal entry first on a tie.
    ///
    /// Every word-separated chunk of the query must match first; if that finds nothing, any
    /// word may (see the [crate docs](crate)), in each scope on its own. Any text is safe to
    /// pass; text with no word in it is [`MemoryError::EmptyQuery`]. `limit == 0` returns
    /// nothing.
    pub async fn search(
        &self,
        query: &str,
        scope: Scope,
        limit: usize,
        workspace: Option<&CodeIndex>,
    ) -> Result<Vec<Hit>, MemoryError> {
        let fts = to_fts(query).ok_or(MemoryError::EmptyQuery)?;
        let limit = limit.min(MAX_LIMIT);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut hits = Vec::new();
        if scope != Scope::Files {
            hits = self.run(&fts.all, limit).await?;
            if let Some(any) = fts.any.as_deref().filter(|_| hits.is_empty()) {
                hits = self.run(any, limit).await?;
            }
        }
        if let Some(workspace) = workspace.filter(|_| scope != Scope::History) {
            let files = workspace
                .search_text(query, limit)
                .await
                .map_err(MemoryError::Workspace)?;
            hits.extend(files.into_iter().map(Hit::from));
            // Stable: on a tie the journal's entry stays first.
            hits.sort_by(|a, b| b.score.total_cmp(&a.score));
            hits.truncate(limit);
        }
        Ok(hits)
    }

    async fn run(&self, expr: &str, limit: usize) -> Result<Vec<Hit>, MemoryError> {
        let rows: Vec<(String, String, String, f64)> = sqlx::query_as(
            // The inner query is FTS5's rank-ordered scan: it ranks every match, then yields
            // rows best first and stops at the LIMIT, so snippets are made for the returned
            // rows only.
            "SELECT m.run_id, m.handle, d.snip, d.score \
             FROM (SELECT rowid AS id, snippet(docs, 1, ?3, ?4, ?5, ?6) AS snip, rank AS score \
                   FROM docs WHERE docs MATCH ?1 ORDER BY rank LIMIT ?2) AS d \
             JOIN doc_meta m ON m.id = d.id \
             ORDER BY d.score, d.id",
        )
        .bind(expr)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .bind(MATCH_START)
        .bind(MATCH_END)
        .bind(ELLIPSIS)
        .bind(SNIPPET_TOKENS)
        .fetch_all(&self.pool)
        .await
        .map_err(db("searching"))?;
        Ok(rows
            .into_iter()
            .map(|(run_id, handle, snippet, bm25)| Hit {
                source: HitSource::History {
                    run_id: RunId::from_string(run_id),
                    handle,
                },
                snippet: tidy_snippet(&snippet),
                score: -bm25,
            })
            .collect())
    }
}

/// Any text either is [`MemoryError::EmptyQuery`] or searches real indexes (the journal's and
/// the workspace's) without error.
#[cfg(test)]
mod proptests {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    use baton_index::CodeIndex;

    use crate::{MemoryError, MemoryIndex, Scope};

    /// Query texts heavy in FTS5 syntax, plus arbitrary unicode.
    fn queries() -> impl Strategy<Value = String> {
        let syntax = prop::collection::vec(
            prop_oneof![
                Just("\"".to_owned()),
                Just("\"\"".to_owned()),
                Just("*".to_owned()),
                Just("-".to_owned()),
                Just(":".to_owned()),
                Just("^".to_owned()),
                Just("(".to_owned()),
                Just(")".to_owned()),
                Just("{".to_owned()),
                Just("}".to_owned()),
                Just("+".to_owned()),
                Just(" ".to_owned()),
                Just("\0".to_owned()),
                Just("NEAR".to_owned()),
                Just("NEAR(".to_owned()),
                Just("AND".to_owned()),
                Just("OR".to_owned()),
                Just("NOT".to_owned()),
                Just("title:".to_owned()),
                Just("body".to_owned()),
                Just("snake_case".to_owned()),
                Just("é".to_owned()),
                Just("\u{301}".to_owned()),
                Just("日本".to_owned()),
                Just("🦀".to_owned()),
                Just("\u{feff}".to_owned()),
                Just("\u{e000}".to_owned()),
                "[a-z]{1,6}",
            ],
            0..12,
        )
        .prop_map(|parts| parts.concat());
        prop_oneof![syntax, any::<String>(), "\\PC{0,40}"]
    }

    #[test]
    fn any_text_is_empty_or_a_working_query() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(
            root.join("a.rs"),
            "fn snake_case() {}\n// NEAR the AND body é 日本 🦀 \"quoted\"\n",
        )
        .unwrap();
        let (index, workspace) = runtime.block_on(async {
            let index = MemoryIndex::new().await.unwrap();
            let workspace = CodeIndex::open_at(&root, &dir.path().join("index.db"))
                .await
                .unwrap();
            workspace.update().await.unwrap();
            // The index really holds the file the queries run against.
            let hits = index
                .search("snake_case", Scope::Files, 5, Some(&workspace))
                .await
                .unwrap();
            assert_eq!(hits.len(), 1);
            (index, workspace)
        });
        let mut runner = TestRunner::new(Config {
            cases: 2_000,
            ..Config::default()
        });
        runner
            .run(&queries(), |text| {
                for scope in [Scope::All, Scope::History, Scope::Files] {
                    match runtime.block_on(index.search(&text, scope, 5, Some(&workspace))) {
                        Ok(_) | Err(MemoryError::EmptyQuery) => {}
                        Err(e) => return Err(TestCaseError::fail(format!("{text:?}: {e}"))),
                    }
                }
                Ok(())
            })
            .unwrap();
    }
}
