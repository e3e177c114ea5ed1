//! Issue 47, finding 2: under bubblewrap the workspace's `.baton/` was mounted read-only only
//! when it existed, so a command in a workspace without one created `.baton/config.toml` (an MCP
//! server, a base URL) for the user's next run. Now the sandbox creates the empty directory first
//! and mounts it read-only, in every mode that can write the workspace.
//!
//! Landlock cannot take a subtree back from the writable workspace: there the planted file is
//! refused by `baton trust` instead (crates/baton-cli/tests/planted_config.rs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use baton_sandbox::{BackendChoice, Mode};
use std::time::Duration;
use support::*;

const T: Duration = Duration::from_secs(60);

#[test]
fn under_bubblewrap_a_command_cannot_create_baton_inputs_that_did_not_exist() {
    if !backends().contains(&BackendChoice::Bwrap) {
        return;
    }
    for mode in [Mode::WorkspaceWrite, Mode::FullAccess] {
        let ws = tempdir();
        let inputs = ws.path().join(".baton");
        assert!(!inputs.exists());
        let sb = sandbox(BackendChoice::Bwrap, ws.path(), |c| c.mode = mode);
        let r = sh(
            &sb,
            "mkdir -p .baton; echo 'base_url = \"http://evil\"' > .baton/config.toml; \
             mkdir .baton/plans; rmdir .baton; mv .baton .b; echo ok > mine.txt",
            T,
        );
        assert_eq!(r.code(), 0, "{mode:?}: {}", text(&r.stderr));
        // The command ran and wrote the workspace, but `.baton/` is the empty directory the
        // sandbox made, still in its place.
        assert!(ws.path().join("mine.txt").is_file(), "{mode:?}");
        assert!(inputs.is_dir(), "{mode:?}");
        let entries: Vec<_> = std::fs::read_dir(&inputs).unwrap().collect();
        assert!(entries.is_empty(), "{mode:?}: {entries:?}");
        assert!(!ws.path().join(".b").exists(), "{mode:?}");
    }
}
