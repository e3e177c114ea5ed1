//! What a sandboxed command may do: the mode, the network switch, resource limits and the
//! environment allowlist, plus the serialized spec the trampoline applies in the child.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// How much of the filesystem a command may change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Nothing outside a private temporary directory is writable.
    ReadOnly,
    /// The workspace and a private temporary directory are writable.
    #[default]
    WorkspaceWrite,
    /// No filesystem confinement (explicit opt-in; baton warns). Limits, the environment
    /// allowlist and the network switch still apply.
    FullAccess,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::FullAccess => "full-access",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "read-only" => Ok(Mode::ReadOnly),
            "workspace-write" => Ok(Mode::WorkspaceWrite),
            "full-access" => Ok(Mode::FullAccess),
            other => Err(format!(
                "unknown sandbox mode '{other}'; use read-only, workspace-write or full-access"
            )),
        }
    }
}

/// Which isolation mechanism to use. `Auto` picks bubblewrap when it works, else Landlock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    #[default]
    Auto,
    Bwrap,
    Landlock,
}

impl FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<BackendChoice, String> {
        match s {
            "auto" | "" => Ok(BackendChoice::Auto),
            "bwrap" => Ok(BackendChoice::Bwrap),
            "landlock" => Ok(BackendChoice::Landlock),
            other => Err(format!(
                "unknown sandbox backend '{other}'; use auto, bwrap or landlock"
            )),
        }
    }
}

/// The backend that confines commands on this machine (what `BackendChoice` came to).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// bubblewrap namespaces (mount, pid, net, ipc, uts) + Landlock + seccomp + limits.
    Bwrap,
    /// Landlock + seccomp + limits, without namespaces.
    Landlock,
    /// Nothing confines the command (explicit opt-in only).
    Unsandboxed,
}

impl Backend {
    pub fn describe(self) -> &'static str {
        match self {
            Backend::Bwrap => "bwrap+landlock+seccomp",
            Backend::Landlock => "landlock+seccomp",
            Backend::Unsandboxed => "none (UNSANDBOXED)",
        }
    }
}

/// Resource limits of one command. `None` leaves the limit as baton's own process has it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// CPU seconds per process (RLIMIT_CPU).
    pub cpu_secs: Option<u64>,
    /// Address space per process in bytes (RLIMIT_AS).
    pub memory_bytes: Option<u64>,
    /// Processes and threads: RLIMIT_NPROC in the sandbox's user namespace, and a pids cgroup
    /// where one can be created (which is what holds for root).
    pub max_processes: Option<u64>,
    /// Largest file a process may write, in bytes (RLIMIT_FSIZE).
    pub file_size_bytes: Option<u64>,
    /// Open file descriptors per process (RLIMIT_NOFILE).
    pub open_files: Option<u64>,
    /// Size of the private `/tmp` in bytes (a tmpfs of this size under bubblewrap; not
    /// enforced under Landlock, where the private tmp is a directory on the host's).
    pub tmp_bytes: Option<u64>,
}

impl Default for Limits {
    /// Generous for builds and test suites, small enough that a runaway command cannot take a
    /// laptop down.
    fn default() -> Limits {
        Limits {
            cpu_secs: Some(1800),
            memory_bytes: Some(8 << 30),
            max_processes: Some(512),
            file_size_bytes: Some(2 << 30),
            open_files: Some(4096),
            tmp_bytes: Some(2 << 30),
        }
    }
}

/// Environment variables passed to commands by default (besides the user's extras). `HOME`
/// and `TMPDIR` are set by the sandbox itself.
pub const DEFAULT_ENV_ALLOWLIST: &[&str] = &[
    "PATH",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TERM",
    "TZ",
    "USER",
    "LOGNAME",
    "SHELL",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
];

/// The user-facing sandbox configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxConfig {
    pub mode: Mode,
    pub allow_network: bool,
    pub limits: Limits,
    /// Extra environment variable names (or `PREFIX_*` globs) passed to commands. Names that
    /// look like credentials are dropped anyway.
    pub env_allowlist: Vec<String>,
    pub backend: BackendChoice,
    /// Run commands unconfined when the platform cannot sandbox (explicit opt-in).
    pub allow_unsandboxed: bool,
    /// Extra directories writable in `workspace-write` mode (a build cache, say).
    pub writable_paths: Vec<PathBuf>,
    /// UNIX sockets commands may connect to. Empty (the default): no AF_UNIX socket can be made
    /// at all (`socketpair` still works), so no host socket — a database, docker, ssh-agent —
    /// is reachable. Non-empty: AF_UNIX sockets may be made; under bubblewrap `/run` and
    /// `/var/run` are masked but for these paths, under Landlock any socket path is reachable
    /// (Landlock cannot restrict them by path).
    pub unix_sockets: Vec<PathBuf>,
    /// Read-denied paths besides the built-in credential list (`~/` is the home directory).
    pub deny_read: Vec<PathBuf>,
    /// Paths commands may read although hidden (`~/` is the home directory): in the home
    /// directory, which is hidden but for its toolchains, or taken out of the built-in lists.
    pub allow_read: Vec<PathBuf>,
}

impl Default for SandboxConfig {
    fn default() -> SandboxConfig {
        SandboxConfig {
            mode: Mode::WorkspaceWrite,
            allow_network: false,
            limits: Limits::default(),
            env_allowlist: Vec::new(),
            backend: BackendChoice::Auto,
            allow_unsandboxed: false,
            writable_paths: Vec::new(),
            unix_sockets: Vec::new(),
            deny_read: Vec::new(),
            allow_read: Vec::new(),
        }
    }
}

/// What the trampoline applies in the child before it execs the command. Serialized as JSON on
/// its command line (it holds no secrets: the environment travels separately).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecSpec {
    pub mode: Mode,
    pub allow_network: bool,
    /// Whether AF_UNIX sockets may be made (the user allowlisted some socket paths).
    #[serde(default)]
    pub allow_unix_sockets: bool,
    pub limits: Limits,
    /// Added to `max_processes` for RLIMIT_NPROC: without a user namespace of its own the
    /// limit counts every process of the user, so baton adds the number already running.
    pub nproc_offset: u64,
    /// Directories writable beneath (workspace, private tmp, extras), as seen by the command.
    pub writable: Vec<PathBuf>,
    /// baton's own files (the workspace's `.baton/`, the state directory): bound read-only
    /// over the writable paths in the command's own mount namespace (Landlock backend).
    #[serde(default)]
    pub protected: Vec<PathBuf>,
    /// Paths Landlock's read rules leave out (credentials), canonical.
    #[serde(default)]
    pub deny_read: Vec<PathBuf>,
    /// Paths beneath a `deny_read` directory that stay readable (a home directory's
    /// toolchains), canonical.
    #[serde(default)]
    pub reveal_read: Vec<PathBuf>,
    /// Apply Landlock (false only for the unsandboxed opt-in).
    pub landlock: bool,
    /// Apply the seccomp filter.
    pub seccomp: bool,
    /// `cgroup.procs` of a pids cgroup the first stage joins.
    pub cgroup_procs: Option<PathBuf>,
    /// `cgroup.procs` of a memory cgroup the first stage joins (the bound of the whole tree).
    #[serde(default)]
    pub memory_cgroup_procs: Option<PathBuf>,
    /// Pid of baton: the first stage asks to be killed when it dies and checks it is still alive.
    pub parent_pid: Option<i32>,
    /// A wrapper (bwrap and its arguments, ending with `--`) the first stage execs, with the
    /// trampoline again as the wrapped command for the second stage.
    pub wrapper: Vec<String>,
    /// The trampoline executable as the second stage sees it.
    pub trampoline: PathBuf,
    /// Where the command's mount and IPC namespaces come from.
    #[serde(default)]
    pub namespaces: Namespaces,
    /// Set by the supervisor for the stage it starts (Landlock backend): that stage dies with
    /// the supervisor and checks it is still there.
    #[serde(default)]
    pub supervisor_pid: Option<i32>,
}

/// Where a command's private mount and IPC namespaces come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Namespaces {
    /// None: the command shares the host's (the Landlock backend where none can be made).
    #[default]
    Host,
    /// The trampoline makes them (Landlock backend): a private IPC namespace, and everything
    /// read-only but the writable paths (see `confine/namespaces.rs`).
    Private,
    /// bubblewrap made them.
    Bwrap,
}
