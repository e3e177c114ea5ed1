#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Randomized: random file trees, snapshot, random edits (modify, delete, create, chmod,
//! symlink, file ↔ directory), restore — the workspace (paths, bytes, executable bits, symlink
//! targets) equals what was snapshotted, exactly; ignored files and a user `.git` are untouched;
//! a second restore changes nothing. Seeds are fixed (set BATON_SNAPSHOT_SEED to explore).

mod support;

use std::os::unix::fs::symlink;
use std::path::Path;

use baton_snapshot::ShadowRepo;
use support::*;

const NAMES: &[&str] = &[
    "a",
    "b.txt",
    "with space",
    "ünï",
    "x\ny",
    "deep",
    "-dash",
    "1",
];

fn random_rel(rng: &mut fastrand::Rng) -> String {
    let depth = rng.usize(1..=3);
    (0..depth)
        .map(|_| NAMES[rng.usize(..NAMES.len())].to_string())
        .collect::<Vec<_>>()
        .join("/")
}

fn random_bytes(rng: &mut fastrand::Rng) -> Vec<u8> {
    let len = match rng.u8(..10) {
        0 => 0,
        1 => rng.usize(10_000..200_000),
        _ => rng.usize(1..200),
    };
    let binary = rng.bool();
    (0..len)
        .map(|_| {
            if binary {
                rng.u8(..)
            } else {
                b"ab\n\r "[rng.usize(..5)]
            }
        })
        .collect()
}

/// Removes whatever is at `path` (file, symlink or directory).
fn clear(path: &Path) {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path).unwrap(),
        Ok(_) => std::fs::remove_file(path).unwrap(),
        Err(_) => {}
    }
}

/// Makes sure every ancestor of `rel` is a real directory.
fn make_parents(root: &Path, rel: &str) {
    let mut dir = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len() - 1] {
        dir.push(part);
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                std::fs::remove_file(&dir).unwrap();
                std::fs::create_dir(&dir).unwrap();
            }
            Err(_) => std::fs::create_dir(&dir).unwrap(),
        }
    }
}

fn random_edit(root: &Path, rng: &mut fastrand::Rng) {
    let rel = random_rel(rng);
    make_parents(root, &rel);
    let path = root.join(&rel);
    match rng.u8(..6) {
        // Create or modify a file.
        0 | 1 => {
            clear(&path);
            std::fs::write(&path, random_bytes(rng)).unwrap();
            set_executable(&path, rng.u8(..4) == 0);
        }
        // Delete.
        2 => clear(&path),
        // chmod.
        3 => {
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
                set_executable(&path, rng.bool());
            }
        }
        // A symlink: to a sibling, to nowhere, or out of the workspace.
        4 => {
            clear(&path);
            let target =
                ["a", "../b.txt", "nowhere/at/all", "/etc/hostname", "deep"][rng.usize(..5)];
            symlink(target, &path).unwrap();
        }
        // A directory with a file where something else was.
        _ => {
            clear(&path);
            std::fs::create_dir_all(&path).unwrap();
            std::fs::write(path.join("inner"), random_bytes(rng)).unwrap();
        }
    }
}

fn one_case(seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    // An ignored directory and a user repository that must survive everything.
    write(root, ".gitignore", b"/ignored/\n");
    write(root, "ignored/cache.bin", b"cache v1");
    let user_repo = rng.bool();
    if user_repo {
        user_git(root, &["init", "-q"]);
        user_git(root, &["commit", "-q", "--allow-empty", "-m", "base"]);
    }
    for _ in 0..rng.usize(0..25) {
        random_edit(root, &mut rng);
    }
    let repo = ShadowRepo::open(root).unwrap();
    let run = format!("run-{seed}");
    let first = repo.snapshot(&run, "first", at(0)).unwrap().id;
    let first_tree = tree(root, &["ignored"]);
    for _ in 0..rng.usize(1..15) {
        random_edit(root, &mut rng);
    }
    let second = repo.snapshot(&run, "second", at(1)).unwrap().id;
    let second_tree = tree(root, &["ignored"]);
    for _ in 0..rng.usize(1..15) {
        random_edit(root, &mut rng);
    }
    write(root, "ignored/cache.bin", b"cache v2");
    let git_before = user_repo.then(|| all_bytes(&root.join(".git")));

    repo.restore(&run, &first).unwrap();
    assert_eq!(tree(root, &["ignored"]), first_tree, "seed {seed}: first");
    let again = repo.restore(&run, &first).unwrap();
    assert!(
        again.is_empty(),
        "seed {seed}: second restore changed {again:?}"
    );
    repo.restore(&run, &second).unwrap();
    assert_eq!(tree(root, &["ignored"]), second_tree, "seed {seed}: second");
    assert_eq!(
        std::fs::read(root.join("ignored/cache.bin")).unwrap(),
        b"cache v2",
        "seed {seed}: ignored file touched"
    );
    if let Some(before) = git_before {
        assert_eq!(
            all_bytes(&root.join(".git")),
            before,
            "seed {seed}: .git touched"
        );
    }
}

#[test]
fn random_trees_and_edits_restore_exactly() {
    let (base, cases) = match std::env::var("BATON_SNAPSHOT_SEED") {
        Ok(seed) => (seed.parse().expect("BATON_SNAPSHOT_SEED is a number"), 200),
        Err(_) => (20261130, 25),
    };
    for seed in base..base + cases {
        one_case(seed);
    }
}
