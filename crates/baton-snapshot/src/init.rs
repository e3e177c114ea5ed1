//! Creating the shadow repository: built in a temporary directory and renamed into place, so a
//! crash (or a second process doing the same) never leaves a half-made `shadow.git` behind.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::{ATTRIBUTES, CONFIG, EXCLUDE};
use crate::error::{Result, SnapshotError};
use crate::git::Git;
use crate::temp::{older_than, unique};

/// Written last, before the rename: a `shadow.git` without it was not made by this code.
pub(crate) const MARKER: &str = "baton-shadow";

/// Temporary directories older than this are debris of a crashed `open`.
const STALE: Duration = Duration::from_secs(600);

/// Makes sure `git_dir` is a complete shadow repository (idempotent).
pub(crate) fn ensure(state_dir: &Path, git_dir: &Path) -> Result<()> {
    if git_dir.join(MARKER).is_file() {
        return Ok(());
    }
    std::fs::create_dir_all(state_dir).map_err(|e| SnapshotError::io(state_dir, e))?;
    keep_out_of_users_git(state_dir);
    clean_debris(state_dir);
    // The marker is checked again: another thread or process may have renamed its finished
    // repository into place since the check above, and moving that aside would pull it from
    // under whoever is using it.
    if git_dir.exists() && !git_dir.join(MARKER).is_file() {
        // Not made by us (or by a version of us that crashed before the rename, which cannot
        // happen): keep it, out of the way, rather than deleting anything.
        let aside = state_dir.join(format!("shadow.git.broken-{}", unique()));
        std::fs::rename(git_dir, &aside).map_err(|e| SnapshotError::io(git_dir, e))?;
    }
    let tmp = state_dir.join(format!("shadow.git.init-{}", unique()));
    let built = build(state_dir, &tmp);
    if let Err(e) = built {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    if let Err(e) = std::fs::rename(&tmp, git_dir) {
        let _ = std::fs::remove_dir_all(&tmp);
        // Another process got there first: its repository is as good as ours.
        if git_dir.join(MARKER).is_file() {
            return Ok(());
        }
        return Err(SnapshotError::io(git_dir, e));
    }
    Ok(())
}

fn build(state_dir: &Path, tmp: &Path) -> Result<()> {
    let git = Git {
        git_dir: tmp.to_path_buf(),
        work_tree: state_dir.to_path_buf(),
    };
    // An empty template: no sample hooks, nothing else copied from the machine.
    let dir = tmp.to_string_lossy();
    git.call(&[
        "-c",
        "init.defaultBranch=baton",
        "init",
        "--quiet",
        "--bare",
        "--template=",
        &dir,
    ])
    .without_repository()
    .run()?;
    let write = |path: PathBuf, text: &str| -> Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| SnapshotError::io(dir, e))?;
        }
        std::fs::write(&path, text).map_err(|e| SnapshotError::io(path, e))
    };
    write(tmp.join("config"), CONFIG)?;
    write(tmp.join("info/exclude"), EXCLUDE)?;
    write(tmp.join("info/attributes"), ATTRIBUTES)?;
    std::fs::create_dir_all(tmp.join(crate::INDEX_DIR))
        .map_err(|e| SnapshotError::io(tmp.join(crate::INDEX_DIR), e))?;
    write(tmp.join(MARKER), "1\n")
}

/// `.baton/` is baton's, not the user's: a `.gitignore` inside it keeps it out of their
/// repository without touching their own ignore files (the CLI writes the same file).
fn keep_out_of_users_git(state_dir: &Path) {
    let ignore = state_dir.join(".gitignore");
    if !ignore.exists() {
        let _ = std::fs::write(&ignore, "# baton's run state; not for version control\n*\n");
    }
}

/// Removes temporary repositories a crashed `open` left behind.
fn clean_debris(state_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(state_dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with("shadow.git.init-")
            && older_than(&entry.path(), STALE)
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
