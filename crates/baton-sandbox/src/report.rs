//! What the sandbox enforces on this machine, in words: one line for the logs, and the
//! per-protection report of `baton doctor`.

use crate::sandbox::Sandbox;
use crate::spec::Backend;
use crate::spec::Mode;

impl Sandbox {
    /// What commands cannot read, for the report: the workspace is not known here, so what is
    /// counted is what a workspace outside the home directory would hide.
    fn hidden_from_commands(&self, home: Option<&std::path::Path>) -> crate::credentials::Hidden {
        let platform_root = self.platform().is_some_and(|p| p.root);
        let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = Vec::new();
        if let Some(home) = home {
            env.push(("HOME".into(), home.into()));
        }
        if let Some(path) = std::env::var_os("PATH") {
            env.push(("PATH".into(), path));
        }
        let nowhere = std::path::Path::new("/nonexistent");
        crate::credentials::for_command(self.config(), self.backend(), platform_root, nowhere, &env)
    }

    /// One line for logs and `baton doctor`: backend, mode, network and process bound.
    pub fn summary(&self) -> String {
        let Some(platform) = self.platform() else {
            return "UNCONFINED (no sandbox)".to_string();
        };
        let procs = if platform.cgroup_base.is_some() {
            "pids cgroup"
        } else if platform.root {
            "NONE (root is exempt from RLIMIT_NPROC and no pids cgroup is writable)"
        } else {
            "RLIMIT_NPROC"
        };
        format!(
            "backend {}, mode {}, network {}, Landlock {}, seccomp {}, process limit via {procs}, \
             UNIX sockets {}",
            self.backend().describe(),
            self.config().mode,
            if self.config().allow_network {
                "on"
            } else {
                "off"
            },
            platform.landlock,
            if platform.seccomp { "on" } else { "off" },
            self.sockets(),
        )
    }

    fn sockets(&self) -> String {
        match (self.config().unix_sockets.len(), self.backend()) {
            (0, _) => "none (no AF_UNIX socket can be made)".to_string(),
            (n, Backend::Bwrap) => format!("{n} allowed (the rest of /run masked)"),
            (n, backend) => format!(
                "{n} allowed — WARNING: under {} every socket path is reachable",
                backend.describe()
            ),
        }
    }

    /// `baton doctor`'s lines: each protection, how this backend enforces it, and what is not
    /// enforced here. `home` is the home directory whose credentials are hidden.
    pub fn report(&self, home: Option<&std::path::Path>) -> Vec<String> {
        let Some(platform) = self.platform() else {
            return vec!["every protection OFF: commands run unconfined".into()];
        };
        let bwrap = self.backend() == Backend::Bwrap;
        let seccomp = platform.seccomp;
        let on_off = |on: bool, what: &str| {
            if on {
                what.to_string()
            } else {
                format!("NOT ENFORCED ({what} needs seccomp)")
            }
        };
        let config = self.config();
        let hidden = self.hidden_from_commands(home);
        let mut lines = vec![
            format!(
                "capabilities: none, no_new_privs{}",
                if bwrap && platform.root {
                    " (bubblewrap --cap-drop ALL)"
                } else if platform.root {
                    " (bounding set dropped)"
                } else {
                    ""
                }
            ),
            on_off(
                seccomp,
                "setuid/setgid files, device nodes, open_by_handle_at: refused",
            ),
            format!("UNIX sockets: {}", self.sockets()),
            format!(
                "terminal: a session of its own, no controlling terminal, {}; {}",
                match (config.mode, bwrap) {
                    (Mode::FullAccess, _) => "the user's terminals OPEN (full-access mode)",
                    (_, true) => "a private /dev/pts (the user's terminals invisible)",
                    (_, false) =>
                        "no terminal or disk device can be opened (/dev/null, zero, \
                                   full, random, urandom only)",
                },
                on_off(seccomp, "TIOCSTI/TIOCLINUX refused")
            ),
            format!(
                "other processes: {}; limits and priorities of others: {}",
                if bwrap {
                    "invisible (pid namespace)"
                } else {
                    "visible, their environment unreadable (no capabilities, Landlock)"
                },
                on_off(seccomp, "refused")
            ),
            if config.mode == Mode::FullAccess {
                "credentials: NOT hidden (full-access mode)".to_string()
            } else {
                format!(
                    "credentials: {} paths hidden ({}): the home directory but its toolchains \
                     (.cargo, .rustup, .pyenv, …) and `allow_read`, known secrets and histories, \
                     /etc/shadow, sudoers and host keys, other workspaces' baton state{}",
                    hidden.deny.len(),
                    if bwrap {
                        "masked"
                    } else {
                        "left out of the read rules"
                    },
                    hidden
                        .deny
                        .iter()
                        .find(|p| p.starts_with("/dev") || p.starts_with("/etc"))
                        .map(|p| format!(", e.g. {}", p.display()))
                        .unwrap_or_default()
                )
            },
            format!(
                "baton's own files: the state directory is outside every writable path{}",
                if bwrap {
                    "; it and the workspace's .baton/ are mounted read-only"
                } else if platform.namespaces {
                    "; the workspace's .baton/ is bound read-only in the command's own mount \
                     namespace"
                } else {
                    "; the workspace's .baton/ is writable (a changed config.toml or policy.toml \
                     needs `baton trust` again)"
                }
            ),
            "orphans (setsid, double fork): killed with the command (a subreaper)".to_string(),
            format!(
                "memory: {}",
                if platform.memory_cgroup_base.is_some() {
                    "one bound for the whole command tree (memory cgroup) and per process"
                } else {
                    "per process only (RLIMIT_AS): no memory cgroup can be made here"
                }
            ),
            format!(
                "private /tmp: {}",
                match (bwrap, config.limits.tmp_bytes) {
                    (true, Some(bytes)) => format!("a tmpfs of {} MB", bytes >> 20),
                    (true, None) => "a host directory, size not bounded".into(),
                    (false, _) =>
                        "a host directory (mode 0700), size NOT bounded under Landlock".into(),
                }
            ),
        ];
        lines.push(
            "not enforced anywhere: the number of files a command creates, bytes written to the \
             workspace (only RLIMIT_FSIZE per file)"
                .to_string(),
        );
        lines
    }
}
