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
