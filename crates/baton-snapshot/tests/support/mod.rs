//! Test support: an independent view of a workspace (walked with std, not git) to compare a
//! restored workspace with what was snapshotted.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What a snapshot must preserve of one path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entry {
    File { bytes: Vec<u8>, executable: bool },
    Symlink(PathBuf),
}

/// Every file and symlink under `root`, except `.baton/`, the top-level `.git` and the
/// top-level directories named in `skip` (ignored ones). Directories themselves are not
/// entries (git does not track them).
pub fn tree(root: &Path, skip: &[&str]) -> BTreeMap<Vec<u8>, Entry> {
    fn walk(root: &Path, dir: &Path, skip: &[&str], out: &mut BTreeMap<Vec<u8>, Entry>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = path.strip_prefix(root).unwrap();
            if dir == root {
                let name = rel.to_string_lossy();
                if name == ".baton" || name == ".git" || skip.contains(&name.as_ref()) {
                    continue;
                }
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let key = rel.as_os_str().as_bytes().to_vec();
            if meta.file_type().is_symlink() {
                out.insert(key, Entry::Symlink(std::fs::read_link(&path).unwrap()));
            } else if meta.is_dir() {
                walk(root, &path, skip, out);
            } else {
                out.insert(
                    key,
                    Entry::File {
                        bytes: std::fs::read(&path).unwrap(),
                        executable: meta.permissions().mode() & 0o111 != 0,
                    },
                );
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, skip, &mut out);
    out
}

/// Every file under `dir` with its bytes (for "byte-identical" checks of a `.git`).
pub fn all_bytes(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path);
            } else {
                let bytes = if meta.file_type().is_symlink() {
                    std::fs::read_link(&path)
                        .unwrap()
                        .as_os_str()
                        .as_bytes()
                        .to_vec()
                } else {
                    std::fs::read(&path).unwrap()
                };
                out.insert(path.strip_prefix(dir).unwrap().to_path_buf(), bytes);
            }
        }
    }
    out
}

pub fn write(root: &Path, rel: &str, content: &[u8]) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

pub fn set_executable(path: &Path, executable: bool) {
    let mode = if executable { 0o755 } else { 0o644 };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Runs the user's git (with their repository) in `dir`; fails the test with git's output.
pub fn user_git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=u",
            "-c",
            "user.email=u@x",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git must be installed for these tests (apt-get install git)");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn at(second: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(1_790_000_000 + second).unwrap()
}
