//! The paths themselves: what is hidden, and what of a home directory stays readable.

/// Relative to the home directory: files and directories that hold keys, tokens, passwords or
/// what the user typed. Other users' homes are protected by their permissions (commands have no
/// capability to override them). Under the home directory's allow-list these are hidden anyway;
/// the list still matters inside what the allow-list shows (a toolchain's directory, a workspace
/// in the home) and where the allow-list cannot apply (a home inside a writable path).
pub const DEFAULT_DENY_READ: &[&str] = &[
    // Keys and cloud credentials.
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".oci",
    ".config/gcloud",
    ".docker/config.json",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".password-store",
    ".local/share/keyrings",
    ".config/op",
    ".op",
    ".config/rclone",
    ".s3cfg",
    // Forges, registries and git.
    ".config/gh",
    ".config/hub",
    ".config/github-copilot",
    ".config/git/credentials",
    ".git-credentials",
    ".netrc",
    ".npmrc",
    ".yarnrc.yml",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    // Databases.
    ".pgpass",
    ".my.cnf",
    // Other agents' tokens, and baton's own configuration (trusted workspaces).
    ".claude",
    ".claude.json",
    ".codex",
    ".gemini",
    ".config/baton",
    // Browsers.
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    // Shell and REPL histories: what the user typed, passwords included.
    ".bash_history",
    ".zsh_history",
    ".zhistory",
    ".histfile",
    ".sh_history",
    ".local/share/fish/fish_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".lesshst",
    ".irb_history",
    ".pry_history",
    ".rediscli_history",
    ".dbshell",
    ".mongosh",
    ".wget-hsts",
];

/// Absolute: the system's password hashes, sudo rules and host keys — readable by root, who
/// keeps its uid in the sandbox (a `*` matches within one name).
pub const SYSTEM_DENY_READ: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/security/opasswd",
    "/etc/ssh/ssh_host_*_key",
];

/// Relative to the home directory: what of it a command may read — the toolchains and their
/// caches (a `*` matches within one name). Everything else in the home is hidden.
pub const HOME_ALLOW_READ: &[&str] = &[
    ".cargo",
    ".rustup",
    ".pyenv",
    ".rbenv",
    ".nvm",
    ".volta",
    ".bun",
    ".deno",
    ".npm",
    ".yarn",
    ".gem",
    ".m2",
    ".gradle",
    ".sdkman",
    ".asdf",
    ".ghcup",
    ".opam",
    ".elan",
    "go",
    ".conda",
    "miniconda3",
    "anaconda3",
    "miniforge3",
    ".dotnet",
    ".nuget/packages",
    ".julia",
    ".stack",
    ".cabal",
    ".pub-cache",
    ".local/bin",
    ".local/lib/python*",
    ".local/share/pnpm",
    ".local/share/uv",
    ".local/share/mise",
    ".local/share/pipx",
    ".local/share/virtualenvs",
    ".cache/pip",
    ".cache/uv",
    ".cache/pypoetry",
    ".cache/go-build",
    ".cache/yarn",
    ".cache/pnpm",
    ".cache/ms-playwright",
    ".cache/sccache",
    ".cache/bazel",
    ".cache/node",
    ".cache/deno",
    // baton's own caches (test servers, the embedding model).
    ".cache/baton-*",
    // git's identity and settings (`GIT_CONFIG_GLOBAL` points there).
    ".gitconfig",
    ".config/git",
];

/// Under the Landlock backend (the host's `/dev`): the only devices a command may open. Every
/// terminal (`/dev/pts/*`, `/dev/tty*`, `/dev/console`, `/dev/ptmx`), console memory (`vcs*`),
/// disk (`/dev/vda`: the whole filesystem, for root) and other device is left out. A terminal
/// handed to the command as an open descriptor keeps working: Landlock checks opens.
/// Under bubblewrap, `/dev` is its own minimal one with a private `devpts`.
pub const DEV_ALLOW: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];
