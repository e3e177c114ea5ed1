//! Bringing the index up to date with the workspace: files, chunks, definitions, references.
//!
//! Incremental: a file whose size and modification time are unchanged is not read; one whose
//! content hash is unchanged is not parsed again. Each batch of changed files is written in one
//! transaction that replaces everything stored for them, so a killed indexer leaves every file
//! either as it was or as it is now, never half of each; the next update finishes the rest.

use std::collections::HashMap;

use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::{Sqlite, Transaction};

use crate::chunk::{Chunk, chunks};
use crate::error::{IndexError, db};
use crate::index::CodeIndex;
use crate::lang::Lang;
use crate::parse::{Parsed, parse};
use crate::subwords::subwords;
use crate::walk::{Content, Stat, batches, read, removed, scan};

/// Changed files are read, parsed and written in batches of about this many bytes.
const BATCH_BYTES: u64 = 4 * 1024 * 1024;
/// Language value of binary files in `files.lang`.
const BINARY: &str = "binary";

/// What one update did. Every walked file is counted in exactly one of `files_indexed`,
/// `files_touched`, `files_unchanged`, `files_binary` and `files_unreadable`; their sum is
/// `files_seen`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UpdateReport {
    /// Files the walk accepted: not ignored, not hidden, not over the size cap, within the
    /// file cap.
    pub files_seen: usize,
    /// Files read and (re)indexed: new, or with new content.
    pub files_indexed: usize,
    /// Files whose size or time changed but whose content did not.
    pub files_touched: usize,
    /// Text files with the size and time the index recorded: not read again.
    pub files_unchanged: usize,
    /// Files dropped from the index: deleted, now ignored, too large, or beyond the cap.
    pub files_removed: usize,
    /// Binary files (a NUL byte in the first 8 KiB), read or remembered as such.
    pub files_binary: usize,
    pub files_unreadable: usize,
    pub files_too_large: usize,
    pub file_cap_hit: bool,
    pub chunks_written: usize,
}

/// One file read and cut, ready to write.
struct Indexed {
    stat: Stat,
    hash: String,
    lang: Option<&'static str>,
    parsed: Parsed,
    chunks: Vec<Chunk>,
}

enum Outcome {
    Indexed(Box<Indexed>),
    /// Same content as stored: only its size and time are updated.
    Touched(Stat),
    Binary(Stat, String),
    Unreadable(Stat),
}

/// The hash of what is embedded for a chunk: its symbol and text.
pub(crate) fn chunk_hash(symbol: Option<&str>, text: &str) -> String {
    let mut h = Sha256::new();
    h.update(symbol.unwrap_or("").as_bytes());
    h.update([0]);
    h.update(text.as_bytes());
    hex(&h.finalize()[..16])
}

pub(crate) fn content_hash(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes)[..16])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl CodeIndex {
    /// Brings files, chunks, definitions and references up to date with the workspace.
    /// Embedding is separate ([`CodeIndex::embed_missing`]), so this never waits on a model.
    pub async fn update(&self) -> Result<UpdateReport, IndexError> {
        let _writer = self.write_lock.lock().await;
        let root = self.root.clone();
        let limits = self.limits.clone();
        let walked = tokio::task::spawn_blocking(move || scan(&root, &limits))
            .await
            .map_err(|e| IndexError::Task(e.to_string()))?;
        let mut report = UpdateReport {
            files_seen: walked.files.len(),
            files_too_large: walked.too_large,
            file_cap_hit: walked.cap_hit,
            ..UpdateReport::default()
        };
        let known: Vec<(String, i64, i64, String, Option<String>)> =
            sqlx::query_as("SELECT path, size, mtime_ns, hash, lang FROM files")
                .fetch_all(&self.pool)
                .await
                .map_err(db("reading the indexed files"))?;
        let known: HashMap<String, (i64, i64, String, bool)> = known
            .into_iter()
            .map(|(p, s, m, h, lang)| (p, (s, m, h, lang.as_deref() == Some(BINARY))))
            .collect();
        let removed = removed(known.keys(), &walked.files);
        let mut changed: Vec<Stat> = Vec::new();
        for file in walked.files {
            match known.get(&file.rel) {
                Some((size, mtime, _, binary)) if file.unchanged(*size, *mtime) => {
                    if *binary {
                        report.files_binary += 1;
                    } else {
                        report.files_unchanged += 1;
                    }
                }
                _ => changed.push(file),
            }
        }
        let wrote = !removed.is_empty() || !changed.is_empty();
        if !removed.is_empty() {
            let mut tx = self.pool.begin().await.map_err(db("dropping files"))?;
            for path in &removed {
                drop_file(&mut tx, path).await?;
            }
            tx.commit().await.map_err(db("dropping files"))?;
            report.files_removed = removed.len();
        }
        let known_hashes: HashMap<String, String> =
            known.into_iter().map(|(p, (_, _, h, _))| (p, h)).collect();
        for batch in batches(changed, BATCH_BYTES) {
            let hashes: Vec<Option<String>> = batch
                .iter()
                .map(|f| known_hashes.get(&f.rel).cloned())
                .collect();
            let max_bytes = self.limits.max_file_bytes;
            let outcomes = tokio::task::spawn_blocking(move || {
                batch
                    .into_iter()
                    .zip(hashes)
                    .map(|(stat, old)| examine(stat, old.as_deref(), max_bytes))
                    .collect::<Vec<_>>()
            })
            .await
            .map_err(|e| IndexError::Task(e.to_string()))?;
            self.write_batch(outcomes, &mut report).await?;
        }
        if wrote {
            self.bump_generation().await?;
        }
        Ok(report)
    }

    async fn write_batch(
        &self,
        outcomes: Vec<Outcome>,
        report: &mut UpdateReport,
    ) -> Result<(), IndexError> {
        let mut tx = self.pool.begin().await.map_err(db("indexing files"))?;
        for outcome in outcomes {
            match outcome {
                Outcome::Indexed(file) => {
                    drop_file(&mut tx, &file.stat.rel).await?;
                    report.chunks_written += file.chunks.len();
                    report.files_indexed += 1;
                    write_file(&mut tx, &file).await?;
                }
                Outcome::Touched(stat) => {
                    report.files_touched += 1;
                    sqlx::query("UPDATE files SET size = ?, mtime_ns = ? WHERE path = ?")
                        .bind(i64::try_from(stat.size).unwrap_or(i64::MAX))
                        .bind(stat.mtime_ns)
                        .bind(&stat.rel)
                        .execute(&mut *tx)
                        .await
                        .map_err(db("updating a file"))?;
                }
                Outcome::Binary(stat, hash) => {
                    report.files_binary += 1;
                    drop_file(&mut tx, &stat.rel).await?;
                    upsert_file(&mut tx, &stat, &hash, Some(BINARY), false).await?;
                }
                Outcome::Unreadable(stat) => {
                    report.files_unreadable += 1;
                    drop_file(&mut tx, &stat.rel).await?;
                }
            }
        }
        tx.commit().await.map_err(db("indexing files"))
    }

    async fn bump_generation(&self) -> Result<(), IndexError> {
        sqlx::query(
            "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) \
             WHERE key = 'generation'",
        )
        .execute(&self.pool)
        .await
        .map_err(db("recording the update"))?;
        Ok(())
    }

    /// Bumped by every change of chunks or vectors: in-memory caches of the index compare it.
    pub(crate) async fn generation(&self) -> Result<i64, IndexError> {
        let value: Option<String> =
            sqlx::query_scalar("SELECT value FROM meta WHERE key = 'generation'")
                .fetch_optional(&self.pool)
                .await
                .map_err(db("reading the index generation"))?;
        Ok(value.and_then(|v| v.parse().ok()).unwrap_or(0))
    }
}

/// Reads, hashes and (if its content changed) parses and chunks one file.
fn examine(stat: Stat, old_hash: Option<&str>, max_bytes: u64) -> Outcome {
    let text = match read(&stat.abs, max_bytes) {
        Content::Text(text) => text,
        Content::Binary => {
            let hash = std::fs::read(&stat.abs)
                .map(|b| content_hash(&b))
                .unwrap_or_default();
            return Outcome::Binary(stat, hash);
        }
        Content::Unreadable => return Outcome::Unreadable(stat),
    };
    let hash = content_hash(text.as_bytes());
    if old_hash == Some(hash.as_str()) {
        return Outcome::Touched(stat);
    }
    let lang = Lang::of_path(&stat.rel);
    let parsed = lang.and_then(|l| parse(l, &text)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let chunks = chunks(&lines, &parsed.defs);
    Outcome::Indexed(Box::new(Indexed {
        stat,
        hash,
        lang: lang.map(Lang::name),
        parsed,
        chunks,
    }))
}

async fn upsert_file(
    tx: &mut Transaction<'static, Sqlite>,
    stat: &Stat,
    hash: &str,
    lang: Option<&str>,
    parse_errors: bool,
) -> Result<(), IndexError> {
    sqlx::query(
        "INSERT OR REPLACE INTO files (path, size, mtime_ns, hash, lang, parse_errors) \
         VALUES (?, ?, ?, ?, ?, ?)",
    )
    .bind(&stat.rel)
    .bind(i64::try_from(stat.size).unwrap_or(i64::MAX))
    .bind(stat.mtime_ns)
    .bind(hash)
    .bind(lang)
    .bind(parse_errors)
    .execute(&mut **tx)
    .await
    .map_err(db("recording a file"))?;
    Ok(())
}

async fn write_file(
    tx: &mut Transaction<'static, Sqlite>,
    file: &Indexed,
) -> Result<(), IndexError> {
    let path = file.stat.rel.as_str();
    for chunk in &file.chunks {
        let hash = chunk_hash(chunk.symbol.as_deref(), &chunk.text);
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO chunks (path, start_line, end_line, symbol, hash, text) \
             VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
        )
        .bind(path)
        .bind(chunk.start_line)
        .bind(chunk.end_line)
        .bind(chunk.symbol.as_deref())
        .bind(&hash)
        .bind(&chunk.text)
        .fetch_one(&mut **tx)
        .await
        .map_err(db("writing a chunk"))?;
        let symbol = chunk.symbol.as_deref().unwrap_or("");
        let parts = subwords(&format!("{path} {symbol} {}", chunk.text));
        sqlx::query(
            "INSERT INTO chunks_fts (rowid, path, symbol, body, parts) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(id)
        .bind(path)
        .bind(symbol)
        .bind(&chunk.text)
        .bind(parts)
        .execute(&mut **tx)
        .await
        .map_err(db("writing a chunk's words"))?;
    }
    let depths = depths(&file.parsed);
    for (i, def) in file.parsed.defs.iter().enumerate() {
        sqlx::query(
            "INSERT INTO defs (path, idx, name, kind, line, depth, signature) \
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(path)
        .bind(i64::try_from(i).unwrap_or(i64::MAX))
        .bind(&def.name)
        .bind(def.kind.as_str())
        .bind(def.start_line)
        .bind(depths[i])
        .bind(&def.signature)
        .execute(&mut **tx)
        .await
        .map_err(db("writing a definition"))?;
    }
    for (name, count) in &file.parsed.refs {
        sqlx::query("INSERT INTO refs (path, name, count) VALUES (?, ?, ?)")
            .bind(path)
            .bind(name)
            .bind(count)
            .execute(&mut **tx)
            .await
            .map_err(db("writing a reference"))?;
    }
    upsert_file(
        tx,
        &file.stat,
        &file.hash,
        file.lang,
        file.parsed.has_errors,
    )
    .await
}

fn depths(parsed: &Parsed) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::with_capacity(parsed.defs.len());
    for def in &parsed.defs {
        let depth = def.parent.and_then(|p| out.get(p)).map_or(0, |d| d + 1);
        out.push(depth);
    }
    out
}

/// Deletes everything stored for `path` (its vectors stay: they are keyed by content and may
/// serve the same chunk elsewhere, or this one when it comes back).
async fn drop_file(tx: &mut Transaction<'static, Sqlite>, path: &str) -> Result<(), IndexError> {
    for statement in [
        "DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE path = ?)",
        "DELETE FROM chunks WHERE path = ?",
        "DELETE FROM defs WHERE path = ?",
        "DELETE FROM refs WHERE path = ?",
        "DELETE FROM files WHERE path = ?",
    ] {
        sqlx::query(statement)
            .bind(path)
            .execute(&mut **tx)
            .await
            .map_err(db("dropping a file"))?;
    }
    Ok(())
}
