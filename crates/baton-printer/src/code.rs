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
