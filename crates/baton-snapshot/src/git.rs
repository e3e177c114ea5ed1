//! Running the `git` binary against the shadow repository, insulated from the machine and from
//! the workspace: an environment of its own (no inherited variable but `PATH`: no `GIT_*`, no
//! API key), no system or global configuration, settings pinned on the command line that start
//! no program, a fixed identity and dates given by the caller.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use crate::error::{Result, SnapshotError};

/// The author and committer of every snapshot commit (commits must not depend on the machine).
const IDENTITY_NAME: &str = "baton";
const IDENTITY_EMAIL: &str = "baton@localhost";

/// How to run git for one shadow repository.
#[derive(Clone, Debug)]
pub(crate) struct Git {
    pub(crate) git_dir: PathBuf,
    pub(crate) work_tree: PathBuf,
}

/// Settings given as `-c` on every call: they win over every configuration file, so neither a
/// file written into the shadow repository nor anything in the workspace can make git run a
/// program, reach the network or look into a nested repository.
const PINNED: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.attributesFile=/dev/null",
    "core.excludesFile=/dev/null",
    "core.pager=cat",
    "core.askPass=",
    "core.sshCommand=false",
    "core.gitProxy=",
    "core.untrackedCache=false",
    "core.splitIndex=false",
    "credential.helper=",
    "diff.external=",
    "diff.ignoreSubmodules=all",
    "status.submoduleSummary=false",
    "submodule.recurse=false",
    "fetch.recurseSubmodules=false",
    "protocol.allow=never",
    "gc.auto=0",
    "maintenance.auto=false",
];

/// One git run on a shadow repository, as a [`GitLauncher`] sees it.
#[derive(Debug)]
pub struct GitInvocation<'a> {
    /// `git` and its arguments.
    pub argv: &'a [OsString],
    /// The whole environment git must get (nothing else of the caller's).
    pub env: &'a [(OsString, OsString)],
    /// The workspace: git's working directory, which a restore writes.
    pub work_tree: &'a Path,
    /// The shadow repository, which git writes.
    pub git_dir: &'a Path,
}

/// Starts baton's git some other way than directly — in the sandbox the program's commands run
/// in, as defence in depth: whatever git might still be made to run would be confined, without
/// network or secrets. Installed once per process with [`launch_git_with`].
pub trait GitLauncher: Send + Sync {
    /// A command that runs `invocation` (stdio is set by the caller), and what must stay alive
    /// until it has exited.
    fn command(
        &self,
        invocation: &GitInvocation<'_>,
    ) -> std::io::Result<(Command, Box<dyn std::any::Any + Send>)>;
}

static LAUNCHER: OnceLock<Box<dyn GitLauncher>> = OnceLock::new();

/// Runs every later git call on a shadow repository through `launcher` (first call wins;
/// `false` if one was installed already).
pub fn launch_git_with(launcher: Box<dyn GitLauncher>) -> bool {
    LAUNCHER.set(launcher).is_ok()
}

/// One git invocation being built.
pub(crate) struct Call<'a> {
    git: &'a Git,
    args: Vec<String>,
    index: Option<&'a Path>,
    date: Option<String>,
    stdin: Option<&'a [u8]>,
    /// `git init` makes the repository, so it gets neither GIT_DIR nor GIT_WORK_TREE.
    repo_env: bool,
    /// Exit codes that are answers, not failures (`rev-parse --verify --quiet` → 1).
    ok_codes: &'static [i32],
}

impl Git {
    pub(crate) fn call(&self, args: &[&str]) -> Call<'_> {
        Call {
            git: self,
            args: args.iter().map(|a| a.to_string()).collect(),
            index: None,
            date: None,
            stdin: None,
            repo_env: true,
            ok_codes: &[0],
        }
    }
}

impl<'a> Call<'a> {
    pub(crate) fn index(mut self, index: &'a Path) -> Self {
        self.index = Some(index);
        self
    }

    pub(crate) fn date(mut self, at: jiff::Timestamp) -> Self {
        self.date = Some(format!("@{} +0000", at.as_second()));
        self
    }

    pub(crate) fn stdin(mut self, input: &'a [u8]) -> Self {
        self.stdin = Some(input);
        self
    }

    pub(crate) fn without_repository(mut self) -> Self {
        self.repo_env = false;
        self
    }

    pub(crate) fn ok_codes(mut self, codes: &'static [i32]) -> Self {
        self.ok_codes = codes;
        self
    }

    fn command_text(&self) -> String {
        self.args.join(" ")
    }

    /// Runs git; a non-accepted exit status is an error carrying git's stderr.
    pub(crate) fn run(self) -> Result<Output> {
        let output = self.output()?;
        let code = output.status.code();
        if code.is_some_and(|c| self.ok_codes.contains(&c)) {
            return Ok(output);
        }
        Err(self.failure(&output))
    }

    pub(crate) fn failure(&self, output: &Output) -> SnapshotError {
        SnapshotError::Git {
            command: self.command_text(),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        }
    }

    /// Runs git and hands back whatever it did (for callers that judge the status themselves).
    pub(crate) fn output(&self) -> Result<Output> {
        if self.repo_env {
            crate::config::restore_own_config(&self.git.git_dir)?;
        }
        let argv = self.argv();
        let env = self.env();
        let (mut cmd, guard) = match LAUNCHER.get() {
            // `init` and `version` read nothing of a workspace: they run as they are.
            Some(launcher) if self.repo_env => {
                let invocation = GitInvocation {
                    argv: &argv,
                    env: &env,
                    work_tree: &self.git.work_tree,
                    git_dir: &self.git.git_dir,
                };
                launcher
                    .command(&invocation)
                    .map_err(|e| SnapshotError::io("git (confined)", e))?
            }
            _ => {
                let mut cmd = Command::new(&argv[0]);
                cmd.args(&argv[1..])
                    .current_dir(&self.git.work_tree)
                    // Nothing inherited: a `GIT_*` variable could point git elsewhere (a hook's
                    // GIT_DIR, GIT_INDEX_FILE, an object directory, GIT_CONFIG_PARAMETERS), and
                    // the rest is baton's environment — API keys included — which a program git
                    // started would see.
                    .env_clear()
                    .envs(env.iter().map(|(k, v)| (k, v)));
                (cmd, Box::new(()) as Box<dyn std::any::Any + Send>)
            }
        };
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.stdin(if self.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let spawn_error = |e: std::io::Error| {
            if e.kind() == std::io::ErrorKind::NotFound {
                SnapshotError::GitMissing { source: e }
            } else {
                SnapshotError::io("git", e)
            }
        };
        let mut child = cmd.spawn().map_err(spawn_error)?;
        if let (Some(input), Some(mut pipe)) = (self.stdin, child.stdin.take()) {
            pipe.write_all(input)
                .map_err(|e| SnapshotError::io("git stdin", e))?;
        }
        let output = child
            .wait_with_output()
            .map_err(|e| SnapshotError::io("git", e));
        drop(guard);
        let output = output?;
        // A launcher that could not start git reports it as 127 (the shell's "not found").
        if output.status.code() == Some(127) && output.stdout.is_empty() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            if stderr.contains("No such file") || stderr.contains("not found") {
                return Err(SnapshotError::GitMissing {
                    source: std::io::Error::new(std::io::ErrorKind::NotFound, stderr.trim()),
                });
            }
        }
        Ok(output)
    }

    /// `git`, the pinned settings, then the call's arguments.
    fn argv(&self) -> Vec<OsString> {
        let mut argv: Vec<OsString> = vec!["git".into()];
        // On the command line, which wins over any file: nothing git could start on its own —
        // hooks, an fsmonitor, a pager, external diff or credential programs, protocols — and
        // no look into a nested repository (submodules are never recursed into or asked for
        // their status).
        for setting in PINNED {
            argv.push("-c".into());
            argv.push(setting.into());
        }
        argv.extend(self.args.iter().map(OsString::from));
        argv
    }

    /// The whole environment git gets: `PATH` and git's own settings, nothing else of baton's.
    fn env(&self) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> = Vec::new();
        let mut set = |k: &str, v: &std::ffi::OsStr| env.push((k.into(), v.to_owned()));
        if let Some(path) = std::env::var_os("PATH") {
            set("PATH", &path);
        }
        if self.repo_env {
            set("GIT_DIR", self.git.git_dir.as_os_str());
            set("GIT_WORK_TREE", self.git.work_tree.as_os_str());
        }
        for (k, v) in [
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_ATTR_NOSYSTEM", "1"),
            ("GIT_NO_REPLACE_OBJECTS", "1"),
            ("GIT_OPTIONAL_LOCKS", "0"),
            ("GIT_PROTOCOL_FROM_USER", "0"),
            ("GIT_TERMINAL_PROMPT", "0"),
            ("GIT_AUTHOR_NAME", IDENTITY_NAME),
            ("GIT_AUTHOR_EMAIL", IDENTITY_EMAIL),
            ("GIT_COMMITTER_NAME", IDENTITY_NAME),
            ("GIT_COMMITTER_EMAIL", IDENTITY_EMAIL),
            // Messages in one language, so that errors read the same everywhere.
            ("LC_ALL", "C"),
        ] {
            set(k, v.as_ref());
        }
        if let Some(index) = self.index {
            set("GIT_INDEX_FILE", index.as_os_str());
        }
        if let Some(date) = &self.date {
            set("GIT_AUTHOR_DATE", date.as_ref());
            set("GIT_COMMITTER_DATE", date.as_ref());
        }
        env
    }

    /// Runs git and returns its stdout, trimmed of the final newline.
    pub(crate) fn text(self) -> Result<String> {
        let output = self.run()?;
        let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
        while text.ends_with('\n') {
            text.pop();
        }
        Ok(text)
    }
}
