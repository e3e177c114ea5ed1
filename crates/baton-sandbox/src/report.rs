//! What the sandbox enforces on this machine, in words: one line for the logs, and the
//! per-protection report of `baton doctor`.

use crate::platform::Backend;
use crate::sandbox::Sandbox;
use crate::spec::Mode;

impl Sandbox {
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
        let hidden = crate::credentials::deny_list(home, &config.deny_read, &config.allow_read);
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
                "terminal: a session of its own, no controlling terminal; {}",
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
                    "credentials: {} paths hidden ({}){}",
                    hidden.len(),
                    if bwrap {
                        "masked"
                    } else {
                        "left out of the read rules"
                    },
                    hidden
                        .first()
                        .map(|p| format!(", e.g. {}", p.display()))
                        .unwrap_or_default()
                )
            },
            format!(
                "baton's own files: the state directory is outside every writable path{}",
                if bwrap {
                    "; it and the workspace's .baton/ are mounted read-only"
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
