//! `search_code`: BM25 over the chunks' words, exact cosine over their vectors, and the two
//! fused by relative score fusion (Weaviate's default fusion): each list's scores min-max
//! normalised to 0..1 — BM25 and cosine are on unrelated scales — then summed as
//! `alpha` × vector + (1 − `alpha`) × keyword, a chunk missing from a list scoring 0 there (see
//! `PROSE_VECTOR_ALPHA`). Every ordering breaks ties by path and line, so one index gives one
//! answer.

use std::collections::{BTreeSet, HashMap};

use baton_embed::{Metered, Purpose};
use serde::Serialize;

use crate::error::{IndexError, db};
use crate::index::CodeIndex;
use crate::parse::cut;
use crate::subwords::subwords;

/// The vector list's share of the fusion when the query is prose: Weaviate's default `alpha`,
/// taken as it is, not fitted to our benchmark. A prose query's words ("request", "send",
/// "error") are in every other chunk of a codebase, so its BM25 says less than its vector. On
/// `cargo bench -p baton-index --bench retrieval` (which prints the alternatives) it ranks the
/// concept queries better than the weighted reciprocal rank fusion used before (recall@5 90.5%
/// vs 85.7%, MRR@10 0.795 vs 0.764).
const PROSE_VECTOR_ALPHA: f64 = 0.75;
/// A query naming identifiers weighs both lists alike: its words are what BM25 is good at.
const IDENTIFIER_VECTOR_ALPHA: f64 = 0.5;
/// Most hits a search returns.
pub const MAX_K: usize = 50;
/// Query words used at most.
const MAX_WORDS: usize = 32;
/// Lines of a hit's snippet.
const SNIPPET_LINES: usize = 3;
const SNIPPET_LINE_CHARS: usize = 160;

/// English words that say nothing about code; dropped from keyword queries (unless the query
/// has nothing else).
const STOPWORDS: &[&str] = &[
    "a",
    "an",
    "and",
    "are",
    "as",
    "at",
    "be",
    "by",
    "can",
    "do",
    "does",
    "for",
    "from",
    "get",
    "gets",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "it",
    "its",
    "of",
    "on",
    "or",
    "that",
    "the",
    "their",
    "then",
    "there",
    "this",
    "to",
    "was",
    "what",
    "when",
    "where",
    "which",
    "who",
    "why",
    "with",
    "code",
    "find",
    "function",
    "method",
    "implemented",
    "handled",
    "done",
];

/// Which retrievers a search uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    #[default]
    Hybrid,
    Keyword,
    Vector,
}

impl SearchMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SearchMode::Hybrid => "hybrid",
            SearchMode::Keyword => "keyword",
            SearchMode::Vector => "vector",
        }
    }
}

impl std::str::FromStr for SearchMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "hybrid" => Ok(SearchMode::Hybrid),
            "keyword" => Ok(SearchMode::Keyword),
            "vector" => Ok(SearchMode::Vector),
            other => Err(format!(
                "unknown search mode '{other}': hybrid, keyword or vector"
            )),
        }
    }
}

/// What to search for.
#[derive(Clone, Debug)]
pub struct SearchRequest<'a> {
    pub query: &'a str,
    pub k: usize,
    pub mode: SearchMode,
    /// Only chunks of files whose workspace-relative path starts with this.
    pub path_prefix: Option<&'a str>,
}

/// One hit: lines `start_line..=end_line` of `path`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CodeHit {
    pub path: String,
    pub start_line: u32,
    pub end_line: u32,
    pub symbol: Option<String>,
    /// Higher is better. Hybrid: the fused score (0..1); keyword: BM25 (negated, so higher is
    /// better);
    /// vector: the cosine similarity.
    pub score: f64,
    pub snippet: String,
}

/// The hits and what the search could not do.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SearchResults {
    pub hits: Vec<CodeHit>,
    /// The mode actually used (hybrid falls back to keyword without an embedder).
    pub mode: SearchMode,
    /// Said once to the reader: no embedder, chunks not embedded yet.
    pub notes: Vec<String>,
}

struct Row {
    id: i64,
    path: String,
    start_line: u32,
    end_line: u32,
    symbol: Option<String>,
    text: String,
}

/// The keyword query: the query's words (English filler dropped) and the parts of its compound
/// identifiers, each quoted (FTS5 syntax in the text is never interpreted), any may match.
pub(crate) fn keyword_query(text: &str) -> Option<(String, Vec<String>)> {
    let words: Vec<&str> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let meaningful: Vec<&str> = words
        .iter()
        .copied()
        .filter(|w| !STOPWORDS.contains(&w.to_lowercase().as_str()))
        .collect();
    let chosen = if meaningful.is_empty() {
        words
    } else {
        meaningful
    };
    let mut terms: BTreeSet<String> = BTreeSet::new();
    let mut ordered = Vec::new();
    let parts = subwords(&chosen.join(" "));
    for word in chosen.iter().copied().chain(parts.split_whitespace()) {
        let lower = word.to_lowercase();
        if terms.len() < MAX_WORDS && terms.insert(lower.clone()) {
            ordered.push(lower);
        }
    }
    if ordered.is_empty() {
        return None;
    }
    let expression = ordered
        .iter()
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" OR ");
    Some((expression, ordered))
}

fn like_prefix(prefix: &str) -> String {
    let escaped = prefix
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    format!("{escaped}%")
}

impl CodeIndex {
    /// Searches the index as it is (call [`CodeIndex::update`] first for a fresh one).
    /// `embedder` is needed for vector and hybrid search; without it hybrid is keyword-only and
    /// says so in [`SearchResults::notes`].
    pub async fn search(
        &self,
        request: &SearchRequest<'_>,
        embedder: Option<&Metered>,
    ) -> Result<SearchResults, IndexError> {
        let k = request.k.clamp(1, MAX_K);
        let depth = (k * 4).max(50);
        let mut notes = Vec::new();
        let mode = match (request.mode, embedder) {
            (SearchMode::Vector, None) => return Err(IndexError::NoEmbedder),
            (SearchMode::Hybrid, None) => {
                notes.push("no embedder is configured: keyword search only".to_owned());
                SearchMode::Keyword
            }
            (mode, _) => mode,
        };
        let (keyword, words) = match keyword_query(request.query) {
            Some((expression, words)) => (Some(expression), words),
            None if mode == SearchMode::Keyword => return Err(IndexError::EmptyQuery),
            None => (None, Vec::new()),
        };
        if request.query.trim().is_empty() {
            return Err(IndexError::EmptyQuery);
        }
        let keyword_hits = match (&keyword, mode) {
            (Some(expression), SearchMode::Keyword | SearchMode::Hybrid) => {
                self.keyword(expression, request.path_prefix, depth).await?
            }
            _ => Vec::new(),
        };
        let vector_hits = match (mode, embedder) {
            (SearchMode::Vector | SearchMode::Hybrid, Some(embedder)) => {
                let model = embedder.model_id();
                let missing = self.missing_count(&model).await?;
                if missing > 0 {
                    notes.push(format!(
                        "{missing} chunks have no vector yet (run `baton index`): they are found by keywords only"
                    ));
                }
                let query = embedder
                    .embed_all(&[request.query.to_owned()], Purpose::Query)
                    .await?;
                let query = query.into_iter().next().unwrap_or_default();
                self.nearest(&model, &query, request.path_prefix, depth)
                    .await?
            }
            _ => Vec::new(),
        };
        let scored: Vec<(i64, f64)> = match mode {
            SearchMode::Keyword => keyword_hits,
            SearchMode::Vector => vector_hits
                .into_iter()
                .map(|(id, s)| (id, f64::from(s)))
                .collect(),
            SearchMode::Hybrid => {
                let vector: Vec<(i64, f64)> = vector_hits
                    .into_iter()
                    .map(|(id, s)| (id, f64::from(s)))
                    .collect();
                let alpha = if names_identifiers(request.query) {
                    IDENTIFIER_VECTOR_ALPHA
                } else {
                    PROSE_VECTOR_ALPHA
                };
                fuse(&keyword_hits, &vector, alpha)
            }
        };
        let hits = self.hits(&scored, k, &words).await?;
        Ok(SearchResults { hits, mode, notes })
    }

    /// (chunk id, BM25 negated) of the best `limit` keyword matches.
    async fn keyword(
        &self,
        expression: &str,
        path_prefix: Option<&str>,
        limit: usize,
    ) -> Result<Vec<(i64, f64)>, IndexError> {
        let rows: Vec<(i64, f64)> = sqlx::query_as(
            "SELECT f.rowid, f.rank FROM chunks_fts f \
             JOIN chunks c ON c.id = f.rowid \
             WHERE chunks_fts MATCH ?1 AND (?2 IS NULL OR c.path LIKE ?2 ESCAPE '\\') \
             ORDER BY f.rank, c.path, c.start_line LIMIT ?3",
        )
        .bind(expression)
        .bind(path_prefix.map(like_prefix))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(db("searching keywords"))?;
        Ok(rows.into_iter().map(|(id, rank)| (id, -rank)).collect())
    }

    /// The first `k` of `scored` as hits, best first, ties by path and line.
    async fn hits(
        &self,
        scored: &[(i64, f64)],
        k: usize,
        words: &[String],
    ) -> Result<Vec<CodeHit>, IndexError> {
        let mut rows: HashMap<i64, Row> = HashMap::new();
        for (id, _) in scored {
            let row: Option<(String, u32, u32, Option<String>, String)> = sqlx::query_as(
                "SELECT path, start_line, end_line, symbol, text FROM chunks WHERE id = ?",
            )
            .bind(id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db("reading a hit"))?;
            if let Some((path, start_line, end_line, symbol, text)) = row {
                rows.insert(
                    *id,
                    Row {
                        id: *id,
                        path,
                        start_line,
                        end_line,
                        symbol,
                        text,
                    },
                );
            }
        }
        let mut ranked: Vec<(&Row, f64)> = scored
            .iter()
            .filter_map(|(id, score)| rows.get(id).map(|r| (r, *score)))
            .collect();
        ranked.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then_with(|| a.0.path.cmp(&b.0.path))
                .then_with(|| a.0.start_line.cmp(&b.0.start_line))
                .then_with(|| a.0.id.cmp(&b.0.id))
        });
        Ok(ranked
            .into_iter()
            .take(k)
            .map(|(row, score)| CodeHit {
                path: row.path.clone(),
                start_line: row.start_line,
                end_line: row.end_line,
                symbol: row.symbol.clone(),
                score,
                snippet: snippet(&row.text, words),
            })
            .collect())
    }
}

/// Whether a query names code (`resolve_redirects`, `HttpClient`, `fs::read`, `cfg.timeout`)
/// rather than describing it in prose: then its keywords are as telling as its meaning.
pub(crate) fn names_identifiers(query: &str) -> bool {
    query.split_whitespace().any(|word| {
        let word = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '_');
        word.contains('_')
            || word.contains("::")
            || (word.contains('.') && !word.ends_with('.'))
            || word.chars().skip(1).any(char::is_uppercase) && word.chars().any(char::is_lowercase)
    })
}

/// Relative score fusion of a keyword and a vector list of (id, score), higher better: each
/// list's scores min-max normalised (a list whose scores are all equal gives each 1), then
/// `alpha` × vector + (1 − `alpha`) × keyword; best first, ties by id.
pub(crate) fn fuse(keyword: &[(i64, f64)], vector: &[(i64, f64)], alpha: f64) -> Vec<(i64, f64)> {
    let mut fused: HashMap<i64, f64> = HashMap::new();
    for (list, weight) in [(keyword, 1.0 - alpha), (vector, alpha)] {
        let max = list.iter().map(|h| h.1).fold(f64::NEG_INFINITY, f64::max);
        let min = list.iter().map(|h| h.1).fold(f64::INFINITY, f64::min);
        for (id, score) in list {
            let normalised = if max > min {
                (score - min) / (max - min)
            } else {
                1.0
            };
            *fused.entry(*id).or_insert(0.0) += weight * normalised;
        }
    }
    let mut out: Vec<(i64, f64)> = fused.into_iter().collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// The chunk's first line and its lines with the most query words, in file order.
fn snippet(text: &str, words: &[String]) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut scored: Vec<(usize, usize)> = lines
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, line)| {
            let lower = line.to_lowercase();
            (
                words.iter().filter(|w| lower.contains(w.as_str())).count(),
                i,
            )
        })
        .filter(|(n, _)| *n > 0)
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut chosen: Vec<usize> = std::iter::once(0)
        .chain(scored.into_iter().map(|(_, i)| i))
        .take(SNIPPET_LINES)
        .collect();
    chosen.sort_unstable();
    chosen
        .into_iter()
        .filter_map(|i| lines.get(i))
        .map(|l| cut(l.trim(), SNIPPET_LINE_CHARS))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyword_query_drops_filler_and_quotes() {
        let (expr, words) =
            keyword_query("where is the HTTP redirect handled?").unwrap_or_default();
        assert_eq!(words, ["http", "redirect"]);
        assert_eq!(expr, "\"http\" OR \"redirect\"");
        let (_, words) = keyword_query("resolve_redirects").unwrap_or_default();
        assert_eq!(words, ["resolve_redirects", "resolve", "redirects"]);
        let (expr, _) = keyword_query("a\" OR NEAR(x").unwrap_or_default();
        assert_eq!(expr, "\"near\" OR \"x\"", "FTS5 syntax is quoted as words");
        assert!(keyword_query("  ?! ").is_none());
        let (_, words) = keyword_query("how is it").unwrap_or_default();
        assert_eq!(words, ["how", "is", "it"], "all filler: keep it");
    }

    #[test]
    fn fusion_rewards_agreement_and_scores_on_each_lists_scale() {
        let keyword = [(1, 9.0), (2, 8.0), (3, 1.0)];
        let vector = [(3, 0.9), (4, 0.8), (1, 0.7)];
        let fused = fuse(&keyword, &vector, 0.5);
        let order: Vec<i64> = fused.iter().map(|f| f.0).collect();
        // 1: 0.5×1 + 0.5×0 = 0.5; 3: 0 + 0.5×1 = 0.5 (tie, by id); 2: 0.5×0.875; 4: 0.5×0.5.
        assert_eq!(order, [1, 3, 2, 4]);
        assert!((fused[2].1 - 0.4375).abs() < 1e-9, "{fused:?}");
        // All scores equal: each counts whole.
        assert_eq!(fuse(&[(7, 2.0)], &[], 0.5), [(7, 0.5)]);
    }

    #[test]
    fn prose_and_identifier_queries_are_told_apart() {
        for q in [
            "resolve_redirects",
            "HTTPAdapter send",
            "fs::read",
            "cfg.timeout",
            "getUser",
        ] {
            assert!(names_identifiers(q), "{q}");
        }
        for q in [
            "follow redirects to the new location",
            "Parse the JSON body.",
            "HTTP errors",
        ] {
            assert!(!names_identifiers(q), "{q}");
        }
    }

    #[test]
    fn alpha_shifts_the_fusion() {
        let keyword = [(1, 9.0), (2, 8.0)];
        let vector = [(2, 0.9), (1, 0.8)];
        let even = fuse(&keyword, &vector, 0.5);
        assert_eq!(even[0].0, 1, "a tie broken by id");
        let prose = fuse(&keyword, &vector, PROSE_VECTOR_ALPHA);
        assert_eq!(
            prose[0].0, 2,
            "the vector's first wins when keywords weigh less"
        );
    }

    #[test]
    fn snippet_keeps_first_and_matching_lines() {
        let text = "fn resolve(x) {\n  let a = 1;\n  follow_redirect(a);\n  done();\n}";
        assert_eq!(
            snippet(text, &["redirect".into()]),
            "fn resolve(x) {\nfollow_redirect(a);"
        );
    }
}
