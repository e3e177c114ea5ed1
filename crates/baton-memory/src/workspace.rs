//! Indexing workspace files.

use std::collections::HashMap;
use std::path::Path;

use sqlx::{Sqlite, Transaction};

use crate::error::db;
use crate::subwords::subwords;
use crate::walk::{Content, Stat, batches, read, removed, scan};
use crate::{MemoryError, MemoryIndex, SCOPE_FILE};

/// Bounds on what [`MemoryIndex::index_workspace`] reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspaceLimits {
    /// Files larger than this are skipped (generated code, data, logs).
    pub max_file_bytes: u64,
    /// At most this many files are indexed, the first in the walk's order (sorted by name,
    /// directory by directory); the rest are reported as over the cap.
    pub max_files: usize,
    /// Lines per indexed chunk: a file hit names a range of at most this many lines.
    pub chunk_lines: usize,
}

impl Default for WorkspaceLimits {
    fn default() -> Self {
        WorkspaceLimits {
            max_file_bytes: 1024 * 1024,
            max_files: 20_000,
            chunk_lines: 40,
        }
    }
}

/// Files are read and written to the index in batches of about this many bytes, bounding memory.
const BATCH_BYTES: u64 = 8 * 1024 * 1024;
/// What one [`MemoryIndex::index_workspace`] call did. Every walked file is counted in exactly
/// one of `files_indexed`, `files_unchanged`, `files_binary` and `files_unreadable`; their sum
/// is `files_seen`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkspaceIndexReport {
    /// Files the walk accepted: not ignored, not hidden, not over the size cap, within the
    /// file cap.
    pub files_seen: usize,
    /// Text files read and indexed by this call (new or changed).
    pub files_indexed: usize,
    /// Text files unchanged since the last call (same size and mtime), not read again.
    pub files_unchanged: usize,
    /// Files skipped as binary (a NUL byte in the first 8 KiB).
    pub files_binary: usize,
    /// Files that could not be read this time (their old chunks are dropped).
    pub files_unreadable: usize,
    /// Files dropped from the index: deleted, now ignored, too large, or beyond the cap.
    pub files_removed: usize,
    /// Files skipped for being larger than [`WorkspaceLimits::max_file_bytes`].
    pub files_too_large: usize,
    /// The walk stopped at [`WorkspaceLimits::max_files`]: files after it are not indexed.
    pub file_cap_hit: bool,
    /// Directory entries the walk could not read (permissions, broken ignore files).
    pub walk_errors: usize,
    /// Chunks written by this call.
    pub chunks_indexed: usize,
}

impl MemoryIndex {
    /// Brings the index of the workspace at `root` up to date and reports what changed.
    ///
    /// Walks `root` honouring `.gitignore` (also outside a git repository), `.ignore` and git's
    /// exclude files, skipping hidden files and directories (so `.git/`, `.baton/`, `.env`),
    /// symlinks, files over [`WorkspaceLimits::max_file_bytes`] and any file past
    /// [`WorkspaceLimits::max_files`]. Only files whose size or modification time changed since
    /// the last call are read again; files no longer walked are dropped. Binary files (a NUL in
    /// the first 8 KiB) are skipped; invalid UTF-8 is replaced, never an error. Each text file
    /// is indexed in chunks of [`WorkspaceLimits::chunk_lines`] lines, under its path.
    ///
    /// One index holds one workspace: calling this with another root replaces the files of the
    /// previous one. A change that keeps both size and mtime (possible within the file
    /// system's timestamp granularity) is not noticed until the next change.
    pub async fn index_workspace(&self, root: &Path) -> Result<WorkspaceIndexReport, MemoryError> {
        let _writer = self.write_lock.lock().await;
        let meta = std::fs::metadata(root).map_err(|source| MemoryError::Io {
            path: root.to_owned(),
            source,
        })?;
        if !meta.is_dir() {
            return Err(MemoryError::Io {
                path: root.to_owned(),
                source: std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
            });
        }

        let walk_root = root.to_owned();
        let limits = self.limits.clone();
        let scan = tokio::task::spawn_blocking(move || scan(&walk_root, &limits))
            .await
            .map_err(|e| MemoryError::Task(e.to_string()))?;
        let mut report = WorkspaceIndexReport {
            files_seen: scan.files.len(),
            files_too_large: scan.too_large,
            file_cap_hit: scan.cap_hit,
            walk_errors: scan.errors,
            ..WorkspaceIndexReport::default()
        };

        let known: Vec<(String, i64, i64, bool)> =
            sqlx::query_as("SELECT path, size, mtime_ns, binary FROM files")
                .fetch_all(&self.pool)
                .await
                .map_err(db("reading the indexed files"))?;
        let known: HashMap<String, (i64, i64, bool)> = known
            .into_iter()
            .map(|(path, size, mtime, binary)| (path, (size, mtime, binary)))
            .collect();

        let removed = removed(known.keys(), &scan.files);
        if !removed.is_empty() {
            let mut tx = self.pool.begin().await.map_err(db("dropping files"))?;
            for path in &removed {
                drop_file(&mut tx, path).await?;
            }
            tx.commit().await.map_err(db("dropping files"))?;
        }
        report.files_removed = removed.len();

        let mut changed = Vec::new();
        for file in scan.files {
            match known.get(&file.rel) {
                Some(&(size, mtime, binary)) if file.unchanged(size, mtime) => {
                    if binary {
                        report.files_binary += 1;
                    } else {
                        report.files_unchanged += 1;
                    }
                }
                _ => changed.push(file),
            }
        }

        // Read and index in batches of about BATCH_BYTES, one transaction each.
        for batch in batches(changed, BATCH_BYTES) {
            let max_bytes = self.limits.max_file_bytes;
            let read = tokio::task::spawn_blocking(move || {
                batch
                    .into_iter()
                    .map(|file| {
                        let content = read(&file.abs, max_bytes);
                        (file, content)
                    })
                    .collect::<Vec<_>>()
            })
            .await
            .map_err(|e| MemoryError::Task(e.to_string()))?;

            let mut tx = self.pool.begin().await.map_err(db("indexing files"))?;
            for (file, content) in read {
                drop_file(&mut tx, &file.rel).await?;
                match content {
                    Content::Text(text) => {
                        report.files_indexed += 1;
                        for (first, last, body) in chunks(&text, self.limits.chunk_lines) {
                            insert_chunk(&mut tx, &file.rel, first, last, body).await?;
                            report.chunks_indexed += 1;
                        }
                        remember(&mut tx, &file, false).await?;
                    }
                    Content::Binary => {
                        report.files_binary += 1;
                        remember(&mut tx, &file, true).await?;
                    }
                    // Not remembered: tried again next time.
                    Content::Unreadable => report.files_unreadable += 1,
                }
            }
            tx.commit().await.map_err(db("indexing files"))?;
        }
        Ok(report)
    }
}

/// `(first_line, last_line, text)` of each chunk of `lines` lines (1-based, inclusive);
/// chunks of only whitespace are left out.
fn chunks(text: &str, lines: usize) -> Vec<(u32, u32, String)> {
    let lines = lines.max(1);
    let all: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, window) in all.chunks(lines).enumerate() {
        let body = window.join("\n");
        if body.trim().is_empty() {
            continue;
        }
        let first = i * lines + 1;
        let last = first + window.len() - 1;
        out.push((
            u32::try_from(first).unwrap_or(u32::MAX),
            u32::try_from(last).unwrap_or(u32::MAX),
            body,
        ));
    }
    out
}

async fn drop_file(tx: &mut Transaction<'static, Sqlite>, path: &str) -> Result<(), MemoryError> {
    sqlx::query("DELETE FROM docs WHERE rowid IN (SELECT id FROM doc_meta WHERE path = ?)")
        .bind(path)
        .execute(&mut **tx)
        .await
        .map_err(db("dropping a file's chunks"))?;
    sqlx::query("DELETE FROM doc_meta WHERE path = ?")
        .bind(path)
        .execute(&mut **tx)
        .await
        .map_err(db("dropping a file's chunks"))?;
    sqlx::query("DELETE FROM files WHERE path = ?")
        .bind(path)
        .execute(&mut **tx)
        .await
        .map_err(db("dropping a file"))?;
    Ok(())
}

async fn insert_chunk(
    tx: &mut Transaction<'static, Sqlite>,
    path: &str,
    first: u32,
    last: u32,
    body: String,
) -> Result<(), MemoryError> {
    let id = sqlx::query(
        // File rowids count up from 1 (see the schema).
        "INSERT INTO doc_meta (id, scope, path, first_line, last_line) \
         VALUES (max(coalesce((SELECT max(id) FROM doc_meta), 0), 0) + 1, ?, ?, ?, ?)",
    )
    .bind(SCOPE_FILE)
    .bind(path)
    .bind(i64::from(first))
    .bind(i64::from(last))
    .execute(&mut **tx)
    .await
    .map_err(db("indexing a file chunk"))?
    .last_insert_rowid();
    sqlx::query("INSERT INTO docs (rowid, title, body, parts) VALUES (?, ?, ?, ?)")
        .bind(id)
        .bind(path)
        .bind(&body)
        .bind(subwords(&format!("{path}\n{body}")))
        .execute(&mut **tx)
        .await
        .map_err(db("indexing a file chunk"))?;
    Ok(())
}

async fn remember(
    tx: &mut Transaction<'static, Sqlite>,
    file: &Stat,
    binary: bool,
) -> Result<(), MemoryError> {
    sqlx::query("INSERT INTO files (path, size, mtime_ns, binary) VALUES (?, ?, ?, ?)")
        .bind(&file.rel)
        .bind(i64::try_from(file.size).unwrap_or(i64::MAX))
        .bind(file.mtime_ns)
        .bind(binary)
        .execute(&mut **tx)
        .await
        .map_err(db("recording an indexed file"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_name_their_lines() {
        let text: String = (1..=7).map(|i| format!("line {i}\n")).collect();
        let got: Vec<(u32, u32)> = chunks(&text, 3).iter().map(|c| (c.0, c.1)).collect();
        assert_eq!(got, [(1, 3), (4, 6), (7, 7)]);
        assert_eq!(chunks(&text, 3)[1].2, "line 4\nline 5\nline 6");
        assert!(chunks("", 40).is_empty());
        assert_eq!(
            chunks("a\n\n\n\n\nb", 2)
                .iter()
                .map(|c| c.0)
                .collect::<Vec<_>>(),
            [1, 5]
        );
    }
}
