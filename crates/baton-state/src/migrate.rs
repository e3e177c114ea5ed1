//! Making a state directory ready, and moving the old layout's state into it.

use std::fs;
use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};

use crate::private::{is_own, make_private_dir, make_private_if_there};
use crate::{MARKER, StateDir, StateError};

/// What the old layout kept in `<workspace>/.baton/`, in the order it is moved: SQLite's WAL
/// and shared memory before the database, so that a crash in between never leaves a database
/// at the new place without the committed transactions still in its WAL.
const OLD_LAYOUT: &[&str] = &[
    "baton.db-wal",
    "baton.db-shm",
    "baton.db",
    "shadow.git",
    "logs",
    "supervisors",
    "worktrees",
];

/// What [`StateDir::prepare`] moved from the old layout.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Migration {
    /// The old layout's directory, when something was moved from it.
    pub from: Option<PathBuf>,
    /// The entries moved.
    pub moved: Vec<&'static str>,
    /// Entries left in the old place because the new place already had them.
    pub left: Vec<&'static str>,
    /// Entries left in the old place because they are, or hold, something other than plain
    /// files and directories of this user (a symlink could make baton move, or later read,
    /// whatever it points to: a planted `supervisors` symlink chose the pid `baton stop` kills).
    pub refused: Vec<&'static str>,
}

impl Migration {
    pub fn is_empty(&self) -> bool {
        self.moved.is_empty() && self.left.is_empty() && self.refused.is_empty()
    }
}

pub(crate) fn prepare(state: &StateDir) -> Result<Migration, StateError> {
    let root = state.root();
    let io_error = |source| StateError::Io {
        path: root.to_path_buf(),
        source,
    };
    // `BASE/workspaces/` too (not BASE: it may be a directory the user chose for more).
    if let Some(workspaces) = root
        .parent()
        .filter(|p| p.file_name() == Some(std::ffi::OsStr::new(crate::WORKSPACES)))
    {
        make_private_dir(workspaces).map_err(io_error)?;
    }
    make_private_dir(root).map_err(io_error)?;
    if state.is_inside_workspace() {
        return Ok(Migration::default());
    }
    write_marker(root, state.workspace()).map_err(io_error)?;
    // A state directory made by an earlier version (0755, a 0644 journal): private now.
    for file in ["baton.db", "baton.db-wal", "baton.db-shm"] {
        make_private_if_there(&root.join(file)).map_err(io_error)?;
    }
    for dir in [state.logs(), state.supervisors()] {
        make_private_if_there(&dir).map_err(io_error)?;
        if let Ok(entries) = fs::read_dir(&dir) {
            for entry in entries.flatten() {
                make_private_if_there(&entry.path()).map_err(io_error)?;
            }
        }
    }
    let old = state.inputs_dir();
    let mut migration = Migration::default();
    for &entry in OLD_LAYOUT {
        let from = old.join(entry);
        let Ok(meta) = fs::symlink_metadata(&from) else {
            continue;
        };
        // In the old layout a worktree's `.baton/shadow.git` was a file naming its parent's
        // repository: not state of its own.
        if entry == "shadow.git" && !meta.is_dir() {
            continue;
        }
        let to = root.join(entry);
        if fs::symlink_metadata(&to).is_ok() {
            migration.left.push(entry);
            continue;
        }
        if !plain_tree(&from) {
            migration.refused.push(entry);
            continue;
        }
        match move_entry(&from, &to) {
            Ok(()) => migration.moved.push(entry),
            Err(e) if e.kind() == ErrorKind::DirectoryNotEmpty => migration.left.push(entry),
            Err(source) => {
                return Err(StateError::Migrate {
                    workspace: state.workspace().to_path_buf(),
                    from,
                    to,
                    source,
                });
            }
        }
    }
    if !migration.is_empty() {
        migration.from = Some(old);
    }
    Ok(migration)
}

/// Whether `path` is a plain file or a directory of plain files and directories, all owned by
/// this user, without following any symlink.
fn plain_tree(path: &Path) -> bool {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return false;
    };
    if !is_own(&meta) {
        return false;
    }
    if meta.is_file() {
        return true;
    }
    if !meta.is_dir() {
        return false;
    }
    let Ok(entries) = fs::read_dir(path) else {
        return false;
    };
    entries
        .into_iter()
        .all(|entry| entry.is_ok_and(|e| plain_tree(&e.path())))
}

/// The marker names the workspace; rewritten only when missing or different.
fn write_marker(root: &Path, workspace: &Path) -> io::Result<()> {
    let marker = root.join(MARKER);
    let content = format!("{}\n", workspace.display());
    if fs::read(&marker).ok().as_deref() == Some(content.as_bytes()) {
        return Ok(());
    }
    // A name no other process or thread uses at the same time (threads share the pid).
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = root.join(format!(".{MARKER}.{}.{n}", std::process::id()));
    fs::write(&tmp, &content)?;
    let renamed = fs::rename(&tmp, &marker);
    if renamed.is_err() {
        let _ = fs::remove_file(&tmp);
        // Another process wrote the same marker first: as good as ours.
        if fs::read(&marker).ok().as_deref() == Some(content.as_bytes()) {
            return Ok(());
        }
    }
    renamed
}

/// A rename, or a copy and removal across file systems. An entry another process moved first
/// (gone at `from`) counts as moved.
fn move_entry(from: &Path, to: &Path) -> io::Result<()> {
    match fs::rename(from, to) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) if e.kind() == ErrorKind::CrossesDevices => copy_then_remove(from, to),
        Err(e) => Err(e),
    }
}

/// Copies `from` next to `to`, renames the copy into place, then removes `from`: `to` is either
/// absent or complete.
pub(crate) fn copy_then_remove(from: &Path, to: &Path) -> io::Result<()> {
    let name = to
        .file_name()
        .map_or_else(Default::default, |n| n.to_string_lossy().into_owned());
    let tmp = to.with_file_name(format!(
        ".{name}.moving-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    remove(&tmp)?;
    copy_tree(from, &tmp)?;
    fs::rename(&tmp, to)?;
    remove(from)
}

/// Copies a file, a symlink (as a symlink) or a directory tree, keeping permissions.
fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(from)?;
    if meta.file_type().is_symlink() {
        return std::os::unix::fs::symlink(fs::read_link(from)?, to);
    }
    if !meta.is_dir() {
        fs::copy(from, to)?;
        return fs::File::open(to)?.sync_all();
    }
    fs::create_dir(to)?;
    fs::set_permissions(to, meta.permissions())?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        copy_tree(&entry.path(), &to.join(entry.file_name()))?;
    }
    Ok(())
}

/// Removes a file, symlink or directory tree, never following a symlink; absent is fine.
fn remove(path: &Path) -> io::Result<()> {
    let result = match fs::symlink_metadata(path) {
        Err(e) => Err(e),
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
    };
    match result {
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        other => other,
    }
}
