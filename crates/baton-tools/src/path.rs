//! Confinement of model-supplied paths to the workspace.
//!
//! A path is checked twice: lexically (so `..` cannot climb out and the filesystem operation
//! later uses exactly the normalized path), then against the filesystem (so a symlink inside the
//! workspace cannot lead outside it). Races with a concurrent process swapping a directory for a
//! symlink between the check and the use are not defended against; the agent's own tools run
//! one at a time and are the only writers we expect.

use std::ffi::OsStr;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Directory under the workspace root holding baton's own state (the journal). Tools must not
/// read it (it may hold the history the model is not meant to see verbatim) nor write it (a
/// corrupted journal breaks resume).
pub const STATE_DIR: &str = ".baton";

/// What the caller intends to do with a resolved path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("workspace root {root} cannot be used: {source}")]
    Root { root: PathBuf, source: io::Error },
    #[error("the path is empty; give a path relative to the workspace root, e.g. 'src/main.rs'")]
    Empty,
    #[error("path '{path}' is outside the workspace {root}")]
    Outside { path: String, root: PathBuf },
    #[error("path '{path}' is inside {STATE_DIR}/, baton's own state; tools cannot access it")]
    StateDir { path: String },
    #[error("path '{path}' is a symlink whose target does not exist; it cannot be used")]
    DanglingSymlink { path: String },
    #[error("path '{path}' is the workspace root directory itself; it cannot be written")]
    WriteRoot { path: String },
    #[error("path '{path}' cannot be checked: {source}")]
    Io { path: String, source: io::Error },
}

/// The directory tree a run may touch. The root is canonical, so comparisons against
/// canonicalized paths are meaningful.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    pub fn new(root: impl AsRef<Path>) -> Result<Workspace, PathError> {
        let root = root.as_ref();
        let canonical = root.canonicalize().map_err(|source| PathError::Root {
            root: root.to_path_buf(),
            source,
        })?;
        if !canonical.is_dir() {
            return Err(PathError::Root {
                root: root.to_path_buf(),
                source: io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
            });
        }
        Ok(Workspace { root: canonical })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Turns a model-supplied path into an absolute path inside the workspace, or explains why
    /// it may not be used. The returned path need not exist (a file about to be written).
    pub fn resolve(&self, user_path: &str, access: Access) -> Result<PathBuf, PathError> {
        if user_path.trim().is_empty() {
            return Err(PathError::Empty);
        }
        let outside = || PathError::Outside {
            path: user_path.to_string(),
            root: self.root.clone(),
        };

        let joined = self.root.join(user_path);
        let normalized = normalize(&joined);
        if !normalized.starts_with(&self.root) {
            return Err(outside());
        }

        let resolved = self.resolve_existing_prefix(user_path, &normalized)?;
        let Ok(relative) = resolved.strip_prefix(&self.root) else {
            return Err(outside());
        };
        if relative
            .components()
            .next()
            .is_some_and(|first| is_state_dir(first.as_os_str()))
        {
            return Err(PathError::StateDir {
                path: user_path.to_string(),
            });
        }
        if access == Access::Write && relative.as_os_str().is_empty() {
            return Err(PathError::WriteRoot {
                path: user_path.to_string(),
            });
        }
        Ok(resolved)
    }

    /// Canonicalizes the deepest ancestor of `normalized` that exists (following symlinks) and
    /// appends the components that do not exist yet.
    fn resolve_existing_prefix(
        &self,
        user_path: &str,
        normalized: &Path,
    ) -> Result<PathBuf, PathError> {
        let mut missing: Vec<&OsStr> = Vec::new();
        let mut current = normalized;
        loop {
            match current.canonicalize() {
                Ok(canonical) => {
                    let mut resolved = canonical;
                    resolved.extend(missing.iter().rev());
                    return Ok(resolved);
                }
                // ENOTDIR ("file.txt/x") is walked up like a missing path: what matters is
                // where the existing part leads, and the tool's own operation reports the rest.
                Err(err)
                    if matches!(
                        err.kind(),
                        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                    ) =>
                {
                    // A dangling symlink would be followed by a later write and create its
                    // target wherever it points, so it counts as existing-but-unusable.
                    if current.symlink_metadata().is_ok() {
                        return Err(PathError::DanglingSymlink {
                            path: user_path.to_string(),
                        });
                    }
                    let (Some(parent), Some(name)) = (current.parent(), current.file_name()) else {
                        return Err(PathError::Io {
                            path: user_path.to_string(),
                            source: err,
                        });
                    };
                    missing.push(name);
                    current = parent;
                }
                Err(source) => {
                    return Err(PathError::Io {
                        path: user_path.to_string(),
                        source,
                    });
                }
            }
        }
    }

    /// `path` relative to the root for messages to the model (`.` for the root itself); paths
    /// outside the root are shown as they are.
    pub fn display_relative(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }

    /// Whether `path` (absolute, already resolved) is baton's state directory or inside it.
    pub(crate) fn is_state_path(&self, path: &Path) -> bool {
        path.strip_prefix(&self.root)
            .ok()
            .and_then(|rel| rel.components().next())
            .is_some_and(|first| is_state_dir(first.as_os_str()))
    }
}

/// Case-insensitive because on case-insensitive filesystems `.BATON` is the same directory.
fn is_state_dir(name: &OsStr) -> bool {
    name.to_str()
        .is_some_and(|n| n.eq_ignore_ascii_case(STATE_DIR))
}

/// Removes `.` and resolves `..` without touching the filesystem. `..` at the filesystem root
/// stays at the root, as the OS does.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, tempfile::TempDir, Workspace) {
        let ws_dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let ws = Workspace::new(ws_dir.path()).unwrap();
        (ws_dir, outside, ws)
    }

    #[test]
    fn relative_and_new_nested_paths_resolve_inside() {
        let (_d, _o, ws) = setup();
        fs::create_dir(ws.root().join("src")).unwrap();
        fs::write(ws.root().join("src/main.rs"), "fn main() {}").unwrap();
        assert_eq!(
            ws.resolve("src/main.rs", Access::Read).unwrap(),
            ws.root().join("src/main.rs")
        );
        assert_eq!(
            ws.resolve("./src/../src/new/deep/file.rs", Access::Write)
                .unwrap(),
            ws.root().join("src/new/deep/file.rs")
        );
        assert_eq!(ws.resolve(".", Access::Read).unwrap(), ws.root());
        // Through a regular file: not an escape; the file operation reports the error.
        assert_eq!(
            ws.resolve("src/main.rs/x", Access::Write).unwrap(),
            ws.root().join("src/main.rs/x")
        );
        let abs = ws.root().join("a/b.txt");
        assert_eq!(
            ws.resolve(abs.to_str().unwrap(), Access::Write).unwrap(),
            abs
        );
    }

    #[test]
    fn dotdot_escape_is_refused() {
        let (_d, _o, ws) = setup();
        let err = ws.resolve("../x", Access::Read).unwrap_err();
        assert!(matches!(err, PathError::Outside { .. }));
        let msg = err.to_string();
        assert!(msg.contains("'../x' is outside the workspace"), "{msg}");
        assert!(msg.contains(&ws.root().display().to_string()), "{msg}");
        assert!(ws.resolve("a/../../x", Access::Write).is_err());
        assert!(
            ws.resolve("../../../../../../../../etc/passwd", Access::Read)
                .is_err()
        );
    }

    #[test]
    fn absolute_outside_is_refused() {
        let (_d, outside, ws) = setup();
        assert!(matches!(
            ws.resolve("/etc/passwd", Access::Read),
            Err(PathError::Outside { .. })
        ));
        let other = outside.path().join("f");
        assert!(ws.resolve(other.to_str().unwrap(), Access::Write).is_err());
    }

    #[test]
    fn symlinked_file_pointing_outside_is_refused() {
        let (_d, outside, ws) = setup();
        let secret = outside.path().join("secret.txt");
        fs::write(&secret, "s").unwrap();
        symlink(&secret, ws.root().join("link.txt")).unwrap();
        assert!(matches!(
            ws.resolve("link.txt", Access::Read),
            Err(PathError::Outside { .. })
        ));
        assert!(ws.resolve("link.txt", Access::Write).is_err());
        assert!(ws.resolve("link.txt/child", Access::Write).is_err());
    }

    #[test]
    fn symlinked_dir_pointing_outside_is_refused() {
        let (_d, outside, ws) = setup();
        symlink(outside.path(), ws.root().join("out")).unwrap();
        assert!(matches!(
            ws.resolve("out/new.txt", Access::Write),
            Err(PathError::Outside { .. })
        ));
        assert!(ws.resolve("out/a/b/c", Access::Write).is_err());
        assert!(ws.resolve("out", Access::Read).is_err());
    }

    #[test]
    fn dangling_symlink_is_refused() {
        let (_d, outside, ws) = setup();
        symlink(outside.path().join("not-yet"), ws.root().join("dangling")).unwrap();
        assert!(matches!(
            ws.resolve("dangling", Access::Write),
            Err(PathError::DanglingSymlink { .. })
        ));
        assert!(!outside.path().join("not-yet").exists());
    }

    #[test]
    fn symlink_inside_workspace_is_followed() {
        let (_d, _o, ws) = setup();
        fs::create_dir(ws.root().join("real")).unwrap();
        symlink(ws.root().join("real"), ws.root().join("alias")).unwrap();
        assert_eq!(
            ws.resolve("alias/x", Access::Write).unwrap(),
            ws.root().join("real/x")
        );
    }

    #[test]
    fn proc_self_root_is_refused() {
        let (_d, _o, ws) = setup();
        assert!(
            ws.resolve("/proc/self/root/etc/passwd", Access::Read)
                .is_err()
        );
        let through_proc = format!("/proc/self/root{}/x", ws.root().display());
        // Lexically this is not under the root, so it is refused before the filesystem is asked.
        assert!(ws.resolve(&through_proc, Access::Read).is_err());
    }

    #[test]
    fn proc_magic_links_planted_in_the_workspace_are_refused() {
        let (_d, outside, ws) = setup();
        let out = outside.path().canonicalize().unwrap();
        symlink("/proc/self/root", ws.root().join("root")).unwrap();
        let through = format!("root{}/x", out.display());
        assert!(matches!(
            ws.resolve(&through, Access::Write),
            Err(PathError::Outside { .. })
        ));
        symlink(
            format!("/proc/self/root{}", out.display()),
            ws.root().join("o"),
        )
        .unwrap();
        assert!(matches!(
            ws.resolve("o/new.txt", Access::Write),
            Err(PathError::Outside { .. })
        ));
        // The test process's cwd is the crate directory, outside the workspace.
        symlink("/proc/self/cwd", ws.root().join("cwd")).unwrap();
        assert!(ws.resolve("cwd/Cargo.toml", Access::Read).is_err());
        // A chain of links that ends outside.
        symlink(ws.root().join("o"), ws.root().join("chain")).unwrap();
        assert!(ws.resolve("chain/x", Access::Write).is_err());
        assert!(!out.join("x").exists() && !out.join("new.txt").exists());
    }

    #[test]
    fn state_dir_is_refused_for_read_and_write() {
        let (_d, _o, ws) = setup();
        fs::create_dir(ws.root().join(".baton")).unwrap();
        fs::write(ws.root().join(".baton/journal.db"), "x").unwrap();
        for access in [Access::Read, Access::Write] {
            let err = ws.resolve(".baton/journal.db", access).unwrap_err();
            assert!(matches!(err, PathError::StateDir { .. }), "{err}");
            assert!(ws.resolve(".baton", access).is_err());
            assert!(ws.resolve("src/../.baton/x", access).is_err());
            assert!(ws.resolve(".BATON/x", access).is_err());
        }
        symlink(ws.root().join(".baton"), ws.root().join("state")).unwrap();
        assert!(matches!(
            ws.resolve("state/journal.db", Access::Read),
            Err(PathError::StateDir { .. })
        ));
        // A nested directory of the same name is an ordinary project directory.
        assert!(ws.resolve("sub/.baton/x", Access::Write).is_ok());
    }

    #[test]
    fn root_and_empty_paths() {
        let (_d, _o, ws) = setup();
        assert!(matches!(
            ws.resolve("", Access::Read),
            Err(PathError::Empty)
        ));
        assert!(matches!(
            ws.resolve(".", Access::Write),
            Err(PathError::WriteRoot { .. })
        ));
    }

    #[test]
    fn display_relative_strips_root() {
        let (_d, _o, ws) = setup();
        assert_eq!(ws.display_relative(&ws.root().join("a/b")), "a/b");
        assert_eq!(ws.display_relative(ws.root()), ".");
        assert_eq!(ws.display_relative(Path::new("/etc")), "/etc");
    }

    #[test]
    fn root_must_exist() {
        let d = tempfile::tempdir().unwrap();
        assert!(matches!(
            Workspace::new(d.path().join("missing")),
            Err(PathError::Root { .. })
        ));
        fs::write(d.path().join("f"), "").unwrap();
        assert!(Workspace::new(d.path().join("f")).is_err());
    }
}
