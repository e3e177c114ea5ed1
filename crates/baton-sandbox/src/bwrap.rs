//! The bubblewrap command line for one sandboxed command.

use crate::spec::Mode;
use std::path::{Path, PathBuf};

/// Inputs of [`argv`]; all paths absolute and canonical.
#[derive(Clone, Debug)]
pub struct BwrapInput<'a> {
    pub bwrap: &'a Path,
    pub mode: Mode,
    pub allow_network: bool,
    pub workspace: &'a Path,
    /// Host directory mounted as the command's `/tmp`.
    pub private_tmp: &'a Path,
    pub extra_writable: &'a [PathBuf],
    pub trampoline: &'a Path,
    /// A user namespace is what makes RLIMIT_NPROC count only the sandbox's processes; root
    /// does not get one (it would lose access to files of unmapped users and gain nothing:
    /// the process limit does not apply to uid 0 either way).
    pub unshare_user: bool,
}

/// The wrapper prefix, ending with `--`; the wrapped command follows it.
pub fn argv(input: &BwrapInput<'_>) -> Vec<String> {
    let mut a: Vec<String> = vec![input.bwrap.display().to_string()];
    let mut push = |items: &[&str]| a.extend(items.iter().map(|s| s.to_string()));
    let ws = input.workspace.display().to_string();
    let tmp = input.private_tmp.display().to_string();
    match input.mode {
        Mode::FullAccess => push(&["--bind", "/", "/", "--dev-bind", "/dev", "/dev"]),
        Mode::ReadOnly | Mode::WorkspaceWrite => push(&["--ro-bind", "/", "/", "--dev", "/dev"]),
    }
    push(&["--proc", "/proc"]);
    if input.mode != Mode::FullAccess {
        push(&["--bind", &tmp, "/tmp"]);
    }
    if input.mode == Mode::ReadOnly {
        // Visible even when it lives under the /tmp just replaced.
        push(&["--ro-bind", &ws, &ws]);
    }
    if input.mode == Mode::WorkspaceWrite {
        push(&["--bind", &ws, &ws]);
        for extra in input.extra_writable {
            let p = extra.display().to_string();
            push(&["--bind", &p, &p]);
        }
    }
    // The trampoline may live under the /tmp just replaced.
    let tramp = input.trampoline.display().to_string();
    push(&["--ro-bind", &tramp, &tramp]);
    push(&[
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        // Killing bwrap kills the namespace's init, and with it every process inside.
        "--die-with-parent",
        // No controlling terminal: TIOCSTI could otherwise type into the user's shell.
        "--new-session",
    ]);
    if !input.allow_network {
        push(&["--unshare-net"]);
    }
    if input.unshare_user {
        push(&["--unshare-user"]);
    }
    push(&["--chdir", &ws, "--"]);
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(mode: Mode, allow_network: bool, unshare_user: bool) -> Vec<String> {
        argv(&BwrapInput {
            bwrap: Path::new("/usr/bin/bwrap"),
            mode,
            allow_network,
            workspace: Path::new("/w/proj"),
            private_tmp: Path::new("/var/tmp/sbx1"),
            extra_writable: &[PathBuf::from("/cache")],
            trampoline: Path::new("/bin/baton"),
            unshare_user,
        })
    }

    #[test]
    fn workspace_write_without_network() {
        assert_eq!(
            build(Mode::WorkspaceWrite, false, true).join(" "),
            "/usr/bin/bwrap --ro-bind / / --dev /dev --proc /proc --bind /var/tmp/sbx1 /tmp \
             --bind /w/proj /w/proj --bind /cache /cache --ro-bind /bin/baton /bin/baton \
             --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup-try --die-with-parent \
             --new-session --unshare-net --unshare-user --chdir /w/proj --"
        );
    }

    #[test]
    fn read_only_binds_no_workspace_and_network_on_keeps_the_host_network() {
        let a = build(Mode::ReadOnly, true, false);
        assert!(!a.windows(2).any(|w| w[0] == "--bind" && w[1] == "/w/proj"));
        assert!(!a.contains(&"--unshare-net".to_string()));
        assert!(!a.contains(&"--unshare-user".to_string()));
        assert!(a.windows(2).any(|w| w[0] == "--chdir" && w[1] == "/w/proj"));
    }

    #[test]
    fn full_access_binds_root_writable() {
        let a = build(Mode::FullAccess, false, false);
        assert_eq!(&a[1..4], ["--bind", "/", "/"]);
        assert!(a.contains(&"--unshare-net".to_string()));
        assert_eq!(a.last().map(String::as_str), Some("--"));
    }
}
