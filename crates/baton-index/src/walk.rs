//! Walking a workspace's files the way every index of baton sees them, and reading one.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// Bounds on what a walk of the workspace takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkspaceLimits {
    /// Files larger than this are skipped (generated code, data, logs).
    pub max_file_bytes: u64,
    /// At most this many files are taken, the first in the walk's order (sorted by name,
    /// directory by directory); the rest are reported as over the cap.
    pub max_files: usize,
}

impl Default for WorkspaceLimits {
    fn default() -> Self {
        WorkspaceLimits {
            max_file_bytes: 1024 * 1024,
            max_files: 20_000,
        }
    }
}

/// A file is binary if this many leading bytes contain a NUL.
const BINARY_SNIFF_BYTES: usize = 8 * 1024;
/// Directories never indexed, wherever they appear (also skipped as hidden, but not only).
const SKIPPED_DIRS: &[&str] = &[".git", ".baton"];

/// A walked file.
#[derive(Clone, Debug)]
pub struct Stat {
    /// Relative to the workspace, `/`-separated.
    pub rel: String,
    pub abs: PathBuf,
    pub size: u64,
    pub mtime_ns: i64,
}

impl Stat {
    /// Whether the file still has the size and modification time an index recorded.
    pub fn unchanged(&self, size: i64, mtime_ns: i64) -> bool {
        i64::try_from(self.size).ok() == Some(size) && mtime_ns == self.mtime_ns
    }
}

/// The indexed paths (`known`) the walk no longer found.
pub fn removed<'a>(known: impl Iterator<Item = &'a String>, walked: &[Stat]) -> Vec<&'a String> {
    let walked: std::collections::HashSet<&str> = walked.iter().map(|f| f.rel.as_str()).collect();
    known
        .filter(|path| !walked.contains(path.as_str()))
        .collect()
}

/// `files` in batches of about `bytes` each (at least one file per batch), in order: an index
/// reads and writes one batch per transaction, bounding memory.
pub fn batches(files: Vec<Stat>, bytes: u64) -> Vec<Vec<Stat>> {
    let mut out: Vec<Vec<Stat>> = Vec::new();
    let mut size = 0;
    for file in files {
        match out.last_mut() {
            Some(batch) if size < bytes => {
                size += file.size;
                batch.push(file);
            }
            _ => {
                size = file.size;
                out.push(vec![file]);
            }
        }
    }
    out
}

/// The files of a workspace, in walk order (sorted by name, directory by directory).
#[derive(Debug, Default)]
pub struct Scan {
    pub files: Vec<Stat>,
    /// Files skipped for being larger than the limit.
    pub too_large: usize,
    /// The walk stopped at the file cap.
    pub cap_hit: bool,
    /// Directory entries that could not be read.
    pub errors: usize,
}

/// A file's content as the indexes take it.
pub enum Content {
    /// Invalid UTF-8 replaced.
    Text(String),
    /// A NUL byte in the first 8 KiB.
    Binary,
    Unreadable,
}

/// Walks `root` honouring `.gitignore` (also outside a git repository), `.ignore` and git's
/// exclude files, skipping hidden files and directories (so `.git/`, `.baton/`, `.env`),
/// symlinks, files over the size limit and any file past the file cap.
pub fn scan(root: &Path, limits: &WorkspaceLimits) -> Scan {
    let mut out = Scan {
        files: Vec::new(),
        too_large: 0,
        cap_hit: false,
        errors: 0,
    };
    let walker = ignore::WalkBuilder::new(root)
        // A workspace need not be a git repository for its .gitignore to mean something.
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|entry| {
            !(entry.file_type().is_some_and(|t| t.is_dir())
                && SKIPPED_DIRS.iter().any(|d| entry.file_name() == *d))
        })
        .build();
    for entry in walker {
        let entry = match entry {
            Ok(entry) => entry,
            Err(_) => {
                out.errors += 1;
                continue;
            }
        };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let meta = match entry.metadata() {
            Ok(meta) => meta,
            Err(_) => {
                out.errors += 1;
                continue;
            }
        };
        if meta.len() > limits.max_file_bytes {
            out.too_large += 1;
            continue;
        }
        if out.files.len() >= limits.max_files {
            out.cap_hit = true;
            break;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else {
            continue;
        };
        let rel = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        out.files.push(Stat {
            rel,
            abs: entry.into_path(),
            size: meta.len(),
            mtime_ns,
        });
    }
    out
}

/// Reads at most `max_bytes` of `path`.
pub fn read(path: &Path, max_bytes: u64) -> Content {
    let mut bytes = Vec::new();
    // The file may have grown since it was walked: read no more than the cap.
    let result =
        std::fs::File::open(path).and_then(|file| file.take(max_bytes).read_to_end(&mut bytes));
    if result.is_err() {
        return Content::Unreadable;
    }
    let sniff = &bytes[..bytes.len().min(BINARY_SNIFF_BYTES)];
    if sniff.contains(&0) {
        return Content::Binary;
    }
    Content::Text(String::from_utf8_lossy(&bytes).into_owned())
}
