//! The state directory is private to its user: directories 0700, the journal and logs 0600 (they
//! hold what the agent read and wrote, and the supervisors' pids). Made so when created, and
//! put right when an earlier version left them readable. Nothing here follows a symlink, and
//! nothing owned by another user is changed.

use std::fs;
use std::io::{self, ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

const DIR_MODE: u32 = 0o700;
const FILE_MODE: u32 = 0o600;

/// Whether `meta` belongs to the user this process runs as.
pub(crate) fn is_own(meta: &fs::Metadata) -> bool {
    meta.uid() == rustix::process::geteuid().as_raw()
}

/// Creates `dir` (and missing parents) with mode 0700, or makes an existing directory of this
/// user 0700.
pub fn make_private_dir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)?;
    make_private_if_there(dir)
}

/// Creates the file `path` empty with mode 0600 if it does not exist (so that what is written to
/// it later — SQLite's journal, whose `-wal` and `-shm` files take its mode — is private from
/// the start), or makes an existing file of this user 0600.
pub fn make_private_file(path: &Path) -> io::Result<()> {
    match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
    {
        Ok(mut file) => file.flush(),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => make_private_if_there(path),
        Err(e) => Err(e),
    }
}

/// Makes the directory (0700) or plain file (0600) at `path` private, if it exists and belongs
/// to this user; a symlink, anything else, or someone else's file is left alone.
pub fn make_private_if_there(path: &Path) -> io::Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mode = if meta.is_dir() {
        DIR_MODE
    } else if meta.is_file() {
        FILE_MODE
    } else {
        return Ok(());
    };
    if !is_own(&meta) || meta.permissions().mode() & 0o777 == mode {
        return Ok(());
    }
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}
