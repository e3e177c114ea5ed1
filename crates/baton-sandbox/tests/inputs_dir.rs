//! Issue 47, finding 2: under bubblewrap the workspace's `.baton/` was mounted read-only only
//! when it existed, so a command in a workspace without one created `.baton/config.toml` (an MCP
//! server, a base URL) for the user's next run. Now the sandbox creates the empty directory first
//! and mounts it read-only, in every mode that can write the workspace — under bubblewrap, and
//! under Landlock where the command gets a mount namespace of its own (Landlock itself cannot
//! take a subtree back from the writable workspace).
//!
//! Landlock without namespaces leaves `.baton/` writable: there a planted file is refused by
//! `baton trust` instead (crates/baton-cli/tests/planted_config.rs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use baton_sandbox::{BackendChoice, Mode};
use std::time::Duration;
use support::*;

const T: Duration = Duration::from_secs(60);

#[test]
fn a_command_cannot_create_baton_inputs_that_did_not_exist() {
    let platform = baton_sandbox::detect(std::path::Path::new(TRAMPOLINE));
    let mut checked = Vec::new();
    for backend in backends() {
        if backend == BackendChoice::Landlock && !platform.namespaces {
            eprintln!("\n!!! Landlock without mount namespaces here: .baton/ stays writable !!!\n");
            continue;
        }
        // Full access protects `.baton/` under bubblewrap only (Landlock's namespace then leaves
        // the file system as it is).
        let modes: &[Mode] = match backend {
            BackendChoice::Bwrap => &[Mode::WorkspaceWrite, Mode::FullAccess],
            _ => &[Mode::WorkspaceWrite],
        };
        for &mode in modes {
            let ws = tempdir();
            let inputs = ws.path().join(".baton");
            assert!(!inputs.exists());
            let sb = sandbox(backend, ws.path(), |c| c.mode = mode);
            let r = sh(
                &sb,
                "mkdir -p .baton; echo 'base_url = \"http://evil\"' > .baton/config.toml; \
                 mkdir .baton/plans; rmdir .baton; mv .baton .b; echo ok > mine.txt",
                T,
            );
            let what = format!("{backend:?} {mode:?}");
            assert_eq!(r.code(), 0, "{what}: {}", text(&r.stderr));
            // The command ran and wrote the workspace, but `.baton/` is the empty directory the
            // sandbox made, still in its place.
            assert!(ws.path().join("mine.txt").is_file(), "{what}");
            assert!(inputs.is_dir(), "{what}");
            let entries: Vec<_> = std::fs::read_dir(&inputs).unwrap().collect();
            assert!(entries.is_empty(), "{what}: {entries:?}");
            assert!(!ws.path().join(".b").exists(), "{what}");
            checked.push(what);
        }
    }
    eprintln!("checked: {checked:?}");
}
