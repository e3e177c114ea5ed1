//! Keyword search of the workspace's text as `search_memory` gives it to the model: the same
//! chunks and FTS5 table as code search, queried by [`crate::query`]'s rule (every chunk of the
//! query as a phrase, then any word) and answered with FTS5's marked snippets, so that memory
//! search needs no index of the workspace of its own.

use crate::error::{IndexError, db};
use crate::index::CodeIndex;
use crate::query::to_fts;

/// Marks a matched word in a [`TextHit::snippet`]: `«word»`.
pub const MATCH_START: &str = "«";
pub const MATCH_END: &str = "»";
/// Marks text cut from either side of a snippet.
pub const ELLIPSIS: &str = "…";
/// Words of context FTS5 puts in a snippet (its maximum is 64).
const SNIPPET_TOKENS: i64 = 24;
/// A snippet is cut to this many characters (a "word" between two matches can be long).
pub const MAX_SNIPPET_CHARS: usize = 300;
/// The `body` column of `chunks_fts` (path, symbol, body, parts): snippets show the text.
const BODY_COLUMN: i64 = 2;

/// Lines `start_line..=end_line` (1-based) of the workspace file `path` (relative,
/// `/`-separated) matching a text search.
#[derive(Clone, Debug, PartialEq)]
pub struct TextHit {
    pub path: String,
    pub start_line: u32,
    pub end_line: u32,
    /// Up to [`MAX_SNIPPET_CHARS`] characters around the best match, matched words marked
    /// `«like this»`, cut text marked `…`, whitespace runs collapsed to one space.
    pub snippet: String,
    /// FTS5's BM25 negated: higher is better; only the order within one search means
    /// something.
    pub score: f64,
}

impl CodeIndex {
    /// The best `limit` chunks of the index as it is for `query` (call [`CodeIndex::update`]
    /// first for a fresh one), best first, ties by path and line.
    ///
    /// Every whitespace-separated chunk of the query must match as a phrase first; if that
    /// finds nothing, any word may ([`crate::query`]). Any text is safe to pass; text with no
    /// word in it is [`IndexError::EmptyQuery`]. `limit == 0` returns nothing.
    pub async fn search_text(&self, query: &str, limit: usize) -> Result<Vec<TextHit>, IndexError> {
        let fts = to_fts(query).ok_or(IndexError::EmptyQuery)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let hits = self.text_matches(&fts.all, limit).await?;
        match fts.any {
            Some(any) if hits.is_empty() => self.text_matches(&any, limit).await,
            _ => Ok(hits),
        }
    }

    async fn text_matches(&self, expr: &str, limit: usize) -> Result<Vec<TextHit>, IndexError> {
        let rows: Vec<(String, u32, u32, String, f64)> = sqlx::query_as(
            // The inner query is FTS5's rank-ordered scan: it yields rows best first and stops
            // at the LIMIT, so snippets are made for the returned rows only.
            "SELECT c.path, c.start_line, c.end_line, d.snip, d.score \
             FROM (SELECT rowid AS id, snippet(chunks_fts, ?3, ?4, ?5, ?6, ?7) AS snip, \
                          rank AS score \
                   FROM chunks_fts WHERE chunks_fts MATCH ?1 ORDER BY rank LIMIT ?2) AS d \
             JOIN chunks c ON c.id = d.id \
             ORDER BY d.score, c.path, c.start_line",
        )
        .bind(expr)
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .bind(BODY_COLUMN)
        .bind(MATCH_START)
        .bind(MATCH_END)
        .bind(ELLIPSIS)
        .bind(SNIPPET_TOKENS)
        .fetch_all(&self.pool)
        .await
        .map_err(db("searching the workspace's text"))?;
        Ok(rows
            .into_iter()
            .map(|(path, start_line, end_line, snippet, bm25)| TextHit {
                path,
                start_line,
                end_line,
                snippet: tidy_snippet(&snippet),
                score: -bm25,
            })
            .collect())
    }
}

/// FTS5's snippet with whitespace runs collapsed and cut to [`MAX_SNIPPET_CHARS`] (baton-memory
/// tidies the journal's snippets the same way, so hits of both read alike).
pub fn tidy_snippet(raw: &str) -> String {
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
