//! Creating the shadow repository: built in a temporary directory and renamed into place, so a
//! crash (or a second process doing the same) never leaves a half-made `shadow.git` behind.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::error::{Result, SnapshotError};
use crate::git::Git;

/// Written last, before the rename: a `shadow.git` without it was not made by this code.
pub(crate) const MARKER: &str = "baton-shadow";

/// The repository's whole configuration. Nothing from the machine applies (git runs with
/// `GIT_CONFIG_NOSYSTEM` and `GIT_CONFIG_GLOBAL=/dev/null`); these keys make snapshots
/// byte-exact and keep git from doing anything on its own.
const CONFIG: &str = "\
[core]
\trepositoryformatversion = 0
\tbare = false
\tfilemode = true
\tsymlinks = true
\tignorecase = false
\tautocrlf = false
\tsafecrlf = false
\tlogallrefupdates = false
\thooksPath = /dev/null
\texcludesFile = /dev/null
\tattributesFile = /dev/null
\tfsmonitor = false
\tquotePath = false
[gc]
\tauto = 0
[advice]
\taddEmbeddedRepo = false
\taddIgnoredFile = false
";

/// `info/exclude`: baton's own state is never part of a snapshot (also excluded by pathspec,
/// which a user's `!.baton` rule cannot undo), and neither are the build outputs and caches of
/// the common toolchains when a workspace's `.gitignore` forgets them (one run's `target/` once
/// grew the shadow repository to 983 MB). A workspace's own `!` rule can take one back.
const EXCLUDE: &str = "\
/.baton/
target/
node_modules/
__pycache__/
*.py[co]
.venv/
.tox/
.nox/
.mypy_cache/
.pytest_cache/
.ruff_cache/
.gradle/
.next/
.turbo/
.parcel-cache/
zig-cache/
.zig-cache/
";

/// What earlier versions wrote as `info/exclude`: replaced without a warning (nobody else
/// changed it).
const EARLIER_EXCLUDES: &[&str] = &["/.baton/\n"];

/// `info/attributes` wins over the workspace's `.gitattributes`: no end-of-line conversion,
/// no filters, no keyword expansion — what is restored is exactly what was snapshotted.
const ATTRIBUTES: &str = "* -text !eol -filter -ident !working-tree-encoding\n";

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

/// Files in a git directory that would make git read configuration, hooks or objects baton did
/// not write: another "common" directory (with its own config), per-worktree config, hooks.
const FOREIGN: &[&str] = &["commondir", "config.worktree", "hooks"];

/// Puts back exactly the configuration baton wrote, before every git run on `git_dir`.
///
/// The shadow repository once lived in the workspace, where the agent's commands may write: a
/// `filter.*.clean` driver in `config` with `* filter=…` in `info/attributes` would otherwise run
/// as baton's user, outside the sandbox, on the next `git add`. Nothing written there survives:
/// the three files are replaced when their bytes differ (a symlink is replaced, never written
/// through), and files that point git elsewhere are removed. No command runs while git does, so
/// what git then reads is what this wrote.
pub(crate) fn restore_own_config(git_dir: &Path) -> Result<()> {
    for (name, text) in [
        ("config", CONFIG),
        ("info/exclude", EXCLUDE),
        ("info/attributes", ATTRIBUTES),
    ] {
        let path = git_dir.join(name);
        let is_file = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file());
        let bytes = if is_file {
            std::fs::read(&path).ok()
        } else {
            None
        };
        if bytes.as_deref() == Some(text.as_bytes()) {
            continue;
        }
        let earlier = name == "info/exclude"
            && bytes
                .as_deref()
                .is_some_and(|b| EARLIER_EXCLUDES.iter().any(|e| e.as_bytes() == b));
        if !earlier {
            tracing::warn!(
                "{} was changed by someone other than baton: restoring it",
                path.display()
            );
        }
        replace_file(&path, text)?;
    }
    for name in FOREIGN {
        let path = git_dir.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => {
                std::fs::remove_dir_all(&path).map_err(|e| SnapshotError::io(&path, e))?
            }
            Ok(_) => std::fs::remove_file(&path).map_err(|e| SnapshotError::io(&path, e))?,
            Err(_) => {}
        }
    }
    Ok(())
}

/// Makes `path` a regular file holding `text`: written to a new file beside it and renamed over
/// it (a rename replaces a symlink, it never writes through one); a directory in the way is
/// removed, and a parent that is not a directory is replaced by one.
fn replace_file(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    let Some(dir) = path.parent() else {
        return Err(SnapshotError::io(
            path,
            std::io::ErrorKind::InvalidInput.into(),
        ));
    };
    if std::fs::symlink_metadata(dir).is_ok_and(|m| !m.is_dir()) {
        std::fs::remove_file(dir).map_err(|e| SnapshotError::io(dir, e))?;
    }
    std::fs::create_dir_all(dir).map_err(|e| SnapshotError::io(dir, e))?;
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        std::fs::remove_dir_all(path).map_err(|e| SnapshotError::io(path, e))?;
    }
    let tmp = dir.join(format!(".baton-restore-{}", unique()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(SnapshotError::io(path, e));
    }
    Ok(())
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

pub(crate) fn older_than(path: &Path, age: Duration) -> bool {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_some_and(|elapsed| elapsed > age)
}

/// A name no other process or call uses at the same time.
pub(crate) fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}
