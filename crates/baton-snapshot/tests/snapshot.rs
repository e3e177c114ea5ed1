#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shadow repository against real git and real files: snapshot, restore, diff, list,
//! resolve; odd names, binary and large files, symlinks, executable bits, ignored files,
//! nested repositories, a user repository with uncommitted work, crashes mid-operation.

mod support;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use baton_snapshot::{Change, DiffFormat, ShadowRepo, SnapshotError, SnapshotId};
use support::*;

fn paths(list: &[PathBuf]) -> Vec<String> {
    let mut out: Vec<String> = list
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

#[test]
fn restore_puts_back_modified_deleted_and_removes_created_files() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "src/main.rs", b"fn main() {}\n");
    write(root, "src/lib.rs", b"pub fn f() {}\n");
    write(root, "README", b"hello\n");
    write(root, "run.sh", b"#!/bin/sh\necho hi\n");
    set_executable(&root.join("run.sh"), true);
    let repo = ShadowRepo::open(root).unwrap();
    let first = repo.snapshot("run-1", "run_start", at(0)).unwrap();
    assert_eq!(first.change, Change::Created);
    let expected = tree(root, &[]);

    write(root, "src/main.rs", b"fn main() { changed() }\n");
    std::fs::remove_file(root.join("src/lib.rs")).unwrap();
    write(root, "new/deep/file.txt", b"created later\n");
    set_executable(&root.join("run.sh"), false);
    std::fs::remove_file(root.join("README")).unwrap();
    symlink("src", root.join("README")).unwrap();

    let report = repo.restore("run-1", &first.id).unwrap();
    assert_eq!(tree(root, &[]), expected);
    assert_eq!(
        paths(&report.rewritten),
        ["README", "run.sh", "src/main.rs"]
    );
    assert_eq!(paths(&report.recreated), ["src/lib.rs"]);
    assert_eq!(paths(&report.removed), ["new/deep/file.txt"]);
    assert!(
        !root.join("new").exists(),
        "directories left empty are removed"
    );

    // Idempotent: a second restore finds nothing to do and changes nothing.
    let again = repo.restore("run-1", &first.id).unwrap();
    assert!(again.is_empty(), "{again:?}");
    assert_eq!(tree(root, &[]), expected);
}

#[test]
fn odd_names_binary_large_files_symlinks_and_exec_bits_round_trip() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "with space.txt", b"a b\n");
    write(root, "new\nline", b"newline in the name\n");
    let non_utf8 = OsStr::from_bytes(b"latin1-\xe9t\xe9");
    std::fs::write(root.join(non_utf8), b"\x00\x01\x02\xff binary").unwrap();
    let large: Vec<u8> = (0..6_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    write(root, "big/blob.bin", &large);
    write(root, "tool", b"#!/bin/sh\n");
    set_executable(&root.join("tool"), true);
    symlink("big/blob.bin", root.join("link-to-blob")).unwrap();
    symlink("does/not/exist", root.join("dangling")).unwrap();
    symlink("big", root.join("dir-link")).unwrap();
    write(root, "crlf.txt", b"one\r\ntwo\nthree\r\n");
    // A hostile .gitattributes must not change a single byte.
    write(root, ".gitattributes", b"* text eol=crlf\n*.txt ident\n");
    write(root, "ident.txt", b"$Id$\nline\n");
    let repo = ShadowRepo::open(root).unwrap();
    let snap = repo.snapshot("r", "odd", at(1)).unwrap();
    let expected = tree(root, &[]);

    // Trash all of it.
    for name in ["with space.txt", "new\nline", "crlf.txt", "ident.txt"] {
        write(root, name, b"changed\n");
    }
    std::fs::remove_file(root.join(non_utf8)).unwrap();
    std::fs::remove_dir_all(root.join("big")).unwrap();
    write(root, "big", b"now a file\n");
    set_executable(&root.join("tool"), false);
    std::fs::remove_file(root.join("dangling")).unwrap();
    std::fs::remove_file(root.join("link-to-blob")).unwrap();
    write(root, "link-to-blob", b"a file instead of a link\n");
    std::fs::remove_file(root.join("dir-link")).unwrap();
    write(root, "créé \u{1F600}", b"new\n");

    let report = repo.restore("r", &snap.id).unwrap();
    assert_eq!(tree(root, &[]), expected);
    assert!(report.recreated.iter().any(|p| p.as_os_str() == non_utf8));
    assert!(
        report
            .removed
            .iter()
            .any(|p| p.to_string_lossy() == "créé \u{1F600}")
    );
    assert_eq!(std::fs::read(root.join("big/blob.bin")).unwrap(), large);
    assert_eq!(
        std::fs::read_link(root.join("dangling")).unwrap(),
        Path::new("does/not/exist")
    );
}

#[test]
fn a_users_repository_is_byte_identical_after_snapshot_and_restore() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    user_git(root, &["init", "-q"]);
    write(root, "a.txt", b"committed\n");
    write(root, "b.txt", b"committed too\n");
    user_git(root, &["add", "."]);
    user_git(root, &["commit", "-qm", "first"]);
    write(root, "a.txt", b"staged change\n");
    user_git(root, &["add", "a.txt"]);
    write(root, "b.txt", b"unstaged change\n");
    write(root, "untracked.txt", b"untracked\n");
    let before = all_bytes(&root.join(".git"));

    let repo = ShadowRepo::open(root).unwrap();
    let snap = repo.snapshot("r", "s", at(0)).unwrap();
    let files = paths(&repo.changed_paths(None, &snap.id).unwrap());
    assert_eq!(
        files,
        ["a.txt", "b.txt", "untracked.txt"],
        "no .git path is tracked"
    );
    assert_eq!(
        all_bytes(&root.join(".git")),
        before,
        "snapshot touched .git"
    );

    write(root, "a.txt", b"agent edit\n");
    std::fs::remove_file(root.join("untracked.txt")).unwrap();
    write(root, "agent.txt", b"new\n");
    repo.restore("r", &snap.id).unwrap();
    assert_eq!(
        all_bytes(&root.join(".git")),
        before,
        "restore touched .git"
    );
    assert_eq!(
        std::fs::read(root.join("a.txt")).unwrap(),
        b"staged change\n"
    );
    assert_eq!(
        std::fs::read(root.join("b.txt")).unwrap(),
        b"unstaged change\n"
    );
    assert!(root.join("untracked.txt").exists() && !root.join("agent.txt").exists());
    // The user's git still sees exactly its own state.
    let status = user_git(root, &["status", "--porcelain"]);
    assert_eq!(status, "M  a.txt\n M b.txt\n?? untracked.txt\n");
}

#[test]
fn ignored_files_are_neither_snapshotted_nor_touched() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, ".gitignore", b"target/\n*.log\n");
    write(root, "src.rs", b"code\n");
    write(root, "target/debug/app", b"build output v1\n");
    write(root, "run.log", b"log v1\n");
    let repo = ShadowRepo::open(root).unwrap();
    let snap = repo.snapshot("r", "s", at(0)).unwrap();
    assert_eq!(
        paths(&repo.changed_paths(None, &snap.id).unwrap()),
        [".gitignore", "src.rs"]
    );
    write(root, "target/debug/app", b"build output v2\n");
    write(root, "target/new", b"new output\n");
    write(root, "run.log", b"log v2\n");
    write(root, "src.rs", b"edited\n");
    repo.restore("r", &snap.id).unwrap();
    assert_eq!(std::fs::read(root.join("src.rs")).unwrap(), b"code\n");
    assert_eq!(
        std::fs::read(root.join("target/debug/app")).unwrap(),
        b"build output v2\n"
    );
    assert!(root.join("target/new").exists());
    assert_eq!(std::fs::read(root.join("run.log")).unwrap(), b"log v2\n");
}

#[test]
fn nested_repositories_are_left_alone() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "top.txt", b"top\n");
    let repo = ShadowRepo::open(root).unwrap();
    let snap = repo.snapshot("r", "s", at(0)).unwrap();
    // A nested repository with a commit, and one without any (git cannot even point at it).
    let with_commit = root.join("vendor/lib");
    std::fs::create_dir_all(&with_commit).unwrap();
    user_git(&with_commit, &["init", "-q"]);
    write(&with_commit, "lib.c", b"int x;\n");
    user_git(&with_commit, &["add", "."]);
    user_git(&with_commit, &["commit", "-qm", "lib"]);
    let empty_repo = root.join("scratch");
    std::fs::create_dir_all(&empty_repo).unwrap();
    user_git(&empty_repo, &["init", "-q"]);
    write(&empty_repo, "notes", b"wip\n");
    let second = repo.snapshot("r", "after nested", at(1)).unwrap();
    // Skipped, not even a pointer to its commit: git never enters a nested repository (its
    // configuration could run programs; see redteam.rs).
    assert_eq!(
        second.change,
        Change::Unchanged,
        "a nested repository was snapshotted"
    );
    write(root, "top.txt", b"top 2\n");
    let third = repo.snapshot("r", "after top", at(2)).unwrap();
    assert_eq!(
        paths(&repo.changed_paths(Some(&snap.id), &third.id).unwrap()),
        ["top.txt"],
    );
    let nested_git = all_bytes(&with_commit.join(".git"));
    repo.restore("r", &snap.id).unwrap();
    assert_eq!(
        std::fs::read(with_commit.join("lib.c")).unwrap(),
        b"int x;\n"
    );
    assert_eq!(all_bytes(&with_commit.join(".git")), nested_git);
    assert_eq!(std::fs::read(empty_repo.join("notes")).unwrap(), b"wip\n");
}

#[test]
fn an_unchanged_workspace_gives_the_previous_snapshot_and_list_follows_the_chain() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    let repo = ShadowRepo::open(root).unwrap();
    // An empty workspace is a snapshot too.
    let empty = repo.snapshot("r", "run_start", at(0)).unwrap();
    assert_eq!(empty.change, Change::Created);
    let same = repo.snapshot("r", "after_tools", at(5)).unwrap();
    assert_eq!(
        (same.id.clone(), same.change),
        (empty.id.clone(), Change::Unchanged)
    );
    write(root, "f", b"1\n");
    let one = repo
        .snapshot("r", "after_tools turn 1\n\nmore lines", at(10))
        .unwrap();
    write(root, "f", b"2\n");
    let two = repo.snapshot("r", "after_tools turn 2", at(20)).unwrap();
    let list = repo.list("r").unwrap();
    let ids: Vec<&SnapshotId> = list.iter().map(|s| &s.id).collect();
    assert_eq!(ids, [&empty.id, &one.id, &two.id]);
    assert_eq!(list[0].parent, None);
    assert_eq!(list[2].parent.as_ref(), Some(&one.id));
    assert_eq!(list[1].message, "after_tools turn 1");
    assert_eq!(list[2].time, at(20));
    assert_eq!(repo.latest("r").unwrap(), Some(two.id.clone()));
    assert!(repo.list("other-run").unwrap().is_empty());

    // Restoring the empty snapshot empties the workspace (but .baton/).
    repo.restore("r", &empty.id).unwrap();
    assert!(tree(root, &[]).is_empty());
    assert!(repo.git_dir().is_dir());
    assert!(!root.join(".baton").exists(), "no state in the workspace");
}

#[test]
fn commits_depend_only_on_the_workspace_and_the_callers_date() {
    let make = || {
        let ws = tempfile::tempdir().unwrap();
        write(ws.path(), "a", b"same\n");
        let repo = ShadowRepo::open(ws.path()).unwrap();
        repo.snapshot("r", "msg", at(42)).unwrap().id
    };
    assert_eq!(make(), make());
}

#[test]
fn resolve_takes_unique_prefixes_and_names_bad_ones() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    let repo = ShadowRepo::open(root).unwrap();
    write(root, "a", b"1");
    let a = repo.snapshot("r1", "a", at(0)).unwrap().id;
    write(root, "a", b"2");
    let b = repo.snapshot("r2", "b", at(1)).unwrap().id;
    assert_eq!(repo.resolve(&a.as_str()[..10]).unwrap(), a);
    assert_eq!(repo.resolve(&b.as_str()[..7].to_uppercase()).unwrap(), b);
    assert!(matches!(
        repo.resolve("abc"),
        Err(SnapshotError::InvalidSnapshotId(_))
    ));
    assert!(matches!(
        repo.resolve("not-hex"),
        Err(SnapshotError::InvalidSnapshotId(_))
    ));
    // A prefix that matches neither.
    let unused = (0..16u8)
        .map(|n| format!("{n:x}000"))
        .find(|p| !a.as_str().starts_with(p) && !b.as_str().starts_with(p))
        .unwrap();
    let err = repo.resolve(&unused).unwrap_err();
    assert!(matches!(err, SnapshotError::UnknownSnapshot(_)), "{err}");
    // The snapshot of another run cannot be restored into this one.
    let err = repo.restore("r1", &b).unwrap_err();
    assert!(matches!(err, SnapshotError::NotInRun { .. }), "{err}");
    let err = repo.restore("no-such-run", &a).unwrap_err();
    assert!(matches!(err, SnapshotError::NoSnapshots(_)), "{err}");
    assert!(matches!(
        repo.snapshot("../evil", "x", at(0)),
        Err(SnapshotError::InvalidRunId(_))
    ));
}

#[test]
fn diff_shows_changes_since_the_first_snapshot_or_between_two() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "keep.txt", b"unchanged\n");
    write(root, "edit.txt", b"old line\n");
    let repo = ShadowRepo::open(root).unwrap();
    let first = repo.snapshot("r", "start", at(0)).unwrap().id;
    write(root, "edit.txt", b"new line\n");
    let second = repo.snapshot("r", "edit", at(1)).unwrap().id;
    write(root, "added now.txt", b"fresh\n");

    let now = repo.diff("r", None, None, DiffFormat::Patch).unwrap();
    assert!(now.contains("-old line\n+new line\n"), "{now}");
    assert!(now.contains("+fresh\n"), "untracked files count: {now}");
    assert!(!now.contains("keep.txt"), "{now}");
    let between = repo
        .diff("r", Some(&first), Some(&second), DiffFormat::Patch)
        .unwrap();
    assert!(
        between.contains("+new line") && !between.contains("fresh"),
        "{between}"
    );
    let stat = repo
        .diff("r", Some(&second), None, DiffFormat::Stat)
        .unwrap();
    assert!(
        stat.contains("added now.txt") && stat.contains("1 file changed"),
        "{stat}"
    );
    // Diffing the workspace does not move the run's chain or its index.
    assert_eq!(repo.latest("r").unwrap(), Some(second));
    assert_eq!(
        repo.snapshot("r", "x", at(2)).unwrap().change,
        Change::Created,
        "the new file is still new to the run"
    );
    assert!(matches!(
        repo.diff("nothing", None, None, DiffFormat::Patch),
        Err(SnapshotError::NoSnapshots(_))
    ));
}

#[test]
fn open_is_idempotent_and_survives_a_half_made_repository() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "f", b"x");
    // What a crash during creation could look like: a directory without the marker.
    let state = baton_state::StateDir::for_workspace(root);
    std::fs::create_dir_all(state.shadow_git().join("objects")).unwrap();
    std::fs::write(state.shadow_git().join("HEAD"), "garbage").unwrap();
    let repo = ShadowRepo::open(root).unwrap();
    let snap = repo.snapshot("r", "s", at(0)).unwrap();
    let moved_aside = std::fs::read_dir(state.root())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("shadow.git.broken-")
        })
        .count();
    assert_eq!(
        moved_aside, 1,
        "the broken directory is kept, out of the way"
    );
    // Opening again (also from several threads at once) keeps everything.
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let root = root.to_path_buf();
            std::thread::spawn(move || ShadowRepo::open(&root).unwrap().latest("r").unwrap())
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), Some(snap.id.clone()));
    }
    // A fresh workspace opened by many threads at once ends with one good repository.
    let fresh = tempfile::tempdir().unwrap();
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let root = fresh.path().to_path_buf();
            std::thread::spawn(move || {
                let repo = ShadowRepo::open(&root).unwrap();
                repo.snapshot(&format!("run{i}"), "s", at(0)).unwrap()
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn debris_of_a_killed_process_does_not_block_the_next_snapshot_or_restore() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "f", b"v1\n");
    let repo = ShadowRepo::open(root).unwrap();
    let first = repo.snapshot("r", "s", at(0)).unwrap().id;
    let git_dir = repo.git_dir().to_path_buf();
    // A git killed mid-command: a temporary index with its lock, and a stale ref lock.
    std::fs::write(git_dir.join("baton-index/r.tmp-1-2-3"), b"partial").unwrap();
    std::fs::write(git_dir.join("baton-index/r.tmp-1-2-3.lock"), b"").unwrap();
    let ref_lock = git_dir.join("refs/baton/runs/r.lock");
    std::fs::write(&ref_lock, b"").unwrap();
    let old = std::process::Command::new("touch")
        .args(["-d", "1 hour ago"])
        .arg(&ref_lock)
        .status()
        .unwrap();
    assert!(old.success());
    write(root, "f", b"v2\n");
    let second = repo.snapshot("r", "s2", at(1)).unwrap();
    assert_eq!(second.change, Change::Created);
    // A restore interrupted half-way: some files already back, others not.
    write(root, "g", b"new\n");
    write(root, "f", b"v1\n");
    repo.restore("r", &first).unwrap();
    assert_eq!(tree(root, &[]).len(), 1);
    assert_eq!(std::fs::read(root.join("f")).unwrap(), b"v1\n");
}

#[test]
fn concurrent_runs_snapshot_the_same_workspace_without_sharing_a_lock() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().to_path_buf();
    for i in 0..50 {
        write(
            &root,
            &format!("d{}/f{i}", i % 5),
            format!("{i}\n").as_bytes(),
        );
    }
    ShadowRepo::open(&root).unwrap();
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let root = root.clone();
            std::thread::spawn(move || {
                let repo = ShadowRepo::open(&root).unwrap();
                for n in 0..5 {
                    repo.snapshot(&format!("run{t}"), &format!("{n}"), at(n))
                        .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let repo = ShadowRepo::open(&root).unwrap();
    for t in 0..4 {
        assert_eq!(repo.list(&format!("run{t}")).unwrap().len(), 1);
    }
}

#[test]
fn a_repository_of_the_old_layout_is_moved_out_of_the_workspace_with_its_snapshots() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "f", b"1\n");
    let repo = ShadowRepo::open(root).unwrap();
    let first = repo.snapshot("r", "s", at(0)).unwrap().id;
    // The old layout: the repository in `<workspace>/.baton/shadow.git`.
    let state = baton_state::StateDir::for_workspace(root);
    std::fs::create_dir_all(root.join(".baton")).unwrap();
    std::fs::rename(state.shadow_git(), root.join(".baton/shadow.git")).unwrap();
    std::fs::write(root.join(".baton/config.toml"), "model = \"m\"\n").unwrap();

    write(root, "f", b"2\n");
    let repo = ShadowRepo::open(root).unwrap();
    assert_eq!(repo.git_dir(), state.shadow_git());
    assert!(!root.join(".baton/shadow.git").exists());
    assert!(
        root.join(".baton/config.toml").is_file(),
        "the user's file stays"
    );
    assert_eq!(repo.latest("r").unwrap(), Some(first.clone()));
    repo.snapshot("r", "s2", at(1)).unwrap();
    repo.restore("r", &first).unwrap();
    assert_eq!(std::fs::read(root.join("f")).unwrap(), b"1\n");
}

#[test]
fn build_outputs_are_left_out_without_a_gitignore_and_a_workspace_rule_takes_one_back() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "src/main.rs", b"fn main() {}\n");
    write(root, "target/debug/app", b"\x7fELF");
    write(root, "web/node_modules/x/index.js", b"x\n");
    write(root, "py/__pycache__/m.cpython-311.pyc", b"\0");
    write(root, ".venv/bin/python", b"#!\n");
    let repo = ShadowRepo::open(root).unwrap();
    let snap = repo.snapshot("r", "s", at(0)).unwrap();
    assert_eq!(
        paths(&repo.changed_paths(None, &snap.id).unwrap()),
        ["src/main.rs"]
    );
    // The workspace's own rules come after baton's defaults.
    write(root, ".gitignore", b"!target/\n");
    let next = repo.snapshot("r", "s", at(1)).unwrap();
    assert_eq!(
        paths(&repo.changed_paths(Some(&snap.id), &next.id).unwrap()),
        [".gitignore", "target/debug/app"]
    );
}

#[test]
fn an_oversized_file_is_left_out_with_a_warning_and_a_full_repository_takes_no_snapshot() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path();
    write(root, "small.txt", b"small\n");
    // Sparse: nothing is written, and git never reads it.
    let big = std::fs::File::create(root.join("data.bin")).unwrap();
    big.set_len(baton_snapshot::MAX_FILE_BYTES + 1).unwrap();
    let repo = ShadowRepo::open(root).unwrap();
    let snap = repo.snapshot("r", "s", at(0)).unwrap();
    assert_eq!(
        paths(&repo.changed_paths(None, &snap.id).unwrap()),
        ["small.txt"]
    );
    assert!(
        snap.warnings
            .iter()
            .any(|w| w.contains("data.bin") && w.contains("left out")),
        "{:?}",
        snap.warnings
    );

    // A repository past its bound refuses, saying why and what to do.
    let filler = std::fs::File::create(repo.git_dir().join("objects/filler")).unwrap();
    filler
        .set_len(baton_snapshot::MAX_REPOSITORY_BYTES + 1)
        .unwrap();
    write(root, "small.txt", b"changed\n");
    let err = repo.snapshot("r", "s", at(1)).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("MiB") && text.contains(".gitignore") && text.contains("shadow.git"),
        "{text}"
    );
    assert_eq!(repo.list("r").unwrap().len(), 1);
}
