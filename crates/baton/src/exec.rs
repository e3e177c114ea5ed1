//! How a run's commands execute: the `[sandbox]` table turned into a [`Sandbox`] (isolation:
//! mode, network, limits, backend) and a [`Policy`] (which commands may run), read from the
//! built-in rules, the user's `policy.toml` and the workspace's (or a given) policy file.
//!
//! The sandbox re-executes a trampoline (`baton __sandbox-exec`) to confine each command: an
//! application built on this crate calls [`crate::sandbox_trampoline`] first thing in `main`.

use std::path::{Path, PathBuf};

use baton_sandbox::policy::{AskBehaviour, Policy};
use baton_sandbox::{Backend, BackendChoice, Limits, Mode, Sandbox, SandboxConfig};
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
