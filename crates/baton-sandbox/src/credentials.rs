//! What commands may not read: credentials and histories in the home directory, the system's
//! password hashes and host keys, other workspaces' baton state, and (under Landlock) every
//! device but a few harmless ones — the user's terminals and disks among them.
//!
//! Most of it is an allow-list: a home directory is hidden but for its toolchains (and the
//! workspace, the `PATH` entries and `allow_read` extras inside it), `/dev` but for the null and
//! random devices, baton's `workspaces/` but for the command's own. The lists of known secrets
//! are the fallback where the allow-list cannot apply (a home directory that a command may write
//! anyway) and hold inside what the allow-list shows. [`Hidden`] is the result: paths to hide and
//! paths beneath them to show again. bubblewrap masks the hidden ones (an empty tmpfs, a file
//! behind `/dev/null`) and binds the shown ones back read-only.
//!
//! Landlock grants rights to whole subtrees and cannot take a part back, so reading "everything
//! but these" becomes an allow-list built when the command starts: every entry of `/` gets a
//! read rule, except those with something hidden beneath them, which are split into their
//! entries in turn; a hidden directory gets rules only for what is shown beneath it. A directory
//! that was split cannot be listed itself (its entries can be read), and what appears in it
//! later is not readable.

mod lists;

use crate::spec::{Backend, Mode, SandboxConfig};
use baton_state::StateDir;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

pub use lists::DEFAULT_DENY_READ;
use lists::{DEV_ALLOW, HOME_ALLOW_READ, SYSTEM_DENY_READ};

/// Which `/dev` the command sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Devices {
    /// The host's: only [`DEV_ALLOW`] may be opened.
    Host,
    /// bubblewrap's own minimal `/dev` with a private `devpts`: nothing of it is hidden.
    Private,
}

/// Where one command runs, as far as hiding goes. Paths as the user gave them; `~/` in
/// `extra_deny` and `allow` is the home directory.
#[derive(Clone, Debug)]
pub(crate) struct Scope<'a> {
    pub home: Option<&'a Path>,
    /// The command's `PATH`: its entries inside a home directory stay readable.
    pub path_var: Option<&'a OsStr>,
    /// What the command works on or may write (the workspace, extra writable paths): shown.
    pub visible: Vec<&'a Path>,
    /// The workspace's own state directory (shown) under the state base (hidden).
    pub own_state: Option<&'a Path>,
    pub state_base: Option<&'a Path>,
    pub extra_deny: &'a [PathBuf],
    pub allow: &'a [PathBuf],
    pub devices: Devices,
    /// Whether `/root` is to be hidden like a home directory (baton runs as root).
    pub root: bool,
}

/// The paths hidden from a command and those shown again beneath them; canonical and existing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Hidden {
    pub deny: Vec<PathBuf>,
    pub reveal: Vec<PathBuf>,
}

/// What a command run in `workspace` (canonical) by `sandbox` may not read; nothing in
/// full-access mode or without confinement. `parent_env` gives the home directory and `PATH`.
pub(crate) fn for_command(
    config: &SandboxConfig,
    backend: Backend,
    root: bool,
    workspace: &Path,
    parent_env: &[(OsString, OsString)],
) -> Hidden {
    if config.mode == Mode::FullAccess || backend == Backend::Unsandboxed {
        return Hidden::default();
    }
    let var = |name: &str| {
        parent_env
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_os_str())
    };
    let home = var("HOME").map(Path::new).filter(|h| h.is_absolute());
    let state = StateDir::for_workspace(workspace);
    let base = baton_state::base_dir();
    let mut visible = vec![workspace];
    visible.extend(config.writable_paths.iter().map(PathBuf::as_path));
    hidden(&Scope {
        home,
        path_var: var("PATH"),
        visible,
        own_state: Some(state.root()),
        state_base: base.as_deref(),
        extra_deny: &config.deny_read,
        allow: &config.allow_read,
        devices: match backend {
            Backend::Bwrap => Devices::Private,
            _ => Devices::Host,
        },
        root,
    })
}

/// What `scope`'s command may not read.
pub(crate) fn hidden(scope: &Scope<'_>) -> Hidden {
    let canonical = |p: PathBuf| p.canonicalize().ok();
    let expand = |p: &Path| -> Option<PathBuf> {
        match (p.strip_prefix("~"), scope.home) {
            (Ok(rest), Some(home)) => Some(home.join(rest)),
            (Ok(_), None) => None,
            (Err(_), _) => Some(p.to_path_buf()),
        }
    };
    let allow: Vec<PathBuf> = scope
        .allow
        .iter()
        .filter_map(|p| expand(p))
        .filter_map(canonical)
        .collect();
    let visible: Vec<PathBuf> = scope
        .visible
        .iter()
        .filter_map(|p| canonical(p.to_path_buf()))
        .collect();
    let mut homes: Vec<PathBuf> = scope
        .home
        .into_iter()
        .filter_map(|h| canonical(h.into()))
        .collect();
    // Root's home holds root's secrets whatever HOME says; unreadable to others anyway.
    if scope.root
        && let Some(root_home) = canonical("/root".into())
        && !homes.contains(&root_home)
    {
        homes.push(root_home);
    }
    // The known secrets: each home's, the system's, the user's extras.
    let mut secrets: Vec<PathBuf> = homes
        .iter()
        .flat_map(|home| DEFAULT_DENY_READ.iter().map(move |rel| home.join(rel)))
        .chain(
            SYSTEM_DENY_READ
                .iter()
                .flat_map(|p| glob(Path::new("/"), p)),
        )
        .chain(scope.extra_deny.iter().filter_map(|p| expand(p)))
        .filter_map(canonical)
        .filter(|p| !allow.contains(p))
        .collect();
    // The allow-lists: containers hidden but for what is shown beneath them.
    let mut containers = Vec::new();
    let mut reveal: Vec<PathBuf> = visible.clone();
    reveal.extend(allow.iter().cloned());
    let path_entries: Vec<PathBuf> = scope
        .path_var
        .map(|p| std::env::split_paths(p).filter_map(canonical).collect())
        .unwrap_or_default();
    for home in &homes {
        // A home the command may see whole (a workspace or writable path holding it, an
        // `allow_read` of it) keeps only the list of secrets; so does a home that holds the
        // system (`HOME=/`, as some service accounts have).
        let holds_the_system = ["/usr", "/etc", "/bin"]
            .iter()
            .any(|system| Path::new(system).starts_with(home));
        if holds_the_system || reveal.iter().any(|r| home.starts_with(r)) {
            continue;
        }
        containers.push(home.clone());
        reveal.extend(
            HOME_ALLOW_READ
                .iter()
                .flat_map(|rel| glob(home, rel))
                .filter_map(canonical),
        );
        reveal.extend(path_entries.iter().filter(|p| p.starts_with(home)).cloned());
    }
    if let Some(base) = scope.state_base
        && let Some(workspaces) = canonical(base.join("workspaces"))
    {
        containers.push(workspaces);
        reveal.extend(scope.own_state.and_then(|s| canonical(s.into())));
    }
    if scope.devices == Devices::Host {
        containers.push(PathBuf::from("/dev"));
        reveal.extend(DEV_ALLOW.iter().map(PathBuf::from).filter(|p| p.exists()));
    }
    // What is shown stays hidden when it lies in a known secret (a toolchain's credentials);
    // what lies in a visible path needs no showing.
    reveal.retain(|r| !secrets.iter().any(|s| r.starts_with(s)));
    reveal.retain(|r| !visible.iter().any(|v| r.starts_with(v) && r != v));
    containers.retain(|c| !reveal.iter().any(|r| c.starts_with(r)));
    secrets.extend(containers);
    sort_dedup(&mut secrets);
    sort_dedup(&mut reveal);
    Hidden {
        deny: secrets,
        reveal,
    }
}

fn sort_dedup(paths: &mut Vec<PathBuf>) {
    paths.sort();
    paths.dedup();
}

/// `dir/pattern`, where a component of `pattern` may hold one `*` (any run of characters within
/// the name): the existing matches.
fn glob(dir: &Path, pattern: &str) -> Vec<PathBuf> {
    let pattern = pattern.trim_start_matches('/');
    let mut found = vec![dir.to_path_buf()];
    for part in pattern.split('/') {
        let mut next = Vec::new();
        for base in found {
            match part.split_once('*') {
                None => next.push(base.join(part)),
                Some((prefix, suffix)) => {
                    let Ok(entries) = std::fs::read_dir(&base) else {
                        continue;
                    };
                    let mut names: Vec<_> = entries
                        .flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .filter(|n| n.starts_with(prefix) && n.ends_with(suffix))
                        .filter(|n| n.len() >= prefix.len() + suffix.len())
                        .collect();
                    names.sort();
                    next.extend(names.into_iter().map(|n| base.join(n)));
                }
            }
        }
        found = next;
    }
    found.retain(|p| std::fs::symlink_metadata(p).is_ok());
    found
}

/// The paths under `root` that get a read rule when everything but `deny` may be read, and of
/// `deny`'s directories only what `reveal` shows again.
pub(crate) fn read_allowlist(root: &Path, deny: &[PathBuf], reveal: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk(root, deny, reveal, &mut out);
    out.sort();
    out.dedup();
    out
}

fn walk(dir: &Path, deny: &[PathBuf], reveal: &[PathBuf], out: &mut Vec<PathBuf>) {
    if deny.iter().any(|d| d == dir) {
        for shown in reveal.iter().filter(|r| r.starts_with(dir) && *r != dir) {
            walk(shown, deny, reveal, out);
        }
        return;
    }
    if !deny.iter().any(|d| d.starts_with(dir)) {
        out.push(dir.to_path_buf());
        return;
    }
    // Something beneath is denied: its entries one by one (never following a symlink: the
    // rule would land on its target, which may be the denied path).
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut children: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    children.sort();
    for child in children {
        let is_dir = std::fs::symlink_metadata(&child).is_ok_and(|m| m.is_dir());
        if is_dir {
            walk(&child, deny, reveal, out);
        } else if !deny.contains(&child) {
            out.push(child);
        }
    }
}

/// The devices that get a write rule under Landlock: writing to the null device is not writing
/// to the filesystem. A terminal only where its `/dev` is a private one (bubblewrap's: the
/// command's own pseudo-terminals); on the host's every terminal is hidden.
pub(crate) fn writable_devices(deny: &[PathBuf], reveal: &[PathBuf]) -> Vec<PathBuf> {
    [
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/tty",
        "/dev/pts",
    ]
    .into_iter()
    .map(PathBuf::from)
    .filter(|dev| dev.exists())
    .filter(|dev| {
        reveal.iter().any(|r| dev.starts_with(r)) || !deny.iter().any(|d| dev.starts_with(d))
    })
    .collect()
}

#[cfg(test)]
mod tests;
