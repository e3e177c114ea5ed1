//! baton's own git — snapshots, `baton diff`, rollbacks, worktrees — run in the sandbox the
//! run's commands get (defence in depth, red-team round 2): `baton-snapshot` already runs no
//! program the workspace could configure, and gives git no environment but `PATH` and its own
//! settings; here git also runs without network, under the sandbox's file rules and seccomp,
//! so anything it might still be made to start is confined like a command.
//!
//! Installed by [`crate::sandbox_trampoline`] (the program's binary is the trampoline the
//! sandbox re-executes). Where this machine cannot sandbox, git runs as before and a warning
//! says so once.

use std::any::Any;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use baton_sandbox::{BackendChoice, Limits, Mode, Sandbox, SandboxConfig};
use baton_snapshot::{GitInvocation, GitLauncher};

/// Starts git through `baton __sandbox-exec`.
struct SandboxedGit {
    trampoline: PathBuf,
}

impl SandboxedGit {
    /// The workspace writable (a restore writes it), the shadow repository too, nothing else;
    /// no network; no limits that a large first snapshot could hit.
    fn config(git_dir: &std::path::Path) -> SandboxConfig {
        SandboxConfig {
            mode: Mode::WorkspaceWrite,
            allow_network: false,
            limits: Limits {
                cpu_secs: None,
                memory_bytes: None,
                max_processes: None,
                file_size_bytes: None,
                open_files: None,
                tmp_bytes: Some(64 << 20),
            },
            // git's own settings (identity, index, directories); names that look like secrets
            // are dropped by the sandbox anyway.
            env_allowlist: vec!["GIT_*".into()],
            backend: BackendChoice::Auto,
            allow_unsandboxed: false,
            writable_paths: vec![git_dir.to_path_buf()],
            ..SandboxConfig::default()
        }
    }
}

impl GitLauncher for SandboxedGit {
    fn command(
        &self,
        invocation: &GitInvocation<'_>,
    ) -> std::io::Result<(Command, Box<dyn Any + Send>)> {
        // Whether this machine can sandbox is found out once, at the first git call (not at
        // every start of the binary: the probe starts a process).
        static USABLE: OnceLock<bool> = OnceLock::new();
        let usable = *USABLE.get_or_init(|| {
            match Sandbox::new(Self::config(invocation.git_dir), &self.trampoline) {
                Ok(_) => true,
                Err(e) => {
                    tracing::warn!(
                        "baton's own git (snapshots, diff, rollback) runs unsandboxed: {e}"
                    );
                    false
                }
            }
        });
        if !usable {
            let mut cmd = Command::new(&invocation.argv[0]);
            cmd.args(&invocation.argv[1..])
                .current_dir(invocation.work_tree)
                .env_clear()
                .envs(invocation.env.iter().cloned());
            return Ok((cmd, Box::new(())));
        }
        let sandbox = Sandbox::new(Self::config(invocation.git_dir), &self.trampoline)
            .map_err(std::io::Error::other)?;
        let prepared = sandbox
            .prepare(
                invocation.work_tree,
                invocation.argv,
                invocation.env.iter().cloned(),
            )
            .map_err(std::io::Error::other)?;
        Ok((prepared.command, Box::new(prepared.guard)))
    }
}

/// Runs baton's git confined from now on (where this machine can sandbox: see the module).
pub(crate) fn confine() {
    if let Ok(trampoline) = std::env::current_exe() {
        baton_snapshot::launch_git_with(Box::new(SandboxedGit { trampoline }));
    }
}
