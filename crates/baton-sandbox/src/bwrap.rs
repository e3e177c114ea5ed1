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
    /// Host directory mounted as the command's `/tmp` when it has no size.
    pub private_tmp: &'a Path,
    /// The size of a tmpfs mounted as `/tmp` instead (a bound on what the command writes
    /// there; in memory, so counted by the memory cgroup too).
    pub tmp_bytes: Option<u64>,
    pub extra_writable: &'a [PathBuf],
    /// baton's own files (the workspace's state directory, its `.baton/` inputs): mounted
    /// read-only over whatever writable bind holds them, in every mode.
    pub protected: &'a [PathBuf],
    /// Directories of host sockets hidden behind an empty tmpfs (`/run`, a real `/var/run`):
    /// only with an allowlist of UNIX sockets (without one no AF_UNIX socket can be made).
    pub socket_masks: &'a [PathBuf],
    /// The allowlisted sockets, mounted back over the masks.
    pub unix_sockets: &'a [PathBuf],
    /// Credentials: directories hidden behind an empty tmpfs, files behind `/dev/null`.
    pub masked_dirs: &'a [PathBuf],
    pub masked_files: &'a [PathBuf],
    /// Paths inside a masked directory bound back read-only (a home directory's toolchains).
    pub revealed: &'a [PathBuf],
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
    match (input.mode, input.tmp_bytes) {
        (Mode::FullAccess, _) => {}
        (_, Some(bytes)) => push(&["--size", &bytes.to_string(), "--tmpfs", "/tmp"]),
        (_, None) => push(&["--bind", &tmp, "/tmp"]),
    }
    if !input.unix_sockets.is_empty() {
        for mask in input.socket_masks {
            let m = mask.display().to_string();
            push(&["--tmpfs", &m]);
        }
        // Name resolution with the network on reads /run/systemd/resolve.
        push(&[
            "--ro-bind-try",
            "/run/systemd/resolve",
            "/run/systemd/resolve",
        ]);
    }
    for (kind, path) in binds(input) {
        let p = path.display().to_string();
        match kind {
            Bind::Tmpfs => push(&["--tmpfs", &p]),
            Bind::Null => push(&["--ro-bind", "/dev/null", &p]),
            Bind::Writable => push(&["--bind", &p, &p]),
            Bind::ReadOnly => push(&["--ro-bind", &p, &p]),
            // `-try`: the workspace's `.baton/` may not exist.
            Bind::ReadOnlyIfThere => push(&["--ro-bind-try", &p, &p]),
        }
    }
    for socket in input.unix_sockets {
        let s = socket.display().to_string();
        push(&["--bind-try", &s, &s]);
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
    } else {
        // Root without a user namespace would keep every capability inside (the red-team wrote
        // /root/.bashrc with open_by_handle_at through the writable bind).
        push(&["--cap-drop", "ALL"]);
    }
    push(&["--chdir", &ws, "--"]);
    a
}

/// What is mounted at a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bind {
    Writable,
    ReadOnly,
    ReadOnlyIfThere,
    /// An empty tmpfs (a masked directory).
    Tmpfs,
    /// `/dev/null` (a masked file).
    Null,
}

/// The workspace, extra writable paths, protected paths, masked credentials and what is shown
/// again inside a masked directory as bubblewrap mounts, shallowest first: a later mount covers
/// an earlier one's subtree, so a protected directory or a credential inside the workspace stays
/// read-only or hidden, a worktree inside the protected state directory stays writable, and a
/// toolchain inside the masked home directory is readable (its credentials masked again).
fn binds<'a>(input: &BwrapInput<'a>) -> Vec<(Bind, &'a Path)> {
    let mut binds: Vec<(Bind, &'a Path)> = Vec::new();
    match input.mode {
        // Visible even when it lives under the /tmp just replaced.
        Mode::ReadOnly => binds.push((Bind::ReadOnly, input.workspace)),
        Mode::WorkspaceWrite => {
            binds.push((Bind::Writable, input.workspace));
            binds.extend(
                input
                    .extra_writable
                    .iter()
                    .map(|p| (Bind::Writable, p.as_path())),
            );
        }
        Mode::FullAccess => {}
    }
    let each = |paths: &'a [PathBuf], kind: Bind| paths.iter().map(move |p| (kind, p.as_path()));
    binds.extend(each(input.protected, Bind::ReadOnlyIfThere));
    if input.mode != Mode::FullAccess {
        binds.extend(each(input.masked_dirs, Bind::Tmpfs));
        binds.extend(each(input.masked_files, Bind::Null));
        // A path bound already (the workspace, a writable path, baton's state) keeps its mount.
        let shown: Vec<(Bind, &'a Path)> = each(input.revealed, Bind::ReadOnly)
            .filter(|(_, p)| !binds.iter().any(|(_, b)| b == p))
            .collect();
        binds.extend(shown);
    }
    binds.sort_by_key(|(_, path)| path.components().count());
    let masked_already = |at: usize| {
        let path = binds[at].1;
        // The deepest other mount holding it decides what is there.
        let holder = binds[..at]
            .iter()
            .rev()
            .find(|(_, b)| *b != path && path.starts_with(b));
        matches!(holder, Some((Bind::Tmpfs, _)))
    };
    // A mask inside a mask hides nothing more, and would only make its mount point appear.
    let keep: Vec<bool> = (0..binds.len())
        .map(|at| !matches!(binds[at].0, Bind::Tmpfs | Bind::Null) || !masked_already(at))
        .collect();
    binds
        .into_iter()
        .zip(keep)
        .filter_map(|(bind, keep)| keep.then_some(bind))
        .collect()
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
            tmp_bytes: None,
            extra_writable: &[PathBuf::from("/cache")],
            protected: &[PathBuf::from("/w/proj/.baton")],
            socket_masks: &[PathBuf::from("/run")],
            unix_sockets: &[],
            masked_dirs: &[],
            masked_files: &[],
            revealed: &[],
            trampoline: Path::new("/bin/baton"),
            unshare_user,
        })
    }

    #[test]
    fn workspace_write_without_network() {
        assert_eq!(
            build(Mode::WorkspaceWrite, false, true).join(" "),
            "/usr/bin/bwrap --ro-bind / / --dev /dev --proc /proc --bind /var/tmp/sbx1 /tmp \
             --bind /cache /cache --bind /w/proj /w/proj --ro-bind-try /w/proj/.baton \
             /w/proj/.baton --ro-bind /bin/baton /bin/baton \
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
    fn protected_paths_cover_writable_parents_and_writable_children_cover_them() {
        let state = PathBuf::from("/home/u/.local/state/baton/workspaces/p-1");
        let worktree = state.join("worktrees/child");
        let a = argv(&BwrapInput {
            bwrap: Path::new("/usr/bin/bwrap"),
            mode: Mode::WorkspaceWrite,
            allow_network: false,
            workspace: &worktree,
            private_tmp: Path::new("/var/tmp/sbx1"),
            tmp_bytes: None,
            extra_writable: &[PathBuf::from("/home/u")],
            protected: std::slice::from_ref(&state),
            socket_masks: &[],
            unix_sockets: &[],
            masked_dirs: &[],
            masked_files: &[],
            revealed: &[],
            trampoline: Path::new("/bin/baton"),
            unshare_user: true,
        });
        let at = |path: &Path| {
            a.iter()
                .position(|x| x == &path.display().to_string())
                .unwrap()
        };
        assert!(at(Path::new("/home/u")) < at(&state), "{a:?}");
        assert!(at(&state) < at(&worktree), "{a:?}");
        assert_eq!(a[at(&state) - 1], "--ro-bind-try");
        assert_eq!(a[at(&worktree) - 1], "--bind");
    }

    #[test]
    fn host_sockets_are_masked_only_with_an_allowlist_and_the_allowed_ones_bound_back() {
        assert!(!build(Mode::WorkspaceWrite, false, true).contains(&"--tmpfs".to_string()));
        let socket = PathBuf::from("/run/postgresql/.s.PGSQL.5432");
        let a = argv(&BwrapInput {
            bwrap: Path::new("/usr/bin/bwrap"),
            mode: Mode::WorkspaceWrite,
            allow_network: false,
            workspace: Path::new("/w/proj"),
            private_tmp: Path::new("/var/tmp/sbx1"),
            tmp_bytes: None,
            extra_writable: &[],
            protected: &[],
            socket_masks: &[PathBuf::from("/run"), PathBuf::from("/var/run")],
            unix_sockets: std::slice::from_ref(&socket),
            masked_dirs: &[],
            masked_files: &[],
            revealed: &[],
            trampoline: Path::new("/bin/baton"),
            unshare_user: true,
        })
        .join(" ");
        let mask = a.find("--tmpfs /run ").unwrap();
        assert!(a.contains("--tmpfs /var/run "), "{a}");
        let back = a
            .find("--bind-try /run/postgresql/.s.PGSQL.5432 /run/postgresql/.s.PGSQL.5432")
            .unwrap();
        assert!(mask < back, "{a}");
    }

    #[test]
    fn credentials_are_masked_after_the_binds_that_hold_them() {
        let a = argv(&BwrapInput {
            bwrap: Path::new("/usr/bin/bwrap"),
            mode: Mode::WorkspaceWrite,
            allow_network: false,
            workspace: Path::new("/home/u"),
            private_tmp: Path::new("/var/tmp/sbx1"),
            tmp_bytes: None,
            extra_writable: &[],
            protected: &[],
            socket_masks: &[],
            unix_sockets: &[],
            masked_dirs: &[PathBuf::from("/home/u/.ssh")],
            masked_files: &[PathBuf::from("/home/u/.netrc")],
            revealed: &[],
            trampoline: Path::new("/bin/baton"),
            unshare_user: true,
        })
        .join(" ");
        let home = a.find("--bind /home/u /home/u").unwrap();
        let ssh = a.find("--tmpfs /home/u/.ssh").unwrap();
        let netrc = a.find("--ro-bind /dev/null /home/u/.netrc").unwrap();
        assert!(home < ssh && home < netrc, "{a}");
    }

    #[test]
    fn a_masked_home_shows_its_toolchains_read_only_and_masks_nothing_twice() {
        let dirs = [PathBuf::from("/home/u"), PathBuf::from("/home/u/.ssh")];
        let a = argv(&BwrapInput {
            bwrap: Path::new("/usr/bin/bwrap"),
            mode: Mode::WorkspaceWrite,
            allow_network: false,
            workspace: Path::new("/home/u/proj"),
            private_tmp: Path::new("/var/tmp/sbx1"),
            tmp_bytes: None,
            extra_writable: &[],
            protected: &[],
            socket_masks: &[],
            unix_sockets: &[],
            masked_dirs: &dirs,
            masked_files: &[PathBuf::from("/home/u/.cargo/credentials.toml")],
            revealed: &[
                PathBuf::from("/home/u/.cargo"),
                PathBuf::from("/home/u/proj"),
            ],
            trampoline: Path::new("/bin/baton"),
            unshare_user: true,
        })
        .join(" ");
        let home = a.find("--tmpfs /home/u ").unwrap();
        let cargo = a.find("--ro-bind /home/u/.cargo /home/u/.cargo").unwrap();
        let creds = a
            .find("--ro-bind /dev/null /home/u/.cargo/credentials.toml")
            .unwrap();
        let ws = a.find("--bind /home/u/proj /home/u/proj").unwrap();
        assert!(home < cargo && cargo < creds && home < ws, "{a}");
        // Hidden by the home's tmpfs already; the workspace keeps its writable mount.
        assert!(!a.contains("/home/u/.ssh"), "{a}");
        assert!(!a.contains("--ro-bind /home/u/proj"), "{a}");
    }

    #[test]
    fn full_access_binds_root_writable() {
        let a = build(Mode::FullAccess, false, false);
        assert_eq!(&a[1..4], ["--bind", "/", "/"]);
        // baton's own files stay read-only even then.
        assert!(
            a.windows(2)
                .any(|w| w[0] == "--ro-bind-try" && w[1] == "/w/proj/.baton")
        );
        assert!(a.contains(&"--unshare-net".to_string()));
        assert_eq!(a.last().map(String::as_str), Some("--"));
    }
}
