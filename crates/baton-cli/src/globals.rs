//! The global options (`--workspace`, `--store`, `-v`) as the commands get them, and as the
//! baton processes they start (a supervised run's children, a detached supervisor) are given
//! them again.

use std::path::Path;

/// The global options, which children and detached supervisors are given again.
#[derive(Clone, Copy)]
pub struct Globals<'a> {
    pub workspace: &'a Path,
    pub store: Option<&'a str>,
    pub verbose: u8,
}

/// The global options as arguments (the store goes by environment, which keeps a database
/// password out of `ps`).
pub(crate) fn global_args(globals: Globals<'_>) -> Vec<String> {
    let mut args = vec![
        "--workspace".to_string(),
        globals.workspace.display().to_string(),
    ];
    if globals.verbose > 0 {
        args.push(format!("-{}", "v".repeat(usize::from(globals.verbose))));
    }
    args
}
