//! Where baton keeps a workspace's state — the journal, the shadow repository, logs, supervisor
//! files and the worktrees of parallel tasks — and moving a store of the old layout there.
//!
//! The state lives **outside** the workspace, so that no sandbox write rule reaches it: the
//! workspace is writable for the agent's commands, and Landlock can only grant rights to a
//! subtree, never take them back for a part of it. State inside the workspace could be
//! rewritten (a forged journal), truncated (a run killed for good) or armed (a git filter in the
//! shadow repository's config that baton itself would then run unconfined).
//!
//! ```text
//! $BATON_STATE_DIR            default $XDG_STATE_HOME/baton, else ~/.local/state/baton
//! └── workspaces/
//!     └── NAME-HASH/          one per workspace: its directory name + 16 hex digits of the
//!         │                   SHA-256 of its canonical path
//!         ├── baton-state     the workspace's path (which workspace this is, for people too)
//!         ├── baton.db        the journal (and -wal, -shm)
//!         ├── shadow.git/     snapshots
//!         ├── logs/           RUN.log (detached runs), RUN.trace.jsonl
//!         ├── supervisors/    RUN.pid
//!         └── worktrees/CHILD the worktree of a `--parallel` task's child run
//! ```
//!
//! `<workspace>/.baton/` keeps only what a person edits: `config.toml`, `policy.toml`, plans.
//! A workspace of the old layout (everything in `.baton/`) is moved over by
//! [`StateDir::prepare`] the first time this version opens it.

mod migrate;
mod private;

use sha2::{Digest, Sha256};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

pub use migrate::Migration;
pub use private::{make_private_dir, make_private_file, make_private_if_there};

/// Overrides the base directory of all workspaces' state.
pub const STATE_DIR_ENV: &str = "BATON_STATE_DIR";

/// The directory in a workspace with the files a person edits (and, in the old layout, all of
/// baton's state).
pub const INPUTS_DIR: &str = ".baton";

/// The file that makes a directory a state directory; it holds the workspace's path.
pub const MARKER: &str = "baton-state";

const WORKTREES: &str = "worktrees";
const WORKSPACES: &str = "workspaces";

/// Why a state directory could not be made ready. Never retryable: the path, its permissions
/// or the disk need a person.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot prepare baton's state directory {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot move baton's state of {workspace} from {from} to {to}: {source} (nothing was \
         lost: what was not moved is still in {from})"
    )]
    Migrate {
        workspace: PathBuf,
        from: PathBuf,
        to: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl StateError {
    pub fn is_retryable(&self) -> bool {
        false
    }
}

/// The state directory of one workspace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateDir {
    root: PathBuf,
    workspace: PathBuf,
}

impl StateDir {
    /// The state directory of `workspace`, under [`base_dir`] (read from the environment). A
    /// parallel task's worktree shares its parent workspace's state directory.
    pub fn for_workspace(workspace: &Path) -> StateDir {
        StateDir::under(base_dir().as_deref(), workspace)
    }

    /// The state directory of `workspace` under `base`; without a base (no `HOME` at all) the
    /// old in-workspace `.baton/`, which [`StateDir::is_inside_workspace`] then reports.
    pub fn under(base: Option<&Path>, workspace: &Path) -> StateDir {
        let workspace = workspace
            .canonicalize()
            .unwrap_or_else(|_| workspace.to_path_buf());
        if let Some(root) = worktree_state_root(&workspace) {
            return StateDir { root, workspace };
        }
        let root = match base {
            Some(base) => base.join(WORKSPACES).join(key(&workspace)),
            None => workspace.join(INPUTS_DIR),
        };
        StateDir { root, workspace }
    }

    /// The directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The workspace this is the state of.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The SQLite journal.
    pub fn journal(&self) -> PathBuf {
        self.root.join("baton.db")
    }

    /// The code index (`baton index`, `search_code`): a cache of the workspace's code, kept
    /// here rather than in the workspace, out of reach of the agent's commands.
    pub fn code_index(&self) -> PathBuf {
        self.root.join("index").join("index.db")
    }

    /// The shadow git repository of snapshots.
    pub fn shadow_git(&self) -> PathBuf {
        self.root.join("shadow.git")
    }

    /// Detached runs' output and the per-run JSON logs.
    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// Supervisors' pidfiles.
    pub fn supervisors(&self) -> PathBuf {
        self.root.join("supervisors")
    }

    /// Where `--parallel` puts the worktree of child run `child_run`.
    pub fn worktree(&self, child_run: &str) -> PathBuf {
        self.root.join(WORKTREES).join(child_run)
    }

    /// Whether the state lies inside the workspace (the old layout, used only when there is no
    /// home directory): commands that may write the workspace could then write it too.
    pub fn is_inside_workspace(&self) -> bool {
        self.root.starts_with(&self.workspace)
    }

    /// The workspace's own `.baton/` (config, policy, plans).
    pub fn inputs_dir(&self) -> PathBuf {
        self.workspace.join(INPUTS_DIR)
    }

    /// Whether `<workspace>/.baton/` still holds state of the old layout (a journal or a
    /// shadow repository) that [`StateDir::prepare`] would move.
    pub fn has_old_layout(&self) -> bool {
        let old = self.inputs_dir();
        !self.is_inside_workspace()
            && (old.join("baton.db").exists() || old.join("shadow.git").is_dir())
    }

    /// Creates the directory (mode 0700; an existing one, its journal, logs and supervisors made
    /// private: 0700 directories, 0600 files) with its marker, and moves the state of the old
    /// layout (`<workspace>/.baton/baton.db`, `shadow.git`, …) into it — only plain files and
    /// directories of this user: a symlink or another user's file is left where it is. Idempotent and cheap when there
    /// is nothing to move; safe when two processes do it at once.
    pub fn prepare(&self) -> Result<Migration, StateError> {
        migrate::prepare(self)
    }
}

/// The base directory of every workspace's state: `$BATON_STATE_DIR`, else
/// `$XDG_STATE_HOME/baton`, else `$HOME/.local/state/baton`; `None` without any of them.
pub fn base_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var(STATE_DIR_ENV) {
        let dir = PathBuf::from(dir);
        return Some(if dir.is_absolute() {
            dir
        } else {
            std::env::current_dir().map_or(dir.clone(), |cwd| cwd.join(&dir))
        });
    }
    // The XDG spec: relative values are invalid and ignored.
    if let Some(dir) = var("XDG_STATE_HOME").map(PathBuf::from)
        && dir.is_absolute()
    {
        return Some(dir.join("baton"));
    }
    var("HOME").map(|home| PathBuf::from(home).join(".local/state/baton"))
}

/// Whether `workspace` is a parallel task's worktree (in either layout).
pub fn is_worktree(workspace: &Path) -> bool {
    worktree_state_root(workspace).is_some()
}

/// A worktree's parent state directory: `ROOT/worktrees/CHILD` where ROOT has the marker or is
/// named like one (`…/workspaces/NAME-HASH`: a run recorded by another machine, or whose state
/// directory is gone), or the old layout's `WORKSPACE/.baton/worktrees/CHILD`.
fn worktree_state_root(workspace: &Path) -> Option<PathBuf> {
    let parent = workspace.parent()?;
    if parent.file_name() != Some(OsStr::new(WORKTREES)) {
        return None;
    }
    let root = parent.parent()?;
    let named_like_one = root.parent().and_then(Path::file_name) == Some(OsStr::new(WORKSPACES));
    (root.join(MARKER).is_file()
        || named_like_one
        || root.file_name() == Some(OsStr::new(INPUTS_DIR)))
    .then(|| root.to_path_buf())
}

/// `NAME-HASH`: readable, and unique per canonical path.
fn key(workspace: &Path) -> String {
    let name: String = workspace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let digest = Sha256::digest(workspace.as_os_str().as_encoded_bytes());
    let hash: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{hash}", name.trim_start_matches('.'))
}

#[cfg(test)]
mod tests;
