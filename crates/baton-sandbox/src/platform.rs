//! What this machine can enforce, detected once per process: a working bubblewrap, the
//! Landlock status (probed by really confining a trampoline child), seccomp, root, and a pids
//! cgroup baton may create children in.

use crate::confine::Enforced;
use crate::spec::{BackendChoice, ExecSpec, Limits, Mode};
use crate::trampoline::SUBCOMMAND;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Environment variable that overrides `BackendChoice::Auto` (CI forces the bwrap-less path).
pub const BACKEND_ENV: &str = "BATON_SANDBOX_BACKEND";

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

#[derive(Clone, Debug, Serialize)]
pub struct Platform {
    pub bwrap: Option<PathBuf>,
    /// Why bubblewrap is not usable, when it is not.
    pub bwrap_problem: Option<String>,
    /// Landlock as enforced on a probe child: `full`, `partial` or `none`.
    pub landlock: String,
    pub seccomp: bool,
    pub root: bool,
    /// The pids cgroup directory per-command cgroups are created in.
    pub cgroup_base: Option<PathBuf>,
    /// Where a memory cgroup per command can be made (a bound for the whole command tree).
    pub memory_cgroup_base: Option<crate::cgroup::MemoryBase>,
}

static PLATFORM: OnceLock<Platform> = OnceLock::new();

/// Detects the platform once; `trampoline` is the executable that understands
/// [`SUBCOMMAND`] (the probe runs it).
pub fn detect(trampoline: &Path) -> &'static Platform {
    PLATFORM.get_or_init(|| {
        let root = rustix::process::geteuid().is_root();
        // Both checks spawn a process; side by side they cost one start-up, not two.
        let bwrap_check = std::thread::spawn(move || find_bwrap(root));
        let (landlock, seccomp) = match probe(trampoline) {
            Ok(e) => (e.landlock, e.seccomp),
            Err(_) => ("none".to_string(), false),
        };
        let (bwrap, bwrap_problem) = bwrap_check
            .join()
            .unwrap_or_else(|_| (None, Some("the bwrap check panicked".into())));
        Platform {
            bwrap,
            bwrap_problem,
            landlock,
            seccomp,
            root,
            cgroup_base: crate::cgroup::find_base(),
            memory_cgroup_base: crate::cgroup::find_memory_base(),
        }
    })
}

impl Platform {
    /// The backend for `choice`, or why it cannot be had.
    pub fn backend(&self, choice: BackendChoice) -> Result<Backend, String> {
        let landlock_ok = self.landlock != "none";
        let choice = match choice {
            BackendChoice::Auto => std::env::var(BACKEND_ENV)
                .ok()
                .map(|v| v.parse::<BackendChoice>())
                .transpose()?
                .unwrap_or(BackendChoice::Auto),
            other => other,
        };
        match choice {
            BackendChoice::Bwrap => match &self.bwrap {
                Some(_) => Ok(Backend::Bwrap),
                None => Err(format!(
                    "the bwrap backend was requested but {}",
                    self.bwrap_problem
                        .as_deref()
                        .unwrap_or("bwrap is not usable")
                )),
            },
            BackendChoice::Landlock if landlock_ok => Ok(Backend::Landlock),
            BackendChoice::Landlock => Err(
                "the landlock backend was requested but this kernel does not enforce Landlock"
                    .into(),
            ),
            BackendChoice::Auto if self.bwrap.is_some() => Ok(Backend::Bwrap),
            BackendChoice::Auto if landlock_ok => Ok(Backend::Landlock),
            BackendChoice::Auto => Ok(Backend::Unsandboxed),
        }
    }
}

fn find_bwrap(root: bool) -> (Option<PathBuf>, Option<String>) {
    let path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join("bwrap"))
        .find(|p| p.is_file());
    let Some(path) = path else {
        return (None, Some("bwrap is not installed".into()));
    };
    // Installed is not enough: containers often forbid the namespaces it needs.
    let mut check = Command::new(&path);
    check.args([
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--unshare-pid",
        "--unshare-net",
        "--die-with-parent",
    ]);
    if !root {
        check.arg("--unshare-user");
    }
    let out = check
        .args(["--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match out {
        Ok(o) if o.status.success() => (Some(path), None),
        Ok(o) => (
            None,
            Some(format!(
                "{} does not work here: {}",
                path.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            )),
        ),
        Err(e) => (None, Some(format!("{} could not run: {e}", path.display()))),
    }
}

fn probe(trampoline: &Path) -> Result<Enforced, String> {
    let tmp = std::env::temp_dir();
    let spec = ExecSpec {
        mode: Mode::WorkspaceWrite,
        allow_network: false,
        allow_unix_sockets: false,
        limits: Limits {
            cpu_secs: None,
            memory_bytes: None,
            max_processes: None,
            file_size_bytes: None,
            open_files: None,
            tmp_bytes: None,
        },
        nproc_offset: 0,
        writable: vec![tmp],
        deny_read: Vec::new(),
        reveal_read: Vec::new(),
        landlock: true,
        seccomp: true,
        cgroup_procs: None,
        memory_cgroup_procs: None,
        parent_pid: None,
        wrapper: Vec::new(),
        trampoline: trampoline.to_path_buf(),
    };
    let json = serde_json::to_string(&spec).map_err(|e| e.to_string())?;
    let out = Command::new(trampoline)
        .args([SUBCOMMAND, "--probe", &json])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {}: {e}", trampoline.display()))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())
}
