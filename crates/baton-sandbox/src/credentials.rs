//! Credentials out of the commands' reach: a built-in list of the files and directories in the
//! user's home that hold keys and tokens, masked under bubblewrap and left out of Landlock's
//! read rules.
//!
//! Landlock grants rights to whole subtrees and cannot take a part back, so reading "everything
//! but `~/.ssh`" becomes an allow-list built when the command starts: every entry of `/` gets a
//! read rule, except those with something denied beneath them, which are split into their
//! entries in turn. A directory that was split cannot be listed itself (its entries can be
//! read), and what appears in it later is not readable.

use std::path::{Path, PathBuf};

/// Relative to the home directory. Other users' homes are protected by their permissions
/// (commands have no capability to override them).
pub const DEFAULT_DENY_READ: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".config/baton",
    ".docker/config.json",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".password-store",
    ".local/share/keyrings",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
];

/// The paths to deny, canonical and existing: the built-in list under `home` plus `extra`,
/// minus `allow` (`~/` in either is the home directory).
pub(crate) fn deny_list(home: Option<&Path>, extra: &[PathBuf], allow: &[PathBuf]) -> Vec<PathBuf> {
    let expand = |p: &Path| -> Option<PathBuf> {
        match (p.strip_prefix("~"), home) {
            (Ok(rest), Some(home)) => Some(home.join(rest)),
            (Ok(_), None) => None,
            (Err(_), _) => Some(p.to_path_buf()),
        }
    };
    let allowed: Vec<PathBuf> = allow
        .iter()
        .filter_map(|p| expand(p))
        .filter_map(|p| p.canonicalize().ok())
        .collect();
    let built_in = home
        .into_iter()
        .flat_map(|home| DEFAULT_DENY_READ.iter().map(move |rel| home.join(rel)));
    let mut out: Vec<PathBuf> = built_in
        .chain(extra.iter().filter_map(|p| expand(p)))
        .filter_map(|p| p.canonicalize().ok())
        .filter(|p| !allowed.contains(p))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The paths under `root` that get a read rule when everything but `deny` may be read.
pub(crate) fn read_allowlist(root: &Path, deny: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk(root, deny, &mut out);
    out
}

fn walk(dir: &Path, deny: &[PathBuf], out: &mut Vec<PathBuf>) {
    if deny.iter().any(|d| d == dir) {
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
            walk(&child, deny, out);
        } else if !deny.contains(&child) {
            out.push(child);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn everything_but_the_denied_paths_gets_a_rule() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        for d in [".ssh", ".cargo/bin", ".config/gh", ".config/git", "src"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        for f in [".cargo/credentials.toml", ".cargo/config.toml", ".bashrc"] {
            std::fs::write(home.join(f), "x").unwrap();
        }
        std::fs::create_dir_all(root.join("etc")).unwrap();
        let deny = deny_list(Some(&home), &[PathBuf::from("~/src")], &[]);
        assert_eq!(
            deny,
            [".cargo/credentials.toml", ".config/gh", ".ssh", "src"].map(|p| home.join(p))
        );
        let rules = read_allowlist(&root, &deny);
        assert_eq!(
            rules,
            [
                root.join("etc"),
                home.join(".bashrc"),
                home.join(".cargo/bin"),
                home.join(".cargo/config.toml"),
                home.join(".config/git"),
            ]
        );
        // allow_read takes one back.
        let deny = deny_list(Some(&home), &[], &[PathBuf::from("~/.config/gh")]);
        assert!(!deny.contains(&home.join(".config/gh")));
        assert!(deny.contains(&home.join(".ssh")));
        // Nothing denied: one rule for everything.
        assert_eq!(read_allowlist(&root, &[]), vec![root.clone()]);
        assert!(deny_list(None, &[], &[]).is_empty());
    }
}
