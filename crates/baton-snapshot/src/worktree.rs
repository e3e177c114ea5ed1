//! Worktrees and merges for tasks worked on at the same time (`--parallel`).
//!
//! A worktree is a plain directory holding a snapshot's files, at `worktrees/CHILD` in the parent
//! workspace's state directory, so [`ShadowRepo::open`] on the worktree finds the parent's
//! repository by where it is (nothing in the worktree, where commands write, points at it) and
//! shares its object store: the worktree's run
//! starts its chain at the snapshot it was made from, and merging it back needs no copying.
//! Merges are three-way merges of trees (`git merge-tree --write-tree`): nothing is checked
//! out for them and the workspace is changed only by the [`ShadowRepo::restore`] that follows.

use std::path::{Path, PathBuf};

use crate::error::{Result, SnapshotError};
use crate::git::Git;
use crate::{ShadowRepo, SnapshotId, init, run_ref};

/// The oldest git whose `merge-tree` takes `--write-tree` and `--merge-base`.
const MERGE_MIN_GIT: (u32, u32) = (2, 40);

/// The result of [`ShadowRepo::merge`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MergeOutcome {
    /// The merge commit, now the tip of the run's chain (the workspace is not touched).
    Merged(SnapshotId),
    /// Both sides changed the same lines (or one deleted what the other changed): the paths in
    /// conflict. Nothing was changed.
    Conflict(Vec<String>),
}

impl ShadowRepo {
    /// A worktree's parent state directory must still hold the repository it shares.
    pub(crate) fn check_worktree_parent(worktree: &Path, git_dir: &Path) -> Result<()> {
        if git_dir.join(init::MARKER).is_file() {
            return Ok(());
        }
        Err(SnapshotError::Unexpected {
            command: "open".into(),
            detail: format!(
                "{} is a parallel task's worktree, but {} is not a shadow repository (was \
                 baton's state directory removed?)",
                worktree.display(),
                git_dir.display()
            ),
        })
    }

    /// Where the worktree of child run `child_run` goes: in the state directory beside this
    /// repository.
    pub fn worktree_dir(&self, child_run: &str) -> PathBuf {
        let state = self.git.git_dir.parent().unwrap_or(&self.git.git_dir);
        state.join("worktrees").join(child_run)
    }

    /// Makes `dir` a worktree holding snapshot `base`, for run `run` whose chain starts there
    /// (reset to `base` if it exists: call this only before the run has started). Idempotent:
    /// a creation cut short is completed by calling it again.
    pub fn create_worktree(&self, dir: &Path, run: &str, base: &SnapshotId) -> Result<ShadowRepo> {
        let run_ref = run_ref(run)?;
        let worktree = self.link_worktree(dir)?;
        worktree.clear_stale_ref_lock(&run_ref);
        worktree
            .git
            .call(&["update-ref", run_ref.as_str(), base.as_str()])
            .run()?;
        worktree.restore(run, base)?;
        Ok(worktree)
    }

    /// The worktree of run `run`, which has started: its files are left as they are. If the
    /// directory is gone, it is made again from the run's latest snapshot.
    pub fn attach_worktree(&self, dir: &Path, run: &str) -> Result<ShadowRepo> {
        let missing = !dir.exists();
        let worktree = self.link_worktree(dir)?;
        if missing && let Some(latest) = worktree.latest(run)? {
            worktree.restore(run, &latest)?;
        }
        Ok(worktree)
    }

    /// Creates `dir`, which must be [`ShadowRepo::worktree_dir`] of a child (that is how
    /// opening it finds this repository again).
    fn link_worktree(&self, dir: &Path) -> Result<ShadowRepo> {
        let parent = dir.parent().map(Path::to_path_buf);
        let expected = dir
            .file_name()
            .map(|name| self.worktree_dir(&name.to_string_lossy()));
        if parent.is_none() || expected.as_deref() != Some(dir) {
            return Err(SnapshotError::Unexpected {
                command: "worktree".into(),
                detail: format!(
                    "{} is not in {}: a worktree goes where `worktree_dir` says",
                    dir.display(),
                    self.worktree_dir("").display()
                ),
            });
        }
        std::fs::create_dir_all(dir).map_err(|e| SnapshotError::io(dir, e))?;
        let dir = dir.canonicalize().map_err(|e| SnapshotError::io(dir, e))?;
        Ok(ShadowRepo {
            git: Git {
                git_dir: self.git.git_dir.clone(),
                work_tree: dir,
            },
        })
    }

    /// Three-way merges snapshot `theirs` into `ours` (both descendants of `base`) and, if no
    /// file conflicts, commits the result (parents `ours` and `theirs`, dated `at`) as the tip
    /// of run `run`'s chain. The workspace is not touched: restore the returned snapshot.
    pub fn merge(
        &self,
        run: &str,
        base: &SnapshotId,
        ours: &SnapshotId,
        theirs: &SnapshotId,
        message: &str,
        at: jiff::Timestamp,
    ) -> Result<MergeOutcome> {
        let run_ref = run_ref(run)?;
        let merge_base = format!("--merge-base={base}");
        // Exit 0: clean, 1: conflicts; the first line is the tree either way, then (with
        // --name-only) the conflicted paths, a blank line and messages.
        let output = self
            .git
            .call(&[
                "merge-tree",
                "--write-tree",
                "--name-only",
                "--no-messages",
                "-z",
                merge_base.as_str(),
                ours.as_str(),
                theirs.as_str(),
            ])
            .ok_codes(&[0, 1])
            .run()?;
        let mut fields = output.stdout.split(|b| *b == 0);
        let tree = fields
            .next()
            .map(|t| String::from_utf8_lossy(t).trim().to_string())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| SnapshotError::Unexpected {
                command: "merge-tree".into(),
                detail: "no tree in its output".into(),
            })?;
        if output.status.code() == Some(1) {
            let mut paths: Vec<String> = fields
                .take_while(|f| !f.is_empty())
                .map(|f| String::from_utf8_lossy(f).into_owned())
                .collect();
            paths.dedup();
            return Ok(MergeOutcome::Conflict(paths));
        }
        let id = self.commit_tree(&tree, &[ours.as_str(), theirs.as_str()], message, at)?;
        self.clear_stale_ref_lock(&run_ref);
        // No old-value check: a merge computed before a crash and never journaled is simply
        // replaced (the caller holds the run's lease).
        self.git
            .call(&["update-ref", run_ref.as_str(), id.as_str()])
            .run()?;
        Ok(MergeOutcome::Merged(id))
    }

    /// Whether this machine's git can [`ShadowRepo::merge`]: `merge-tree --write-tree` with
    /// `--merge-base` needs git 2.40. `Err` names the version found.
    pub fn check_merge_support(&self) -> Result<(), String> {
        let text = self
            .git
            .call(&["version"])
            .without_repository()
            .text()
            .map_err(|e| e.to_string())?;
        let version = text.trim().trim_start_matches("git version ").to_string();
        let mut numbers = version
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse::<u32>().ok());
        let (major, minor) = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
        if (major, minor) >= MERGE_MIN_GIT {
            Ok(())
        } else {
            Err(format!(
                "merging parallel tasks needs git {}.{} or newer; this is git {version}",
                MERGE_MIN_GIT.0, MERGE_MIN_GIT.1
            ))
        }
    }

    /// The unified diff from snapshot `from` to snapshot `to` (any runs).
    pub fn diff_snapshots(&self, from: &SnapshotId, to: &SnapshotId) -> Result<String> {
        let output = self
            .git
            .call(&[
                "diff",
                "--no-color",
                "--no-ext-diff",
                "--no-textconv",
                from.as_str(),
                to.as_str(),
                "--",
            ])
            .run()?;
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}
