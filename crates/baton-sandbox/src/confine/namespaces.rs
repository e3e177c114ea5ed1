//! Namespaces of its own for a command on the Landlock backend, where bubblewrap does not make
//! them: a private IPC namespace (the host's SysV shared memory, semaphores and message queues
//! are out of reach) and a private mount namespace in which every mount is read-only but the
//! writable paths.
//!
//! Landlock governs writing a file's data, not its metadata: without this a command may
//! `chmod`/`chown`/`setxattr`/`utime` any file its uid owns anywhere — for root every file in
//! `/etc` (the red-team made a file there mode 666, and another user then wrote it). On a
//! read-only mount all of those fail with `EROFS`, whoever owns the file. Root makes the
//! namespaces directly; another user makes them inside a user namespace of its own that maps
//! only its own uid and gid (so `id` and file owners read as before, other users' files as
//! `nobody`), as bubblewrap does for it.

use super::ConfineError;
use super::sys;
use std::path::{Path, PathBuf};

/// Enters the namespaces; with `readonly_fs` (every mode but full access) makes the filesystem
/// read-only outside `writable`, and read-only again at each `protected` path inside it (baton's
/// own files: Landlock cannot take a subtree back, a read-only bind can). Must run
/// single-threaded (a user namespace requires it) and before privileges are dropped. Nothing
/// here is undone on failure: the caller fails closed.
pub fn enter(
    writable: &[PathBuf],
    protected: &[PathBuf],
    readonly_fs: bool,
) -> Result<(), ConfineError> {
    let err = |what: &str, e: std::io::Error| ConfineError::Namespaces(format!("{what}: {e}"));
    let root = rustix::process::geteuid().is_root();
    let (uid, gid) = (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
    if !root {
        flags |= libc::CLONE_NEWUSER;
    }
    sys::unshare(flags).map_err(|e| err("unshare", e))?;
    if !root {
        // The process's own ids only: nothing else is mapped, so no other user can be become.
        std::fs::write("/proc/self/setgroups", "deny").map_err(|e| err("setgroups", e))?;
        std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))
            .map_err(|e| err("uid_map", e))?;
        std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))
            .map_err(|e| err("gid_map", e))?;
    }
    if !readonly_fs {
        return Ok(());
    }
    // Everything read-only and private (so the binds below never reach the host's mounts),
    // then each writable path bound over itself and made writable again, with what is mounted
    // beneath it.
    sys::mount_tree_setattr(Path::new("/"), true).map_err(|e| err("making / read-only", e))?;
    for path in writable {
        if std::fs::symlink_metadata(path).is_err() {
            continue;
        }
        rustix::mount::mount_bind_recursive(path, path)
            .map_err(|e| err(&format!("binding {}", path.display()), e.into()))?;
        sys::mount_tree_setattr(path, false)
            .map_err(|e| err(&format!("making {} writable", path.display()), e))?;
    }
    for path in protected {
        let inside = writable.iter().any(|w| path.starts_with(w));
        if !inside || std::fs::symlink_metadata(path).is_err() {
            continue;
        }
        rustix::mount::mount_bind_recursive(path, path)
            .map_err(|e| err(&format!("binding {}", path.display()), e.into()))?;
        sys::mount_tree_setattr(path, true)
            .map_err(|e| err(&format!("making {} read-only", path.display()), e))?;
    }
    // The working directory still points into the mount beneath (it was entered before the
    // binds): enter it again by its path, which now leads through them.
    let cwd = std::env::current_dir().map_err(|e| err("reading the working directory", e))?;
    std::env::set_current_dir(&cwd).map_err(|e| err("re-entering the working directory", e))?;
    // Checked, not assumed.
    let root_flags = rustix::fs::statvfs("/")
        .map_err(|e| err("checking /", e.into()))?
        .f_flag;
    if !root_flags.contains(rustix::fs::StatVfsMountFlags::RDONLY) {
        return Err(ConfineError::Namespaces(
            "/ is still writable after remounting it read-only".into(),
        ));
    }
    Ok(())
}
