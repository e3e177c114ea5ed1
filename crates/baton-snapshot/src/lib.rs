//! Workspace snapshots in a shadow git repository.
//!
//! A run's workspace is snapshotted into `shadow.git` in the workspace's state directory (outside
//! the workspace, where no sandboxed command can write; see `baton_state`), a git directory of its
//! own: the user's `.git` (HEAD, index, refs, objects) is never read or written, and git itself
//! never tracks `.git` paths. Each run has its own chain of commits under
//! `refs/baton/runs/RUN_ID` and its own index file (so concurrent runs never share an index
//! lock); the object store is shared, so unchanged files cost nothing.
//!
//! What a snapshot holds: every file git would add with `git add -A` — the user's `.gitignore`
//! rules apply, so ignored files (build outputs, `node_modules/`) are neither snapshotted nor
//! touched by a restore; `.baton/` is always excluded, and so are the common toolchains' build
//! outputs and caches (`target/`, `node_modules/`, `__pycache__/`, `.venv/` …) unless a
//! workspace rule takes one back. Files over [`MAX_FILE_BYTES`] are left out with a warning, and
//! a repository past [`MAX_REPOSITORY_BYTES`] takes no more snapshots. Regular files with their
//! executable bit and symlinks (also dangling ones, by target) are kept; directories are not
//! (as in git): an empty directory is neither recorded nor recreated. A nested git repository
//! (or submodule) is skipped — git never enters it, since its own configuration could make git
//! run a program (`stage.rs`): its files are not snapshotted and a restore leaves them alone. The
//! workspace's `.gitattributes` is overridden (no end-of-line conversion, no filters), so what
//! is restored is byte for byte what was snapshotted.
//!
//! For tasks worked on at once, [`ShadowRepo::create_worktree`] makes a directory in the state
//! directory's `worktrees/` holding a snapshot and sharing this repository, and [`ShadowRepo::merge`] merges a
//! worktree's snapshot back (see `worktree.rs`).
//!
//! All git commands run with an environment of their own (nothing inherited but `PATH`: no API
//! key reaches git or anything it could start), no system or global configuration, settings
//! pinned on the command line that start no program, a fixed identity and the dates the caller
//! gives, so a snapshot's commit depends only on the workspace and the caller. The caller must be the only process working on a run (it holds the run's lease).

mod commit;
mod config;
mod error;
mod git;
mod init;
mod parse;
mod stage;
mod temp;
mod worktree;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use error::{Result, SnapshotError};
use git::Git;
pub use git::{GitInvocation, GitLauncher, launch_git_with};
use parse::Status;
pub use stage::{MAX_FILE_BYTES, MAX_REPOSITORY_BYTES};
pub use worktree::MergeOutcome;

/// Per-run index files live here, inside the shadow git directory.
const INDEX_DIR: &str = "baton-index";
const ZERO_ID: &str = "0000000000000000000000000000000000000000";
/// A ref lock this old belongs to a process that died while updating the ref (git holds it for
/// microseconds).
const STALE_REF_LOCK: Duration = Duration::from_secs(2);
/// Temporary index files this old were left by a process that died.
const STALE_TEMP_INDEX: Duration = Duration::from_secs(3600);

/// A snapshot: the full id of a commit in the shadow repository.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SnapshotId(String);

impl SnapshotId {
    /// A full 40-character id (as journaled). Prefixes go through [`ShadowRepo::resolve`].
    pub fn parse(id: &str) -> Result<SnapshotId> {
        if id.len() == 40 && parse::valid_prefix(id) {
            Ok(SnapshotId(id.to_ascii_lowercase()))
        } else {
            Err(SnapshotError::InvalidSnapshotId(id.to_string()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 12 characters, for display.
    pub fn short(&self) -> &str {
        &self.0[..12]
    }
}

impl fmt::Display for SnapshotId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether a snapshot made a new commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The workspace differed from the run's previous snapshot (or there was none).
    Created,
    /// Nothing changed since the run's previous snapshot: its id is returned and no commit is
    /// made, so a run's chain has no empty steps.
    Unchanged,
}

/// The result of [`ShadowRepo::snapshot`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub id: SnapshotId,
    pub change: Change,
    /// Files git could not read (`error:` lines of `git add`): left out of this snapshot, or
    /// kept as last seen.
    pub warnings: Vec<String>,
}

/// One commit of a run's chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotInfo {
    pub id: SnapshotId,
    pub parent: Option<SnapshotId>,
    pub time: jiff::Timestamp,
    /// The subject (first paragraph, on one line) of the message given to
    /// [`ShadowRepo::snapshot`].
    pub message: String,
}

/// What a restore changed, by path relative to the workspace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// Files whose content, executable bit or type (file, symlink) was put back.
    pub rewritten: Vec<PathBuf>,
    /// Files deleted since the snapshot, recreated.
    pub recreated: Vec<PathBuf>,
    /// Files created since the snapshot, removed (with directories left empty by that).
    pub removed: Vec<PathBuf>,
}

impl RestoreReport {
    /// True if the workspace already was the snapshot.
    pub fn is_empty(&self) -> bool {
        self.rewritten.is_empty() && self.recreated.is_empty() && self.removed.is_empty()
    }
}

/// How [`ShadowRepo::diff`] renders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiffFormat {
    /// A unified diff (binary files as "Binary files … differ").
    Patch,
    /// `git diff --stat`: a line per file and a summary.
    Stat,
}

/// The shadow repository of one workspace.
#[derive(Clone, Debug)]
pub struct ShadowRepo {
    git: Git,
}

impl ShadowRepo {
    /// Opens the workspace's shadow repository, creating it (and the state directory, moving a
    /// repository of the old in-workspace layout there) on first use. Idempotent, safe when
    /// several processes open it at once and after a crash during creation. A parallel task's
    /// worktree shares its parent workspace's repository.
    pub fn open(workspace: &Path) -> Result<ShadowRepo> {
        let workspace = workspace
            .canonicalize()
            .map_err(|e| SnapshotError::io(workspace, e))?;
        if !workspace.is_dir() {
            return Err(SnapshotError::NotADirectory { path: workspace });
        }
        let state = baton_state::StateDir::for_workspace(&workspace);
        let git_dir = state.shadow_git();
        if baton_state::is_worktree(&workspace) {
            ShadowRepo::check_worktree_parent(&workspace, &git_dir)?;
        } else {
            state.prepare()?;
            init::ensure(state.root(), &git_dir)?;
        }
        let repo = ShadowRepo {
            git: Git {
                git_dir,
                work_tree: workspace,
            },
        };
        repo.clean_temp_indexes();
        Ok(repo)
    }

    /// The shadow git directory.
    pub fn git_dir(&self) -> &Path {
        &self.git.git_dir
    }

    pub fn workspace(&self) -> &Path {
        &self.git.work_tree
    }

    /// Commits the workspace as the run's next snapshot, dated `at`, with the run's previous
    /// snapshot as parent; returns the previous id unchanged if nothing changed.
    pub fn snapshot(&self, run: &str, message: &str, at: jiff::Timestamp) -> Result<Snapshot> {
        let run_ref = run_ref(run)?;
        stage::check_size(&self.git)?;
        let index = TempIndex::copy_of(self.index_path(run))?;
        let warnings = self.stage(&index.path)?;
        let tree = self.git.call(&["write-tree"]).index(&index.path).text()?;
        let previous = self.tip(&run_ref)?;
        if let Some((id, previous_tree)) = &previous
            && *previous_tree == tree
        {
            index.persist()?;
            return Ok(Snapshot {
                id: id.clone(),
                change: Change::Unchanged,
                warnings,
            });
        }
        let parents: Vec<&str> = previous.iter().map(|(parent, _)| parent.as_str()).collect();
        let id = self.commit_tree(&tree, &parents, message, at)?;
        self.clear_stale_ref_lock(&run_ref);
        let old = previous
            .as_ref()
            .map_or(ZERO_ID, |(parent, _)| parent.as_str());
        self.git
            .call(&["update-ref", run_ref.as_str(), id.as_str(), old])
            .run()?;
        index.persist()?;
        Ok(Snapshot {
            id,
            change: Change::Created,
            warnings,
        })
    }

    /// Makes the workspace exactly the snapshot's tree: changed files rewritten, deleted ones
    /// recreated, files created since removed (and directories that leaves empty), executable
    /// bits and symlinks put back. Ignored files, nested repositories and `.baton/` are left
    /// alone. Idempotent: a restore interrupted by a crash is completed by running it again.
    pub fn restore(&self, run: &str, id: &SnapshotId) -> Result<RestoreReport> {
        self.check_in_run(run, id)?;
        let index = TempIndex::copy_of(self.index_path(run))?;
        self.stage(&index.path)?;
        // The tree → index direction: "A" is in the workspace only, "D" in the snapshot only.
        let changes = self
            .git
            .call(&[
                "diff-index",
                "--cached",
                "--no-renames",
                "--name-status",
                "-z",
                id.as_str(),
                "--",
            ])
            .index(&index.path)
            .run()?;
        let changes =
            parse::name_status_z(&changes.stdout).map_err(|detail| SnapshotError::Unexpected {
                command: "diff-index".into(),
                detail,
            })?;
        self.git
            .call(&["read-tree", "--reset", "-u", id.as_str()])
            .index(&index.path)
            .run()?;
        index.persist()?;
        let mut report = RestoreReport::default();
        for (status, path) in changes {
            match status {
                Status::Added => report.removed.push(path),
                Status::Deleted => report.recreated.push(path),
                Status::Modified => report.rewritten.push(path),
            }
        }
        Ok(report)
    }

    /// The changes from `from` (default: the run's first snapshot) to `to` (default: the
    /// workspace as it is now).
    pub fn diff(
        &self,
        run: &str,
        from: Option<&SnapshotId>,
        to: Option<&SnapshotId>,
        format: DiffFormat,
    ) -> Result<String> {
        let from = match from {
            Some(id) => id.clone(),
            None => self
                .list(run)?
                .into_iter()
                .next()
                .map(|s| s.id)
                .ok_or_else(|| SnapshotError::NoSnapshots(run.to_string()))?,
        };
        let mut args = vec!["diff", "--no-color", "--no-ext-diff", "--no-textconv"];
        if format == DiffFormat::Stat {
            args.push("--stat");
        }
        let output = match to {
            Some(to) => {
                args.extend([from.as_str(), to.as_str(), "--"]);
                self.git.call(&args).run()?
            }
            None => {
                // A scratch copy of the run's index: the run's own is not touched, so this is
                // safe while the run works.
                let index = TempIndex::copy_of(self.index_path(run))?;
                self.stage(&index.path)?;
                args.extend(["--cached", from.as_str(), "--"]);
                self.git.call(&args).index(&index.path).run()?
            }
        };
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// The paths that differ between two snapshots (`from = None`: all paths of `to`).
    pub fn changed_paths(
        &self,
        from: Option<&SnapshotId>,
        to: &SnapshotId,
    ) -> Result<Vec<PathBuf>> {
        let output = match from {
            Some(from) => self.git.call(&[
                "diff-tree",
                "-r",
                "--no-renames",
                "--name-status",
                "-z",
                from.as_str(),
                to.as_str(),
                "--",
            ]),
            None => self.git.call(&[
                "diff-tree",
                "-r",
                "--root",
                "--no-commit-id",
                "--no-renames",
                "--name-status",
                "-z",
                to.as_str(),
                "--",
            ]),
        }
        .run()?;
        let changes =
            parse::name_status_z(&output.stdout).map_err(|detail| SnapshotError::Unexpected {
                command: "diff-tree".into(),
                detail,
            })?;
        Ok(changes.into_iter().map(|(_, path)| path).collect())
    }

    /// The run's snapshots, oldest first (empty if it has none).
    pub fn list(&self, run: &str) -> Result<Vec<SnapshotInfo>> {
        let run_ref = run_ref(run)?;
        if self.tip(&run_ref)?.is_none() {
            return Ok(Vec::new());
        }
        let text = self
            .git
            .call(&[
                "log",
                "--first-parent",
                "--format=%H%x1f%P%x1f%ct%x1f%s",
                run_ref.as_str(),
                "--",
            ])
            .text()?;
        let lines = parse::log_lines(&text).map_err(|detail| SnapshotError::Unexpected {
            command: "log".into(),
            detail,
        })?;
        let mut out = lines
            .into_iter()
            .map(|line| {
                Ok(SnapshotInfo {
                    id: SnapshotId::parse(&line.id)?,
                    parent: line.parent.as_deref().map(SnapshotId::parse).transpose()?,
                    time: jiff::Timestamp::from_second(line.time).map_err(|e| {
                        SnapshotError::Unexpected {
                            command: "log".into(),
                            detail: e.to_string(),
                        }
                    })?,
                    message: line.subject,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        out.reverse();
        Ok(out)
    }

    /// The run's newest snapshot.
    pub fn latest(&self, run: &str) -> Result<Option<SnapshotId>> {
        Ok(self.tip(&run_ref(run)?)?.map(|(id, _)| id))
    }

    /// The snapshot (of any run) whose id starts with `prefix`.
    pub fn resolve(&self, prefix: &str) -> Result<SnapshotId> {
        if !parse::valid_prefix(prefix) {
            return Err(SnapshotError::InvalidSnapshotId(prefix.to_string()));
        }
        let prefix = prefix.to_ascii_lowercase();
        let all = self
            .git
            .call(&["rev-list", "--glob=refs/baton/runs/*", "--"])
            .text()?;
        let mut matches: Vec<&str> = all.lines().filter(|id| id.starts_with(&prefix)).collect();
        matches.sort_unstable();
        matches.dedup();
        match matches.as_slice() {
            [one] => SnapshotId::parse(one),
            [] => Err(SnapshotError::UnknownSnapshot(prefix)),
            many => Err(SnapshotError::AmbiguousSnapshot {
                prefix,
                candidates: many.iter().map(|id| id[..12].to_string()).collect(),
            }),
        }
    }

    /// Refuses a snapshot that is not in the run's chain.
    fn check_in_run(&self, run: &str, id: &SnapshotId) -> Result<()> {
        let run_ref = run_ref(run)?;
        if self.tip(&run_ref)?.is_none() {
            return Err(SnapshotError::NoSnapshots(run.to_string()));
        }
        let known = self
            .git
            .call(&["cat-file", "-e", &format!("{id}^{{commit}}")])
            .ok_codes(&[0, 1, 128])
            .run()?;
        let ancestor = known.status.success()
            && self
                .git
                .call(&["merge-base", "--is-ancestor", id.as_str(), run_ref.as_str()])
                .ok_codes(&[0, 1])
                .run()?
                .status
                .success();
        if ancestor {
            Ok(())
        } else {
            Err(SnapshotError::NotInRun {
                run: run.to_string(),
                snapshot: id.to_string(),
            })
        }
    }

    /// The run's newest snapshot and its tree.
    fn tip(&self, run_ref: &str) -> Result<Option<(SnapshotId, String)>> {
        let text = self
            .git
            .call(&["for-each-ref", "--format=%(objectname) %(tree)", run_ref])
            .text()?;
        let Some(line) = text.lines().next() else {
            return Ok(None);
        };
        let (id, tree) = line
            .split_once(' ')
            .ok_or_else(|| SnapshotError::Unexpected {
                command: "for-each-ref".into(),
                detail: line.to_string(),
            })?;
        Ok(Some((SnapshotId::parse(id)?, tree.to_string())))
    }

    /// Stages the workspace into `index` (see `stage.rs`: what is left out, and why).
    fn stage(&self, index: &Path) -> Result<Vec<String>> {
        Ok(stage::stage(&self.git, index)?.warnings)
    }

    fn index_path(&self, run: &str) -> PathBuf {
        self.git.git_dir.join(INDEX_DIR).join(run)
    }

    /// A process killed inside `git update-ref` leaves `REF.lock` behind, which would fail
    /// every later update of the run's ref.
    fn clear_stale_ref_lock(&self, run_ref: &str) {
        let lock = self.git.git_dir.join(format!("{run_ref}.lock"));
        if temp::older_than(&lock, STALE_REF_LOCK) {
            let _ = std::fs::remove_file(&lock);
        }
    }

    fn clean_temp_indexes(&self) {
        let dir = self.git.git_dir.join(INDEX_DIR);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().contains(".tmp-")
                && temp::older_than(&entry.path(), STALE_TEMP_INDEX)
            {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

fn run_ref(run: &str) -> Result<String> {
    if parse::valid_run_id(run) {
        Ok(format!("refs/baton/runs/{run}"))
    } else {
        Err(SnapshotError::InvalidRunId(run.to_string()))
    }
}

/// A private copy of a run's index: git's lock is taken on the copy, so a process killed
/// mid-command leaves only debris (removed later), never a stale lock on the run's index. It
/// replaces the run's index (atomically, by rename) only when the operation succeeded.
struct TempIndex {
    path: PathBuf,
    target: PathBuf,
}

impl TempIndex {
    fn copy_of(target: PathBuf) -> Result<TempIndex> {
        let mut name = target.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".tmp-{}", temp::unique()));
        let path = target.with_file_name(name);
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir).map_err(|e| SnapshotError::io(dir, e))?;
        }
        match std::fs::copy(&target, &path) {
            Ok(_) => {}
            // No index yet: git starts from an empty one.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(SnapshotError::io(&target, e)),
        }
        Ok(TempIndex { path, target })
    }

    fn persist(self) -> Result<()> {
        std::fs::rename(&self.path, &self.target).map_err(|e| SnapshotError::io(&self.target, e))
    }
}

impl Drop for TempIndex {
    fn drop(&mut self) {
        // After `persist` the file is gone and this does nothing.
        let _ = std::fs::remove_file(&self.path);
        let mut lock = self.path.clone().into_os_string();
        lock.push(".lock");
        let _ = std::fs::remove_file(lock);
    }
}
