//! [`Sandbox`]: turns a command line into a confined `Command` (trampoline, bubblewrap,
//! allowlisted environment, private tmp, pids cgroup) and cleans up after it.

use crate::bwrap::{self, BwrapInput};
use crate::cgroup::PidsCgroup;
use crate::platform::{self, Platform};
use crate::spec::Backend;
use crate::spec::{DEFAULT_ENV_ALLOWLIST, ExecSpec, Mode, SandboxConfig};
use crate::trampoline::SUBCOMMAND;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Substrings (upper case) of variable names that never reach a command, allowlisted or not.
const SECRET_MARKERS: [&str; 4] = ["KEY", "TOKEN", "SECRET", "PASSWORD"];

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "this platform cannot sandbox commands ({0}); baton refuses to run them unconfined. \
         Install bubblewrap (`apt-get install bubblewrap`) or use a kernel with Landlock, or \
         pass --dangerously-unsandboxed to run commands WITHOUT any isolation"
    )]
    Unavailable(String),
    #[error("{0}")]
    Backend(String),
    #[error("workspace {path}: {source}")]
    Workspace {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("creating the private temporary directory: {0}")]
    Tmp(std::io::Error),
    #[error(
        "baton's state directory {} lies inside {}, which commands may write: under Landlock \
         they could rewrite the journal. Set BATON_STATE_DIR to a directory outside it, or use \
         the bubblewrap backend",
        state.display(),
        writable.display()
    )]
    StateReachable { state: PathBuf, writable: PathBuf },
}

/// A configured sandbox; each command names the workspace it may write.
#[derive(Debug, Clone)]
pub struct Sandbox {
    config: SandboxConfig,
    /// `None` only for [`Sandbox::unconfined`].
    trampoline: Option<PathBuf>,
    backend: Backend,
    platform: Option<&'static Platform>,
}

/// A confined command ready to spawn, and what must be cleaned up after it. Keep the guard
/// alive until the command and everything it started are done: dropping it kills whatever is
/// left in the command's cgroup and removes the private tmp.
#[derive(Debug)]
pub struct Prepared {
    pub command: Command,
    pub guard: Guard,
}

#[derive(Debug)]
pub struct Guard {
    tmp: PathBuf,
    cgroup: Option<PidsCgroup>,
    memory: Option<crate::cgroup::MemoryCgroup>,
}

impl Guard {
    /// Kills the tree of a command that is still running (not reaped: its pid cannot have been
    /// reused): every descendant of the trampoline — whose supervisor is the subreaper of what
    /// called setsid or double-forked — then what [`Guard::kill_tree`] kills.
    pub fn kill_running_tree(&self, pid: u32) {
        if let Ok(pid) = i32::try_from(pid) {
            crate::supervisor::kill_tree_from_outside(pid);
        }
        self.kill_tree(Some(pid));
    }

    /// Kills the command's process group and, where there is one, every process in its cgroup
    /// (which catches those that called setsid).
    pub fn kill_tree(&self, pgid: Option<u32>) {
        if let Some(pid) = pgid
            .and_then(|p| i32::try_from(p).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            // ESRCH (already gone) is the expected outcome after a normal exit.
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        if let Some(cg) = &self.cgroup {
            cg.kill_all();
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.cgroup.take();
        self.memory.take();
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

/// Private tmp directories are named `baton-sbx-PID-RANDOM` in the system's temp directory.
const TMP_PREFIX: &str = "baton-sbx-";

/// A new private tmp for one command: a random name created exclusively (`mkdtemp`: mode 0700,
/// owned by this process's user, never a directory or symlink someone else put there), its
/// canonical path returned. Removed by the command's [`Guard`].
fn private_tmp() -> Result<PathBuf, SandboxError> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix(&format!("{TMP_PREFIX}{}-", std::process::id()))
        // Created with this mode (tempfile's default for directories follows the umask).
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .map_err(SandboxError::Tmp)?
        .keep();
    dir.canonicalize().map_err(SandboxError::Tmp)
}

/// Removes the private tmp directories a killed baton left behind: those of this user whose
/// process is gone. Never follows a symlink; what cannot be removed is left alone.
pub fn remove_stale_private_tmps() -> usize {
    use std::os::unix::fs::MetadataExt;
    let me = rustix::process::getuid().as_raw();
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(TMP_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        let alive = Path::new(&format!("/proc/{pid}")).exists();
        if meta.is_dir()
            && meta.uid() == me
            && !alive
            && std::fs::remove_dir_all(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

impl Sandbox {
    /// `trampoline` is an executable that dispatches [`SUBCOMMAND`] to
    /// [`crate::trampoline::main`] (for baton: `std::env::current_exe()`).
    pub fn new(config: SandboxConfig, trampoline: &Path) -> Result<Sandbox, SandboxError> {
        remove_stale_private_tmps();
        let platform = platform::detect(trampoline);
        let backend = platform
            .backend(config.backend)
            .map_err(SandboxError::Backend)?;
        if backend == Backend::Unsandboxed && !config.allow_unsandboxed {
            let why = platform
                .bwrap_problem
                .clone()
                .unwrap_or_else(|| "no bubblewrap".into());
            return Err(SandboxError::Unavailable(format!(
                "{why}; Landlock is not enforced by this kernel"
            )));
        }
        Ok(Sandbox {
            config,
            trampoline: Some(trampoline.to_path_buf()),
            backend,
            platform: Some(platform),
        })
    }

    /// Runs commands directly, with the allowlisted environment and a private tmp but no
    /// isolation, no limits and no parent-death signal. For tests of code that spawns through a
    /// sandbox without being about isolation (they have no trampoline binary); baton's own
    /// binary never uses it.
    pub fn unconfined(config: SandboxConfig) -> Sandbox {
        Sandbox {
            config,
            trampoline: None,
            backend: Backend::Unsandboxed,
            platform: None,
        }
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The same sandbox in `read-only` mode: commands may write only their private tmp (a
    /// planning run explores the workspace with it, and must not change it).
    pub fn read_only(&self) -> Sandbox {
        let mut sandbox = self.clone();
        sandbox.config.mode = Mode::ReadOnly;
        sandbox
    }

    pub fn config(&self) -> &SandboxConfig {
        &self.config
    }

    /// The same sandbox with its own filesystem mode and network switch: an MCP server is
    /// configured per server (`sandbox`, `allow_network`), not by the run's command settings.
    pub fn with_mode_and_network(&self, mode: Mode, allow_network: bool) -> Sandbox {
        let mut sandbox = self.clone();
        sandbox.config.mode = mode;
        sandbox.config.allow_network = allow_network;
        sandbox
    }

    pub fn platform(&self) -> Option<&'static Platform> {
        self.platform
    }

    /// Builds the confined command for `argv` (program and arguments), run in `workspace`
    /// (the directory it may write), with an environment built from `parent_env` through the
    /// allowlist.
    pub fn prepare(
        &self,
        workspace: &Path,
        argv: &[OsString],
        parent_env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<Prepared, SandboxError> {
        let workspace = workspace
            .canonicalize()
            .map_err(|source| SandboxError::Workspace {
                path: workspace.to_path_buf(),
                source,
            })?;
        let (Some(platform), Some(trampoline)) = (self.platform, &self.trampoline) else {
            return self.prepare_unconfined(&workspace, argv, parent_env);
        };
        let parent_env: Vec<(OsString, OsString)> = parent_env.into_iter().collect();
        let hidden = crate::credentials::for_command(
            &self.config,
            self.backend,
            platform.root,
            &workspace,
            &parent_env,
        );
        let (masked_dirs, masked_files): (Vec<PathBuf>, Vec<PathBuf>) =
            hidden.deny.iter().cloned().partition(|p| p.is_dir());
        let tmp = private_tmp()?;
        let max = self.config.limits.max_processes;
        let cgroup = match (&platform.cgroup_base, max) {
            (Some(base), Some(max)) if self.backend != Backend::Unsandboxed => {
                PidsCgroup::create(base, max).ok()
            }
            _ => None,
        };
        let memory = match (
            &platform.memory_cgroup_base,
            self.config.limits.memory_bytes,
        ) {
            (Some(base), Some(max)) if self.backend != Backend::Unsandboxed => {
                crate::cgroup::MemoryCgroup::create(base, max).ok()
            }
            _ => None,
        };
        let guard = Guard {
            tmp,
            cgroup,
            memory,
        };
        let tmp = guard.tmp.clone();

        let sandboxed = self.backend != Backend::Unsandboxed;
        let unshare_user = !platform.root;
        let protected = crate::protect::protected_paths(&workspace);
        if self.backend != Backend::Unsandboxed {
            // `.baton/` is mounted read-only (bubblewrap, or Landlock's own mount namespace)
            // only where it exists.
            crate::protect::make_mount_points(&workspace);
        }
        let (wrapper, tmp_inside) = match self.backend {
            Backend::Bwrap => (
                bwrap::argv(&BwrapInput {
                    bwrap: platform.bwrap.as_deref().unwrap_or(Path::new("bwrap")),
                    mode: self.config.mode,
                    allow_network: self.config.allow_network,
                    workspace: &workspace,
                    private_tmp: &tmp,
                    tmp_bytes: self.config.limits.tmp_bytes,
                    extra_writable: &self.config.writable_paths,
                    protected: &protected,
                    socket_masks: &socket_masks(),
                    unix_sockets: &self.config.unix_sockets,
                    masked_dirs: &masked_dirs,
                    masked_files: &masked_files,
                    revealed: &hidden.reveal,
                    trampoline,
                    unshare_user,
                }),
                if self.config.mode == Mode::FullAccess {
                    tmp.clone()
                } else {
                    PathBuf::from("/tmp")
                },
            ),
            _ => (Vec::new(), tmp.clone()),
        };
        let mut writable = vec![tmp_inside.clone()];
        if self.config.mode == Mode::WorkspaceWrite {
            writable.push(workspace.clone());
            writable.extend(self.config.writable_paths.iter().cloned());
        }
        if self.backend == Backend::Landlock {
            crate::protect::check_landlock_reach(&protected[0], &writable)?;
        }
        // Without a user namespace of its own, RLIMIT_NPROC counts all of the user's processes.
        let own_user_ns = self.backend == Backend::Bwrap && unshare_user;
        let nproc_offset = if own_user_ns || platform.root {
            0
        } else {
            count_user_processes()
        };
        let spec = ExecSpec {
            mode: self.config.mode,
            allow_network: self.config.allow_network,
            allow_unix_sockets: !self.config.unix_sockets.is_empty(),
            limits: self.config.limits.clone(),
            nproc_offset,
            writable,
            protected: protected.clone(),
            deny_read: hidden.deny,
            reveal_read: hidden.reveal,
            landlock: sandboxed && platform.landlock != "none",
            seccomp: sandboxed && platform.seccomp,
            cgroup_procs: guard.cgroup.as_ref().map(PidsCgroup::procs_file),
            memory_cgroup_procs: guard
                .memory
                .as_ref()
                .map(crate::cgroup::MemoryCgroup::procs_file),
            parent_pid: Some(rustix::process::getpid().as_raw_nonzero().get()),
            wrapper,
            trampoline: trampoline.clone(),
            namespaces: match self.backend {
                Backend::Bwrap => crate::spec::Namespaces::Bwrap,
                Backend::Landlock if platform.namespaces => crate::spec::Namespaces::Private,
                _ => crate::spec::Namespaces::Host,
            },
            supervisor_pid: None,
        };
        let json =
            serde_json::to_string(&spec).map_err(|e| SandboxError::Backend(e.to_string()))?;

        let mut command = Command::new(trampoline);
        command
            .arg(SUBCOMMAND)
            .arg("--spec")
            .arg(json)
            .arg("--")
            .args(argv)
            .current_dir(&workspace)
            .env_clear()
            .envs(self.environment(parent_env, &tmp_inside))
            .envs(crate::protect::git_boundary(&workspace));
        // The trampoline starts a session of its own first thing (`setsid`): its own process
        // group, with its pid as id, so a timeout can kill everything the command started, and
        // no controlling terminal. (`process_group(0)` here would make it a group leader, which
        // `setsid` refuses.)
        Ok(Prepared { command, guard })
    }

    fn prepare_unconfined(
        &self,
        workspace: &Path,
        argv: &[OsString],
        parent_env: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Result<Prepared, SandboxError> {
        let tmp = private_tmp()?;
        let Some((program, args)) = argv.split_first() else {
            return Err(SandboxError::Backend("empty command".into()));
        };
        let mut command = Command::new(program);
        command
            .args(args)
            .current_dir(workspace)
            .env_clear()
            .envs(self.environment(parent_env, &tmp))
            .envs(crate::protect::git_boundary(workspace));
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        Ok(Prepared {
            command,
            guard: Guard {
                tmp,
                cgroup: None,
                memory: None,
            },
        })
    }

    /// The allowlisted environment, with HOME and TMPDIR pointing at the private tmp.
    pub fn environment(
        &self,
        parent_env: impl IntoIterator<Item = (OsString, OsString)>,
        tmp: &Path,
    ) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> = Vec::new();
        let mut home = None;
        for (name, value) in parent_env {
            let n = name.to_string_lossy();
            if n == "HOME" {
                home = Some(PathBuf::from(&value));
            }
            if is_allowed(&n, &self.config.env_allowlist) {
                env.push((name, value));
            }
        }
        // HOME moves to the private tmp; toolchains and git's identity found through it keep
        // working (those files are readable in the sandbox anyway).
        if let Some(home) = home {
            for (var, dir) in [
                ("CARGO_HOME", ".cargo"),
                ("RUSTUP_HOME", ".rustup"),
                ("GIT_CONFIG_GLOBAL", ".gitconfig"),
            ] {
                let path = home.join(dir);
                if !env.iter().any(|(n, _)| n == var) && path.exists() {
                    env.push((var.into(), path.into()));
                }
            }
        }
        env.push(("HOME".into(), tmp.into()));
        env.push(("TMPDIR".into(), tmp.into()));
        env
    }
}

/// Where host sockets live: `/run`, and `/var/run` where it is not a link to it.
fn socket_masks() -> Vec<PathBuf> {
    let mut masks = vec![PathBuf::from("/run")];
    let var_run = Path::new("/var/run");
    if std::fs::symlink_metadata(var_run).is_ok_and(|m| m.is_dir()) {
        masks.push(var_run.to_path_buf());
    }
    masks.retain(|m| m.is_dir());
    masks
}

/// Whether `name` may reach a command: allowlisted (exactly or by a `PREFIX*` entry) and not
/// named like a credential.
pub fn is_allowed(name: &str, extra: &[String]) -> bool {
    let upper = name.to_ascii_uppercase();
    if SECRET_MARKERS.iter().any(|m| upper.contains(m)) {
        return false;
    }
    DEFAULT_ENV_ALLOWLIST
        .iter()
        .copied()
        .chain(extra.iter().map(String::as_str))
        .any(|pattern| match pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == pattern,
        })
}

/// Processes (and threads: RLIMIT_NPROC counts both) of this real user, read from /proc.
fn count_user_processes() -> u64 {
    let uid = rustix::process::getuid().as_raw();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
        .filter_map(|status| {
            let real_uid = status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))?
                .split_whitespace()
                .next()?
                .parse::<u32>()
                .ok()?;
            let threads = status
                .lines()
                .find_map(|l| l.strip_prefix("Threads:"))?
                .trim()
                .parse::<u64>()
                .ok()?;
            (real_uid == uid).then_some(threads)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowlist_and_secrets() {
        let extra = vec!["MY_TOOL_*".to_string(), "EDITOR".to_string()];
        for ok in ["PATH", "LANG", "LC_ALL", "TERM", "MY_TOOL_HOME", "EDITOR"] {
            assert!(is_allowed(ok, &extra), "{ok}");
        }
        for no in [
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "MY_TOOL_SECRET",
            "LD_PRELOAD",
            "HOME",
            "SSH_AUTH_SOCK",
            "AWS_PROFILE",
        ] {
            assert!(!is_allowed(no, &extra), "{no}");
        }
    }
}
