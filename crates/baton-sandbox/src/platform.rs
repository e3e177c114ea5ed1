//! What this machine can enforce, detected once per process: a working bubblewrap, the
//! Landlock status (probed by really confining a trampoline child), seccomp, root, and a pids
//! cgroup baton may create children in.

use crate::confine::Enforced;
use crate::spec::{Backend, BackendChoice, ExecSpec, Limits, Mode, Namespaces};
use crate::trampoline::SUBCOMMAND;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Environment variable that overrides `BackendChoice::Auto` (CI forces the bwrap-less path).
pub const BACKEND_ENV: &str = "BATON_SANDBOX_BACKEND";

/// Environment variable (`1`) that lets root use the Landlock backend where the trampoline
/// cannot make the private mount namespace that keeps the files outside the workspace
/// read-only: root owns them, and Landlock does not govern `chmod`/`chown`.
pub const ALLOW_ROOT_LANDLOCK_ENV: &str = "BATON_SANDBOX_ALLOW_ROOT_LANDLOCK";

#[derive(Clone, Debug, Serialize)]
pub struct Platform {
    pub bwrap: Option<PathBuf>,
    /// Why bubblewrap is not usable, when it is not.
    pub bwrap_problem: Option<String>,
    /// Landlock as enforced on a probe child: `full`, `partial` or `none`.
    pub landlock: String,
    pub seccomp: bool,
    /// Whether the trampoline can make private mount and IPC namespaces (what the Landlock
    /// backend relies on for a read-only filesystem outside the writable paths and for private
    /// SysV IPC).
    pub namespaces: bool,
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
        let (landlock, seccomp, namespaces) = match probe(trampoline) {
            Ok(e) => (e.landlock, e.seccomp, e.namespaces),
            Err(_) => ("none".to_string(), false, false),
        };
        let (bwrap, bwrap_problem) = bwrap_check
            .join()
            .unwrap_or_else(|_| (None, Some("the bwrap check panicked".into())));
        Platform {
            bwrap,
            bwrap_problem,
            landlock,
            seccomp,
            namespaces,
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
            BackendChoice::Landlock if landlock_ok => self.landlock_for_this_user(root_allowed()),
            BackendChoice::Landlock => Err(
                "the landlock backend was requested but this kernel does not enforce Landlock"
                    .into(),
            ),
            BackendChoice::Auto if self.bwrap.is_some() => Ok(Backend::Bwrap),
            BackendChoice::Auto if landlock_ok => self.landlock_for_this_user(root_allowed()),
            BackendChoice::Auto => Ok(Backend::Unsandboxed),
        }
    }

    /// Landlock, unless the user is root and no private mount namespace can be made: Landlock
    /// does not govern `chmod`/`chown`, and root owns every system file, so only a read-only
    /// mount keeps a command from making `/etc/shadow` world-writable.
    fn landlock_for_this_user(&self, root_allowed: bool) -> Result<Backend, String> {
        if self.root && !self.namespaces && !root_allowed {
            return Err(format!(
                "refusing to run commands as root on the landlock backend: this system cannot \
                 make the private mount namespace that keeps files outside the workspace \
                 read-only, and Landlock does not stop root from changing the mode or owner \
                 (`chmod`, `chown`) of any file it owns: every system file. Run baton as an \
                 unprivileged user, make bubblewrap work, or set {ALLOW_ROOT_LANDLOCK_ENV}=1 to \
                 accept that risk"
            ));
        }
        Ok(Backend::Landlock)
    }
}

/// Whether the user accepted root on Landlock without a read-only filesystem.
fn root_allowed() -> bool {
    std::env::var(ALLOW_ROOT_LANDLOCK_ENV).is_ok_and(|v| v == "1")
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
        protected: Vec::new(),
        deny_read: Vec::new(),
        reveal_read: Vec::new(),
        landlock: true,
        seccomp: true,
        cgroup_procs: None,
        memory_cgroup_procs: None,
        parent_pid: None,
        wrapper: Vec::new(),
        trampoline: trampoline.to_path_buf(),
        // The probe tries the namespaces itself (and reports whether they could be made).
        namespaces: Namespaces::Host,
        supervisor_pid: None,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn platform(root: bool, namespaces: bool) -> Platform {
        Platform {
            bwrap: None,
            bwrap_problem: Some("not installed".into()),
            landlock: "full".into(),
            seccomp: true,
            namespaces,
            root,
            cgroup_base: None,
            memory_cgroup_base: None,
        }
    }

    #[test]
    fn root_on_landlock_needs_the_private_namespaces_or_an_explicit_opt_in() {
        let refused = platform(true, false)
            .landlock_for_this_user(false)
            .unwrap_err();
        assert!(refused.contains(ALLOW_ROOT_LANDLOCK_ENV), "{refused}");
        assert!(refused.contains("chmod"), "{refused}");
        for (root, namespaces, allowed) in [
            (true, false, true),
            (true, true, false),
            (false, false, false),
        ] {
            assert_eq!(
                platform(root, namespaces).landlock_for_this_user(allowed),
                Ok(Backend::Landlock),
                "root {root}, namespaces {namespaces}, opt-in {allowed}"
            );
        }
    }
}
