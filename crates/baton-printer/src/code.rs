//! The texts of `baton index` and `baton search`.

use baton_index::{CodeHit, EmbedReport, IndexStats, NO_EMBEDDER, UpdateReport};
use serde_json::{Value, json};

/// What `baton index` did and what the index now holds.
pub struct IndexSummary<'a> {
    /// What the index holds.
    pub stats: &'a IndexStats,
    /// What this update read.
    pub update: &'a UpdateReport,
    /// What this update embedded.
    pub embed: &'a EmbedReport,
    /// The embedder's description and the model its vectors are of; `None` without one.
    pub embedder: Option<(&'a str, &'a str)>,
    /// How long it took.
    pub seconds: f64,
}

impl IndexSummary<'_> {
    /// `baton index --json`: one object.
    pub fn json(&self) -> Value {
        let stats = self.stats;
        json!({
            "files": stats.files,
            "chunks": stats.chunks,
            "definitions": stats.definitions,
            "languages": stats.languages,
            "distinct_chunks": stats.distinct_chunks,
            "embedded": stats.embedded,
            "embedded_share": self.embedder.map(|_| stats.embedded_share()),
            "embedder": self.embedder.map(|(description, _)| description),
            "embedding_model": self.embedder.map(|(_, model)| model),
            "update": self.update,
            "embedding": self.embed,
            "seconds": self.seconds,
        })
    }

    /// `baton index`: three lines.
    pub fn text(&self) -> String {
        let (stats, update, embed) = (self.stats, self.update, self.embed);
        let languages: Vec<String> = stats
            .languages
            .iter()
            .map(|(lang, n)| format!("{lang} {n}"))
            .collect();
        let embedded = match self.embedder {
            Some((description, _)) => format!(
                "embedded {:.0}% of {} distinct chunks with {description} ({} new, {} from the \
                 shared cache, {} tokens)",
                stats.embedded_share() * 100.0,
                stats.distinct_chunks,
                embed.embedded,
                embed.from_cache,
                embed.input_tokens
            ),
            None => NO_EMBEDDER.to_string(),
        };
        format!(
            "indexed {} files ({}), {} chunks, {} definitions in {:.1}s\n\
             this update: {} files read, {} unchanged, {} removed\n{embedded}\n",
            stats.files,
            languages.join(", "),
            stats.chunks,
            stats.definitions,
            self.seconds,
            update.files_indexed,
            update.files_seen - update.files_indexed,
            update.files_removed
        )
    }
}

/// One hit of `baton search`: `path:first-last  symbol  (score)`, then its snippet indented.
pub fn hit_text(hit: &CodeHit) -> String {
    let symbol = hit
        .symbol
        .as_deref()
        .map(|s| format!("  {s}"))
        .unwrap_or_default();
    let mut text = format!(
        "{}:{}-{}{symbol}  ({:.3})\n",
        hit.path, hit.start_line, hit.end_line, hit.score
    );
    for line in hit.snippet.lines() {
        text.push_str(&format!("    {line}\n"));
    }
    text
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn stats() -> IndexStats {
        IndexStats {
            files: 3,
            chunks: 10,
            languages: [("python".to_string(), 2), ("rust".to_string(), 1)].into(),
            definitions: 7,
            distinct_chunks: 8,
            embedded: 6,
        }
    }

    #[test]
    fn without_an_embedder_the_summary_says_so_and_has_no_share() {
        let (stats, update, embed) = (stats(), UpdateReport::default(), EmbedReport::default());
        let summary = IndexSummary {
            stats: &stats,
            update: &UpdateReport {
                files_seen: 3,
                files_indexed: 1,
                ..update
            },
            embed: &embed,
            embedder: None,
            seconds: 0.25,
        };
        let text = summary.text();
        assert!(
            text.starts_with(
                "indexed 3 files (python 2, rust 1), 10 chunks, 7 definitions in 0.2s"
            ),
            "{text}"
        );
        assert!(
            text.contains("1 files read, 2 unchanged, 0 removed"),
            "{text}"
        );
        assert!(text.trim_end().ends_with(NO_EMBEDDER), "{text}");
        let json = summary.json();
        assert!(json["embedded_share"].is_null() && json["embedding_model"].is_null());
        let with = IndexSummary {
            embedder: Some(("local MiniLM", "all-minilm-l6-v2")),
            ..summary
        };
        assert_eq!(with.json()["embedded_share"], 0.75);
        assert!(
            with.text()
                .contains("embedded 75% of 8 distinct chunks with local MiniLM")
        );
    }

    #[test]
    fn a_hit_is_its_place_symbol_and_score_then_its_snippet_indented() {
        let hit = CodeHit {
            path: "src/retry.rs".into(),
            start_line: 10,
            end_line: 20,
            symbol: Some("backoff".into()),
            score: 0.5,
            snippet: "fn backoff() {\n}".into(),
        };
        assert_eq!(
            hit_text(&hit),
            "src/retry.rs:10-20  backoff  (0.500)\n    fn backoff() {\n    }\n"
        );
    }
}
