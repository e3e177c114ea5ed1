//! Searching the index.

use std::fmt;

use baton_core::RunId;

use crate::error::db;
use crate::query::to_fts;
use crate::{MemoryError, MemoryIndex, SCOPE_FILE};

/// Marks a matched word in a [`Hit::snippet`]: `«word»`.
pub const MATCH_START: &str = "«";
pub const MATCH_END: &str = "»";
/// Marks text cut from either side of a snippet.
pub const ELLIPSIS: &str = "…";
/// Words of context FTS5 puts in a snippet (its maximum is 64).
const SNIPPET_TOKENS: i64 = 24;
/// A snippet is cut to this many characters (a "word" between two matches can be long).
pub const MAX_SNIPPET_CHARS: usize = 300;
/// `limit` is capped at this many hits.
pub const MAX_LIMIT: usize = 200;

/// What to search.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Journaled history: goal, assistant messages and tool calls, tool results, notes.
    History,
    /// Workspace files.
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
    /// Up to [`MAX_SNIPPET_CHARS`] characters of the matching text around the best match, the
    /// matched words marked `«like this»`, cut text marked `…`, whitespace runs (newlines
    /// included) collapsed to one space.
    pub snippet: String,
    /// Relevance: FTS5's BM25 negated, so **higher is better** and scores of hits from one
    /// search are comparable (history and files share one index and its statistics). Not
    /// comparable across searches or bounded; only the order means something.
    pub score: f64,
}

type Row = (
    i64,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
    Option<i64>,
    String,
    f64,
);

impl MemoryIndex {
    /// The best `limit` (at most [`MAX_LIMIT`]) documents of `scope` for `query`, best first.
    ///
    /// Every word-separated chunk of the query must match first; if that finds nothing, any
    /// word may (see the [crate docs](crate)). Any text is safe to pass; text with no word in
    /// it is [`MemoryError::EmptyQuery`]. `limit == 0` returns nothing.
    pub async fn search(
        &self,
        query: &str,
        scope: Scope,
        limit: usize,
    ) -> Result<Vec<Hit>, MemoryError> {
        let fts = to_fts(query)?;
        let limit = limit.min(MAX_LIMIT);
        if limit == 0 {
            return Ok(Vec::new());
        }
        let hits = self.run(&fts.all, scope, limit).await?;
        match fts.any {
            Some(any) if hits.is_empty() => self.run(&any, scope, limit).await,
            _ => Ok(hits),
        }
    }

    async fn run(&self, expr: &str, scope: Scope, limit: usize) -> Result<Vec<Hit>, MemoryError> {
        // History rowids are negative, file chunks' positive (see the schema).
        let (low, high) = match scope {
            Scope::History => (i64::MIN, -1),
            Scope::Files => (1, i64::MAX),
            Scope::All => (i64::MIN, i64::MAX),
        };
        let rows: Vec<Row> = sqlx::query_as(
            // The inner query is FTS5's rank-ordered scan with a rowid range, both handled
            // inside FTS5: it ranks every match, then yields rows best first and stops at the
            // LIMIT, so snippets are made for the returned rows only.
            "SELECT m.scope, m.run_id, m.handle, m.path, m.first_line, m.last_line, d.snip, d.score \
             FROM (SELECT rowid AS id, snippet(docs, 1, ?5, ?6, ?7, ?8) AS snip, rank AS score \
                   FROM docs WHERE docs MATCH ?1 AND rowid BETWEEN ?2 AND ?3 \
                   ORDER BY rank LIMIT ?4) AS d \
             JOIN doc_meta m ON m.id = d.id \
             ORDER BY d.score, d.id",
        )
        .bind(expr)
        .bind(low)
        .bind(high)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .bind(MATCH_START)
        .bind(MATCH_END)
        .bind(ELLIPSIS)
        .bind(SNIPPET_TOKENS)
        .fetch_all(&self.pool)
        .await
        .map_err(db("searching"))?;
        Ok(rows.into_iter().map(hit).collect())
    }
}

fn hit(row: Row) -> Hit {
    let (scope, run_id, handle, path, first, last, snippet, bm25) = row;
    let line = |n: Option<i64>| n.and_then(|n| u32::try_from(n).ok()).unwrap_or(0);
    let source = if scope == SCOPE_FILE {
        HitSource::File {
            path: path.unwrap_or_default(),
            first_line: line(first),
            last_line: line(last),
        }
    } else {
        HitSource::History {
            run_id: RunId::from_string(run_id.unwrap_or_default()),
            handle: handle.unwrap_or_default(),
        }
    };
    Hit {
        source,
        snippet: tidy_snippet(&snippet),
        score: -bm25,
    }
}

fn tidy_snippet(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len().min(MAX_SNIPPET_CHARS * 4));
    let mut chars = 0;
    for word in raw.split_whitespace() {
        let needed = word.chars().count() + usize::from(chars > 0);
        if chars + needed > MAX_SNIPPET_CHARS {
            let room = MAX_SNIPPET_CHARS.saturating_sub(chars + usize::from(chars > 0) + 1);
            if room > 0 {
                if chars > 0 {
                    out.push(' ');
                }
                out.extend(word.chars().take(room));
            }
            out.push_str(ELLIPSIS);
            return out;
        }
        if chars > 0 {
            out.push(' ');
        }
        out.push_str(word);
        chars += needed;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_collapse_whitespace_and_are_bounded() {
        assert_eq!(tidy_snippet("  a\n\n  «b»\tc "), "a «b» c");
        let long = "word ".repeat(200);
        let tidy = tidy_snippet(&long);
        assert_eq!(tidy.chars().count(), MAX_SNIPPET_CHARS);
        assert!(tidy.ends_with(ELLIPSIS));
        let one_huge_word = "x".repeat(1000);
        assert_eq!(
            tidy_snippet(&one_huge_word).chars().count(),
            MAX_SNIPPET_CHARS
        );
    }
}
