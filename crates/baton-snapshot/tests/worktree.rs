#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Worktrees and merges for parallel tasks, against real git and real files.

mod support;

use baton_snapshot::{MergeOutcome, ShadowRepo};
use support::*;

fn read(root: &std::path::Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap()
}

#[test]
fn a_worktree_holds_the_snapshot_and_shares_the_parents_repository() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "a.txt", b"one\n");
    write(root, "dir/b.txt", b"two\n");
    let repo = ShadowRepo::open(root).unwrap();
    let base = repo.snapshot("parent", "base", at(0)).unwrap().id;
    let dir = repo.worktree_dir("child");

    let worktree = repo.create_worktree(&dir, "child", &base).unwrap();
    assert_eq!(tree(&dir, &[".baton"]), tree(root, &[".baton"]));
    assert_eq!(worktree.git_dir(), repo.git_dir());
    // Opening the worktree by path finds the parent's repository and the child's chain.
    let reopened = ShadowRepo::open(&dir).unwrap();
    assert_eq!(reopened.git_dir(), repo.git_dir());
    assert_eq!(reopened.latest("child").unwrap(), Some(base.clone()));

    // The child's work is snapshotted into the shared repository; the parent is untouched.
    write(&dir, "a.txt", b"one, changed by the child\n");
    let child_tip = reopened.snapshot("child", "work", at(1)).unwrap().id;
    assert_ne!(child_tip, base);
    assert_eq!(read(root, "a.txt"), "one\n");
    assert_eq!(repo.latest("parent").unwrap(), Some(base.clone()));

    // Attaching to it (a resumed parent) leaves the child's work alone, also unsnapshotted work.
    write(&dir, "unsaved.txt", b"not snapshotted yet\n");
    repo.attach_worktree(&dir, "child").unwrap();
    assert_eq!(read(&dir, "a.txt"), "one, changed by the child\n");
    assert_eq!(read(&dir, "unsaved.txt"), "not snapshotted yet\n");
    // A worktree that is gone is made again from the child's latest snapshot.
    std::fs::remove_dir_all(&dir).unwrap();
    repo.attach_worktree(&dir, "child").unwrap();
    assert_eq!(read(&dir, "a.txt"), "one, changed by the child\n");
    assert!(!dir.join("unsaved.txt").exists());
}

#[test]
fn independent_changes_merge_and_conflicting_ones_are_reported() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "shared.txt", b"line 1\nline 2\nline 3\n");
    write(root, "left.txt", b"left\n");
    let repo = ShadowRepo::open(root).unwrap();
    let base = repo.snapshot("parent", "base", at(0)).unwrap().id;
    let one = repo.worktree_dir("one");
    let two = repo.worktree_dir("two");
    let three = repo.worktree_dir("three");
    let w1 = repo.create_worktree(&one, "one", &base).unwrap();
    let w2 = repo.create_worktree(&two, "two", &base).unwrap();
    let w3 = repo.create_worktree(&three, "three", &base).unwrap();

    write(&one, "new_from_one.txt", b"one\n");
    write(&one, "shared.txt", b"line 1 by one\nline 2\nline 3\n");
    let t1 = w1.snapshot("one", "done", at(1)).unwrap().id;
    write(&two, "shared.txt", b"line 1\nline 2\nline 3 by two\n");
    std::fs::remove_file(two.join("left.txt")).unwrap();
    let t2 = w2.snapshot("two", "done", at(2)).unwrap().id;
    write(&three, "shared.txt", b"line 1 by three\nline 2\nline 3\n");
    let t3 = w3.snapshot("three", "done", at(3)).unwrap().id;

    let MergeOutcome::Merged(m1) = repo
        .merge("parent", &base, &base, &t1, "m1", at(4))
        .unwrap()
    else {
        panic!("a change against an unchanged side merges")
    };
    let MergeOutcome::Merged(m2) = repo.merge("parent", &base, &m1, &t2, "m2", at(5)).unwrap()
    else {
        panic!("changes to different lines merge")
    };
    assert_eq!(repo.latest("parent").unwrap(), Some(m2.clone()));
    // The workspace is untouched until it is restored to the merge.
    assert_eq!(read(root, "shared.txt"), "line 1\nline 2\nline 3\n");
    repo.restore("parent", &m2).unwrap();
    assert_eq!(
        read(root, "shared.txt"),
        "line 1 by one\nline 2\nline 3 by two\n"
    );
    assert_eq!(read(root, "new_from_one.txt"), "one\n");
    assert!(!root.join("left.txt").exists());

    let conflict = repo.merge("parent", &base, &m2, &t3, "m3", at(6)).unwrap();
    assert_eq!(conflict, MergeOutcome::Conflict(vec!["shared.txt".into()]));
    assert_eq!(
        repo.latest("parent").unwrap(),
        Some(m2.clone()),
        "a conflict changes nothing"
    );
    let diff = repo.diff_snapshots(&base, &t3).unwrap();
    assert!(diff.contains("+line 1 by three"), "{diff}");
}

#[test]
fn a_worktree_lives_in_the_state_directory_and_needs_its_repository() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "a.txt", b"one\n");
    let repo = ShadowRepo::open(root).unwrap();
    let base = repo.snapshot("parent", "base", at(0)).unwrap().id;
    assert!(
        !repo.worktree_dir("c").starts_with(root),
        "out of the workspace"
    );
    // Anywhere else it could not be found again by opening it.
    let elsewhere = tempfile::tempdir().unwrap();
    let err = repo
        .create_worktree(&elsewhere.path().join("c"), "c", &base)
        .unwrap_err()
        .to_string();
    assert!(err.contains("where `worktree_dir` says"), "{err}");

    let dir = repo.worktree_dir("c");
    repo.create_worktree(&dir, "c", &base).unwrap();
    std::fs::remove_dir_all(repo.git_dir()).unwrap();
    let err = ShadowRepo::open(&dir).unwrap_err().to_string();
    assert!(err.contains("not a shadow repository"), "{err}");
}
