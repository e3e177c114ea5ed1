use super::*;

fn scope<'a>(home: &'a Path, deny: &'a [PathBuf], allow: &'a [PathBuf]) -> Scope<'a> {
    Scope {
        home: Some(home),
        path_var: None,
        visible: Vec::new(),
        own_state: None,
        state_base: None,
        extra_deny: deny,
        allow,
        devices: Devices::Private,
        root: false,
    }
}

fn tree(root: &Path, dirs: &[&str], files: &[&str]) {
    for d in dirs {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    for f in files {
        std::fs::create_dir_all(root.join(f).parent().unwrap()).unwrap();
        std::fs::write(root.join(f), "x").unwrap();
    }
}

#[test]
fn the_home_is_hidden_but_for_its_toolchains_and_secrets_stay_hidden_inside_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let home = root.join("home");
    tree(
        &home,
        &[
            ".ssh",
            ".cargo/bin",
            ".config/gh",
            ".config/git",
            "src",
            "notes",
            ".local/lib/python3.11",
        ],
        &[
            ".cargo/credentials.toml",
            ".cargo/config.toml",
            ".bashrc",
            ".gitconfig",
            ".pgpass",
        ],
    );
    std::fs::create_dir_all(root.join("etc")).unwrap();
    let extra = [PathBuf::from("~/src")];
    let hidden = hidden(&scope(&home, &extra, &[]));
    let h = |rels: &[&str]| rels.iter().map(|r| home.join(r)).collect::<Vec<_>>();
    let mut deny = h(&[
        ".cargo/credentials.toml",
        ".config/gh",
        ".pgpass",
        ".ssh",
        "src",
    ]);
    deny.push(home.clone());
    deny.sort();
    // (The machine's own /etc/shadow is in the list too.)
    let here: Vec<PathBuf> = hidden
        .deny
        .iter()
        .filter(|p| p.starts_with(&root))
        .cloned()
        .collect();
    assert_eq!(here, deny);
    assert_eq!(
        hidden.reveal,
        h(&[
            ".cargo",
            ".config/git",
            ".gitconfig",
            ".local/lib/python3.11"
        ])
    );
    let rules = read_allowlist(&root, &hidden.deny, &hidden.reveal);
    let mut expected = vec![root.join("etc")];
    expected.extend(h(&[
        ".cargo/bin",
        ".cargo/config.toml",
        ".config/git",
        ".gitconfig",
        ".local/lib/python3.11",
    ]));
    assert_eq!(rules, expected);

    // allow_read shows a path again (and takes it out of the secrets).
    let allow = [PathBuf::from("~/notes"), PathBuf::from("~/.pgpass")];
    let hidden = super::hidden(&scope(&home, &[], &allow));
    assert!(hidden.reveal.contains(&home.join("notes")));
    assert!(!hidden.deny.contains(&home.join(".pgpass")));
    assert!(hidden.deny.contains(&home.join(".ssh")));
    // Nothing denied: one rule for everything.
    assert_eq!(read_allowlist(&root, &[], &[]), vec![root.clone()]);
}

#[test]
fn a_home_the_command_may_see_whole_keeps_only_the_list_of_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().canonicalize().unwrap();
    tree(&home, &[".ssh", "proj"], &[".bash_history", ".claude.json"]);
    let mut s = scope(&home, &[], &[]);
    s.visible = vec![home.as_path()];
    let hidden = hidden(&s);
    assert!(!hidden.deny.contains(&home), "{hidden:?}");
    for secret in [".ssh", ".bash_history", ".claude.json"] {
        assert!(hidden.deny.contains(&home.join(secret)), "{secret}");
    }
    // A workspace inside the home is shown, the rest of the home is not.
    let ws = home.join("proj");
    s.visible = vec![ws.as_path()];
    let hidden = super::hidden(&s);
    assert!(hidden.deny.contains(&home) && hidden.reveal.contains(&ws));
}

#[test]
fn a_home_that_holds_the_system_is_not_hidden() {
    let root = Path::new("/");
    let hidden = hidden(&scope(root, &[], &[]));
    assert!(!hidden.deny.contains(&root.to_path_buf()), "{hidden:?}");
    assert!(read_allowlist(root, &hidden.deny, &hidden.reveal).contains(&"/usr".into()));
}

#[test]
fn other_workspaces_state_and_the_hosts_devices_are_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (home, base) = (root.join("home"), root.join("state"));
    let own = base.join("workspaces/mine-1");
    tree(
        &root,
        &[
            "home",
            "state/workspaces/other-2",
            "state/workspaces/mine-1/worktrees/c",
        ],
        &[],
    );
    let mut s = scope(&home, &[], &[]);
    s.state_base = Some(&base);
    s.own_state = Some(&own);
    s.devices = Devices::Host;
    let hidden = hidden(&s);
    assert!(hidden.deny.contains(&base.join("workspaces")), "{hidden:?}");
    assert!(hidden.deny.contains(&PathBuf::from("/dev")), "{hidden:?}");
    assert!(hidden.reveal.contains(&own) && hidden.reveal.contains(&"/dev/null".into()));
    assert!(!hidden.reveal.iter().any(|r| r.starts_with("/dev/pts")));
    let rules = read_allowlist(&base, &hidden.deny, &hidden.reveal);
    assert_eq!(rules, vec![own]);
    // Terminals get no write rule on the host's /dev, but do in bubblewrap's private one.
    let writable = writable_devices(&hidden.deny, &hidden.reveal);
    assert!(writable.contains(&"/dev/null".into()), "{writable:?}");
    assert!(
        !writable
            .iter()
            .any(|d| d.starts_with("/dev/pts") || d == Path::new("/dev/tty"))
    );
    let private = writable_devices(&[], &[]);
    assert!(private.contains(&"/dev/tty".into()) || !Path::new("/dev/tty").exists());
}

#[test]
fn the_systems_secrets_are_listed_by_pattern() {
    let dir = tempfile::tempdir().unwrap();
    let etc = dir.path().canonicalize().unwrap();
    tree(
        &etc,
        &[],
        &[
            "ssh/ssh_host_ed25519_key",
            "ssh/ssh_host_ed25519_key.pub",
            "ssh/ssh_config",
        ],
    );
    assert_eq!(
        glob(&etc, "ssh/ssh_host_*_key"),
        vec![etc.join("ssh/ssh_host_ed25519_key")]
    );
    assert_eq!(glob(&etc, "nothing/*"), Vec::<PathBuf>::new());
    // Where the machine has a shadow file, it is hidden.
    let home = etc.join("ssh");
    let hidden = hidden(&scope(&home, &[], &[]));
    if Path::new("/etc/shadow").exists() {
        assert!(
            hidden.deny.contains(&PathBuf::from("/etc/shadow")),
            "{hidden:?}"
        );
    }
}
