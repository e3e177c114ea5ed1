//! The workspace's index for memory searches of files: baton-index's code index, in a
//! temporary directory beside the workspace it indexes.

#![allow(dead_code)]

use std::path::Path;

use baton_index::{CodeIndex, WorkspaceLimits};

/// The code index of the workspace at `root`, its database in `db_dir`, with `limits`.
pub async fn open(root: &Path, db_dir: &Path, limits: WorkspaceLimits) -> CodeIndex {
    CodeIndex::open_at(root, &db_dir.join("index.db"))
        .await
        .unwrap()
        .with_limits(limits)
}

/// The index of an empty workspace (kept with its directory).
pub async fn empty() -> (tempfile::TempDir, CodeIndex) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    let index = open(
        &dir.path().join("ws"),
        &dir.path().join("db"),
        WorkspaceLimits::default(),
    )
    .await;
    (dir, index)
}
