#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Red-team finding 2 (issue 15), replayed: a command wrote a `filter.*.clean` driver into
//! `.baton/shadow.git/config` and `* filter=…` into its `info/attributes`, and the next
//! snapshot's `git add` ran the driver as baton's user, outside the sandbox. Each test plants
//! one way to make git run a program and checks that the next snapshot runs nothing, still
//! snapshots exactly, and leaves baton's own configuration in place.

mod support;

use std::path::Path;

use baton_snapshot::{Change, ShadowRepo};
use support::*;

/// A program that leaves `proof` behind if git runs it.
fn driver(dir: &Path, proof: &Path) -> String {
    let script = dir.join("driver.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ntouch '{}'\ncat\n", proof.display()),
    )
    .unwrap();
    set_executable(&script, true);
    script.display().to_string()
}

/// The shadow repository now lives outside the workspace; these attacks plant into it directly
/// (what a command could do if it ever got write access there, or in the old layout).
fn shadow(root: &Path) -> std::path::PathBuf {
    baton_state::StateDir::for_workspace(root).shadow_git()
}

fn append(path: &Path, text: &str) {
    let mut old = std::fs::read_to_string(path).unwrap_or_default();
    old.push_str(text);
    std::fs::write(path, old).unwrap();
}

/// Snapshots after `plant` and checks nothing ran and the snapshot holds the files as they are.
fn assert_planted_driver_never_runs(plant: impl Fn(&Path, &str)) {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = ws.path();
    let proof = outside.path().join("ran");
    write(root, "src/main.rs", b"fn main() {}\n");
    let repo = ShadowRepo::open(root).unwrap();
    repo.snapshot("run-1", "run_start", at(0)).unwrap();
    let config_before = std::fs::read(shadow(root).join("config")).unwrap();

    // Planted as a command of the old layout could (the repository was inside the workspace).
    let program = driver(outside.path(), &proof);
    plant(root, &program);
    write(root, "src/main.rs", b"fn main() { changed() }\n");
    let repo = ShadowRepo::open(root).unwrap();
    let snap = repo.snapshot("run-1", "after_tools", at(1)).unwrap();
    assert_eq!(snap.change, Change::Created);
    assert!(
        !proof.exists(),
        "git ran a program planted in the shadow repository"
    );
    assert_eq!(
        std::fs::read(shadow(root).join("config")).unwrap(),
        config_before,
        "baton's configuration was not restored"
    );
    // The snapshot holds the bytes as they are (no filter rewrote them), and restores them.
    write(root, "src/main.rs", b"something else\n");
    repo.restore("run-1", &snap.id).unwrap();
    assert_eq!(
        std::fs::read(root.join("src/main.rs")).unwrap(),
        b"fn main() { changed() }\n"
    );
    assert!(
        !proof.exists(),
        "git ran a program planted in the shadow repository"
    );
}

#[test]
fn a_clean_filter_written_into_the_shadow_config_never_runs() {
    assert_planted_driver_never_runs(|root, program| {
        append(
            &shadow(root).join("config"),
            &format!("[filter \"evil\"]\n\tclean = {program}\n\tsmudge = {program}\n"),
        );
        std::fs::write(shadow(root).join("info/attributes"), "* filter=evil\n").unwrap();
        std::fs::write(root.join(".gitattributes"), "* filter=evil\n").unwrap();
    });
}

#[test]
fn an_fsmonitor_or_hooks_written_into_the_shadow_repository_never_run() {
    assert_planted_driver_never_runs(|root, program| {
        append(
            &shadow(root).join("config"),
            &format!("[core]\n\tfsmonitor = {program}\n\thooksPath = {}\n", {
                let hooks = root.join("planted-hooks");
                std::fs::create_dir_all(&hooks).unwrap();
                for hook in ["pre-commit", "post-commit", "reference-transaction"] {
                    std::fs::copy(program, hooks.join(hook)).unwrap();
                }
                hooks.display().to_string()
            }),
        );
    });
}

#[test]
fn a_redirect_to_another_common_directory_or_an_include_never_applies() {
    assert_planted_driver_never_runs(|root, program| {
        // A repository of the attacker's, with a driver, named as the common directory.
        let evil = root.join("evil.git");
        std::fs::create_dir_all(evil.join("info")).unwrap();
        std::fs::write(
            evil.join("config"),
            format!("[filter \"evil\"]\n\tclean = {program}\n"),
        )
        .unwrap();
        std::fs::write(evil.join("info/attributes"), "* filter=evil\n").unwrap();
        std::fs::write(shadow(root).join("commondir"), evil.display().to_string()).unwrap();
        append(
            &shadow(root).join("config"),
            &format!("[include]\n\tpath = {}\n", evil.join("config").display()),
        );
    });
}

#[test]
fn a_config_replaced_by_a_symlink_is_replaced_not_written_through() {
    let victim_dir = tempfile::tempdir().unwrap();
    let victim = victim_dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let victim_path = victim.clone();
    assert_planted_driver_never_runs(move |root, _| {
        let config = shadow(root).join("config");
        std::fs::remove_file(&config).unwrap();
        std::os::unix::fs::symlink(&victim_path, &config).unwrap();
        // The attributes directory itself swapped for a symlink to somewhere else.
        let info = shadow(root).join("info");
        std::fs::remove_dir_all(&info).unwrap();
        std::os::unix::fs::symlink(victim_dir_of(&victim_path), &info).unwrap();
    });
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(!victim.parent().unwrap().join("attributes").exists());
}

fn victim_dir_of(victim: &Path) -> &Path {
    victim.parent().unwrap()
}

/// Red-team round 2, finding 1: a repository the agent made inside the workspace, with a clean
/// filter in its own config and `* filter=…` in its own `.git/info/attributes`. Once the nested
/// repository was a gitlink in the run's index, the next `git add` asked it for its status — a
/// `git status` under the nested repository's configuration, which ran the filter.
fn plant_nested_filter(root: &Path, program: &str) -> std::path::PathBuf {
    let nested = root.join("vendor/evil");
    std::fs::create_dir_all(&nested).unwrap();
    user_git(&nested, &["init", "-q"]);
    write(&nested, "f", b"one\n");
    user_git(&nested, &["add", "f"]);
    user_git(&nested, &["commit", "-qm", "one"]);
    user_git(&nested, &["config", "filter.evil.clean", program]);
    std::fs::write(nested.join(".git/info/attributes"), "* filter=evil\n").unwrap();
    nested
}

/// Makes `path`'s stat data differ from what any index holds (so git must look at its content).
fn touch_later(path: &Path) {
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(later)
        .unwrap();
}

#[test]
fn a_filter_planted_in_a_nested_repository_never_runs() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = ws.path();
    let proof = outside.path().join("ran");
    write(root, "top.txt", b"top\n");
    let repo = ShadowRepo::open(root).unwrap();
    let first = repo.snapshot("run-1", "run_start", at(0)).unwrap();
    let nested = plant_nested_filter(root, &driver(outside.path(), &proof));
    let second = repo.snapshot("run-1", "after_tools", at(1)).unwrap();
    touch_later(&nested.join("f"));
    write(root, "top.txt", b"top 2\n");
    let third = repo.snapshot("run-1", "after_tools", at(2)).unwrap();
    assert!(
        !proof.exists(),
        "a snapshot ran the nested repository's filter"
    );
    touch_later(&nested.join("f"));
    let diff = repo
        .diff("run-1", None, None, baton_snapshot::DiffFormat::Stat)
        .unwrap();
    assert!(!proof.exists(), "a diff ran the nested repository's filter");
    assert!(
        diff.contains("top.txt") && !diff.contains("vendor"),
        "{diff}"
    );
    // Skipped, not pointed at: the nested repository is in no snapshot.
    assert_eq!(second.change, Change::Unchanged);
    assert!(
        repo.changed_paths(None, &third.id)
            .unwrap()
            .iter()
            .all(|p| !p.starts_with("vendor")),
    );
    // A restore leaves it alone.
    repo.restore("run-1", &first.id).unwrap();
    assert!(
        !proof.exists(),
        "a restore ran the nested repository's filter"
    );
    assert_eq!(std::fs::read(nested.join("f")).unwrap(), b"one\n");
    assert_eq!(std::fs::read(root.join("top.txt")).unwrap(), b"top\n");
}

/// A run index of an earlier version holds the nested repository as a gitlink: it is dropped
/// before `add` could ask the nested repository anything.
#[test]
fn a_gitlink_left_in_an_older_index_never_makes_git_enter_the_nested_repository() {
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let root = ws.path();
    let proof = outside.path().join("ran");
    write(root, "top.txt", b"top\n");
    let repo = ShadowRepo::open(root).unwrap();
    repo.snapshot("run-1", "run_start", at(0)).unwrap();
    let nested = plant_nested_filter(root, &driver(outside.path(), &proof));
    // What an earlier version's `git add --all` left in the run's index.
    let index = shadow(root).join("baton-index/run-1");
    let old_git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .env("GIT_DIR", shadow(root))
            .env("GIT_WORK_TREE", root)
            .env("GIT_INDEX_FILE", &index)
            .args(args)
            .current_dir(root)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    old_git(&["add", "--all", "--", ":/"]);
    assert!(
        old_git(&["ls-files", "--stage"]).contains("160000"),
        "the older index holds no gitlink"
    );
    touch_later(&nested.join("f"));
    write(root, "top.txt", b"top 2\n");
    let snap = repo.snapshot("run-1", "after_tools", at(1)).unwrap();
    assert!(!proof.exists(), "a snapshot entered the nested repository");
    assert!(
        repo.changed_paths(None, &snap.id)
            .unwrap()
            .iter()
            .all(|p| !p.starts_with("vendor")),
    );
}
