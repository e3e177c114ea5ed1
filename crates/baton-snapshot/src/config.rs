//! The shadow repository's own files — its whole configuration — and putting them back before
//! every git run, so that nothing another process wrote there is what git reads.

use std::path::Path;

use crate::error::{Result, SnapshotError};
use crate::temp::unique;

/// The repository's whole configuration. Nothing from the machine applies (git runs with
/// `GIT_CONFIG_NOSYSTEM` and `GIT_CONFIG_GLOBAL=/dev/null`); these keys make snapshots
/// byte-exact and keep git from doing anything on its own.
pub(crate) const CONFIG: &str = "\
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
pub(crate) const EXCLUDE: &str = "\
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
pub(crate) const ATTRIBUTES: &str = "* -text !eol -filter -ident !working-tree-encoding\n";

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
