//! How a run's commands execute: the `[sandbox]` table turned into a [`Sandbox`] (isolation:
//! mode, network, limits, backend) and a [`Policy`] (which commands may run), read from the
//! built-in rules, the user's `policy.toml` and the workspace's (or a given) policy file.
//!
//! The sandbox re-executes a trampoline (`baton __sandbox-exec`) to confine each command: an
//! application built on this crate calls [`crate::sandbox_trampoline`] first thing in `main`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use baton_sandbox::policy::{Action, AskBehaviour, Policy};
use baton_sandbox::{Backend, BackendChoice, Limits, Mode, Output, Sandbox, SandboxConfig};
use baton_tools::ExecEnv;

use crate::Error;
use crate::config::{self, ConfigLayer};

fn limit(value: Option<u64>, default: Option<u64>, unit: u64) -> Option<u64> {
    match value {
        Some(0) => None,
        Some(v) => Some(v.saturating_mul(unit)),
        None => default,
    }
}

/// The sandbox configuration and policy files from the merged layer and the flags.
fn resolve(
    workspace: &Path,
    layer: &ConfigLayer,
) -> Result<(SandboxConfig, Vec<PathBuf>, AskBehaviour), Error> {
    let s = layer.sandbox.clone().unwrap_or_default();
    let mode: Mode = match &s.mode {
        Some(m) => m.parse().map_err(|e: String| Error::usage(e))?,
        None => Mode::default(),
    };
    let backend: BackendChoice = match &s.backend {
        Some(b) => b.parse().map_err(|e: String| Error::usage(e))?,
        None => BackendChoice::Auto,
    };
    let ask = match s.ask.as_deref() {
        None | Some("refuse") => AskBehaviour::Refuse,
        Some("pause") => AskBehaviour::Pause,
        Some(other) => {
            return Err(Error::usage(format!(
                "[sandbox] ask = \"{other}\": use \"refuse\" or \"pause\""
            )));
        }
    };
    let unix_sockets = s.unix_sockets.unwrap_or_default();
    if let Some(relative) = unix_sockets.iter().find(|p| !p.is_absolute()) {
        return Err(Error::usage(format!(
            "[sandbox] unix_sockets: {} is not an absolute path",
            relative.display()
        )));
    }
    let d = Limits::default();
    let config = SandboxConfig {
        mode,
        allow_network: s.allow_network.unwrap_or(false),
        limits: Limits {
            cpu_secs: limit(s.cpu_secs, d.cpu_secs, 1),
            memory_bytes: limit(s.memory_mb, d.memory_bytes, 1 << 20),
            max_processes: limit(s.max_processes, d.max_processes, 1),
            file_size_bytes: limit(s.file_size_mb, d.file_size_bytes, 1 << 20),
            open_files: limit(s.open_files, d.open_files, 1),
            tmp_bytes: limit(s.tmp_size_mb, d.tmp_bytes, 1 << 20),
        },
        env_allowlist: s.env.unwrap_or_default(),
        backend,
        allow_unsandboxed: s.dangerously_unsandboxed.unwrap_or(false),
        writable_paths: s.writable.unwrap_or_default(),
        unix_sockets,
        deny_read: s.deny_read.unwrap_or_default(),
        allow_read: s.allow_read.unwrap_or_default(),
    };
    let mut policy_files = Vec::new();
    if let Some(user) = config::user_config_path(|k| std::env::var(k).ok()) {
        policy_files.push(user.with_file_name("policy.toml"));
    }
    policy_files.push(match s.policy {
        Some(path) => path,
        None => workspace.join(".baton/policy.toml"),
    });
    Ok((config, policy_files, ask))
}

/// The sandbox and the policy for `layer`'s `[sandbox]` table; warns on stderr when commands
/// will run without isolation or with full access (a person must see that).
pub fn build(
    workspace: &Path,
    layer: &ConfigLayer,
) -> Result<(Sandbox, Policy, AskBehaviour), Error> {
    let (config, policy_files, ask) = resolve(workspace, layer)?;
    let policy = Policy::load(&policy_files).map_err(Error::usage)?;
    let trampoline = std::env::current_exe()
        .map_err(|e| Error::failed(format!("cannot find this executable for the sandbox: {e}")))?;
    let sandbox = Sandbox::new(config, &trampoline).map_err(Error::usage)?;
    if sandbox.backend() == Backend::Unsandboxed {
        eprintln!(
            "WARNING: commands run WITHOUT ANY SANDBOX (--dangerously-unsandboxed): they can \
             write anywhere you can, reach the network and read your files."
        );
    } else if sandbox.config().mode == Mode::FullAccess {
        eprintln!(
            "warning: sandbox mode full-access: commands may write anywhere you can (limits, \
             the environment allowlist and the network switch still apply)"
        );
    }
    tracing::info!("sandbox: {}", sandbox.summary());
    Ok((sandbox, policy, ask))
}

/// The sandbox and policy a run's commands go through.
///
/// The sandbox's trampoline is this process's own executable; a program that is not `baton`
/// dispatches it with [`crate::sandbox_trampoline`].
pub fn exec_env(workspace: &Path, layer: &ConfigLayer) -> Result<ExecEnv, Error> {
    let (sandbox, policy, ask) = build(workspace, layer)?;
    Ok(ExecEnv {
        ask,
        ..ExecEnv::new(sandbox, policy)
    })
}

/// How one command under the sandbox ([`run_command`]) ended.
#[derive(Debug, PartialEq, Eq)]
pub enum CommandEnd {
    /// The policy refused it (or would ask a person): nothing ran. Why, in words.
    Refused(String),
    /// Killed, with everything it started, at the timeout.
    TimedOut(Duration),
    /// It exited with this code.
    Exited(i32),
}

/// Runs `command` once in `workspace` under `layer`'s sandbox and policy — what a run's `shell`
/// call would get — with the environment minus credentials, its output on this process's
/// stdout and stderr with `secrets` redacted (also across the pieces of a long line). A command
/// the policy allows but marks risky is explained to `note` first. `timeout` defaults to
/// `shell_timeout_secs`.
pub fn run_command(
    workspace: &Path,
    layer: &ConfigLayer,
    command: &[OsString],
    timeout: Option<Duration>,
    secrets: Vec<String>,
    note: &dyn Fn(&str),
) -> Result<CommandEnd, Error> {
    let (sandbox, policy, _) = build(workspace, layer)?;
    let words: Vec<String> = command
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    let line =
        shlex::try_join(words.iter().map(String::as_str)).unwrap_or_else(|_| words.join(" "));
    let decision = policy.decide(&line);
    match decision.action {
        Action::Forbid | Action::Ask => return Ok(CommandEnd::Refused(decision.explain(&line))),
        Action::Allow if decision.risky => note(&decision.explain(&line)),
        Action::Allow => {}
    }
    let timeout = timeout.unwrap_or_else(|| {
        Duration::from_secs(
            layer
                .shell_timeout_secs
                .unwrap_or(baton_core::Limits::default().shell_timeout_secs),
        )
    });
    let timeout = timeout.max(Duration::from_secs(1));
    let names: Vec<String> = config::SECRET_ENV_VARS
        .iter()
        .map(|s| s.to_string())
        .collect();
    let env = baton_tools::without_secrets(std::env::vars_os().collect(), &names);
    let prepared = sandbox
        .prepare(workspace, command, env)
        .map_err(Error::usage)?;
    let redactor = Arc::new(baton_core::Redactor::new(secrets));
    let output = Output::Filter(Arc::new(Redacting(redactor)));
    let finished = baton_sandbox::run(prepared, timeout, output)
        .map_err(|e| Error::failed(format!("could not start the sandboxed command: {e}")))?;
    Ok(match finished.timed_out {
        true => CommandEnd::TimedOut(timeout),
        false => CommandEnd::Exited(finished.code()),
    })
}

/// [`run_command`]'s output filter: secrets redacted, also across the pieces of a long line.
struct Redacting(Arc<baton_core::Redactor>);

impl baton_sandbox::StreamFilter for Redacting {
    fn filter(&self, text: &str) -> String {
        self.0.redact(text)
    }

    fn hold_back(&self, text: &str) -> usize {
        self.0.hold_back(text)
    }
}
