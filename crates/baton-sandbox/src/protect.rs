//! baton's own files, out of the reach of the commands it runs: which paths those are for a
//! workspace, and whether a backend can keep them so.
//!
//! The journal, the shadow repository and the rest of a workspace's state live in its state
//! directory outside the workspace (`baton_state`), where neither backend grants writes. The
//! bubblewrap backend also mounts them (and the workspace's `.baton/` inputs) read-only over
//! any writable bind that holds them. Landlock can only add rights to a subtree, never take
//! them back for a part of it: a state directory inside a writable path cannot be protected
//! there, so such a command is refused. The workspace's `.baton/` is bound read-only in the
//! command's own mount namespace where the Landlock backend can make one; without one it stays
//! writable, and baton relies on `baton trust`'s digests (a project file a command wrote or
//! changed is refused).
//!
//! bubblewrap can mount only over a path that exists: a workspace without `.baton/` would let a
//! command create one (and plant a config in it), so [`make_mount_points`] creates the empty
//! directory before such a command starts.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use baton_state::StateDir;

use crate::SandboxError;

/// What no command may change: the workspace's state directory and its `.baton/` inputs.
/// The state directory comes first.
pub(crate) fn protected_paths(workspace: &Path) -> Vec<PathBuf> {
    let state = StateDir::for_workspace(workspace);
    let root = state
        .root()
        .canonicalize()
        .unwrap_or_else(|_| state.root().to_path_buf());
    let mut paths = vec![root];
    let inputs = state.inputs_dir();
    if !paths.contains(&inputs) {
        paths.push(inputs);
    }
    paths
}

/// Creates the workspace's `.baton/` when it does not exist yet, empty, so that bubblewrap (or
/// the Landlock backend's mount namespace) has something to mount read-only there. An empty
/// directory is all this adds to the user's workspace (and git does not show empty
/// directories). Only a missing path is created: a file or a symlink in its place is left as it
/// is (`baton trust` judges what it leads to). A directory baton cannot create (a read-only
/// workspace) the command, with fewer rights, cannot either, so a failure is ignored.
pub(crate) fn make_mount_points(workspace: &Path) {
    let inputs = StateDir::for_workspace(workspace).inputs_dir();
    if std::fs::symlink_metadata(&inputs).is_err() {
        let _ = std::fs::create_dir(&inputs);
    }
}

/// Under Landlock: refuses to run a command that could write the state directory.
pub(crate) fn check_landlock_reach(state: &Path, writable: &[PathBuf]) -> Result<(), SandboxError> {
    match writable.iter().find(|w| state.starts_with(w)) {
        None => Ok(()),
        Some(w) => Err(SandboxError::StateReachable {
            state: state.to_path_buf(),
            writable: w.clone(),
        }),
    }
}

/// A parallel task's worktree lies in baton's state directory, which may itself be inside a git
/// repository (a home directory kept in git). git run in the worktree must not find that
/// repository above it — and show or change that one instead.
pub(crate) fn git_boundary(workspace: &Path) -> Option<(OsString, OsString)> {
    if !baton_state::is_worktree(workspace) {
        return None;
    }
    let above = workspace.parent()?;
    Some((
        "GIT_CEILING_DIRECTORIES".into(),
        above.as_os_str().to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_directory_under_a_writable_path_is_refused_and_one_beside_it_is_not() {
        let state = Path::new("/home/u/.local/state/baton/workspaces/p-1");
        let writable = |paths: &[&str]| paths.iter().map(PathBuf::from).collect::<Vec<_>>();
        assert!(check_landlock_reach(state, &writable(&["/tmp", "/home/u/proj"])).is_ok());
        // A worktree in the state directory is writable; the state directory is not.
        assert!(
            check_landlock_reach(
                state,
                &writable(&[&format!("{}/worktrees/c", state.display())])
            )
            .is_ok()
        );
        let err = check_landlock_reach(state, &writable(&["/tmp", "/home/u"])).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("/home/u") && text.contains("BATON_STATE_DIR"),
            "{text}"
        );
    }
}
