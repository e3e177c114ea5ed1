//! Sandbox wiring of the CLI: the `[sandbox]` config and flags turned into a [`Sandbox`] and a
//! [`Policy`], the `baton sandbox -- CMD` command, and the sandbox part of `baton doctor`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use baton_sandbox::policy::{Action, AskBehaviour, Policy};
use baton_sandbox::{Backend, BackendChoice, Limits, Mode, Output, Sandbox, SandboxConfig};
use baton_tools::ExecEnv;
use clap::Args;

use crate::config::{self, ConfigLayer, SandboxLayer};
use crate::{CliError, exit};

/// Exit code of `baton sandbox` when the execution policy refused the command (nothing ran).
pub const REFUSED: u8 = 126;
/// Exit code of `baton sandbox` when the command was killed at its timeout (as `timeout(1)`).
pub const TIMED_OUT: u8 = 124;

#[derive(Args, Clone, Default)]
pub struct SandboxFlags {
    /// How much commands may write: read-only, workspace-write (default), full-access.
    #[arg(long = "sandbox", value_name = "MODE")]
    mode: Option<String>,
    /// Let commands reach the network (off by default).
    #[arg(long)]
    allow_network: bool,
    /// Execution policy file, used instead of .baton/policy.toml.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Run commands WITHOUT isolation where the platform cannot sandbox them.
    #[arg(long)]
    dangerously_unsandboxed: bool,
}

impl SandboxFlags {
    /// The flags as given, to pass on to a supervised child process (they are not journaled
    /// with the run, so every child needs them).
    pub(crate) fn to_args(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(mode) = &self.mode {
            out.extend(["--sandbox".to_string(), mode.clone()]);
        }
        if self.allow_network {
            out.push("--allow-network".into());
        }
        if let Some(policy) = &self.policy {
            out.extend(["--policy".to_string(), policy.display().to_string()]);
        }
        if self.dangerously_unsandboxed {
            out.push("--dangerously-unsandboxed".into());
        }
        out
    }
}

#[derive(Args)]
pub struct SandboxArgs {
    #[command(flatten)]
    flags: SandboxFlags,
    /// Kill the command (and everything it started) after this many seconds.
    #[arg(long, value_name = "SECS", value_parser = crate::flag_values::whole::<u64>)]
    timeout: Option<u64>,
    /// The command and its arguments (after `--`).
    #[arg(required = true, last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

fn flags_layer(flags: &SandboxFlags) -> SandboxLayer {
    SandboxLayer {
        mode: flags.mode.clone(),
        allow_network: flags.allow_network.then_some(true),
        policy: flags.policy.clone(),
        dangerously_unsandboxed: flags.dangerously_unsandboxed.then_some(true),
        ..SandboxLayer::default()
    }
}

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
    flags: &SandboxFlags,
) -> Result<(SandboxConfig, Vec<PathBuf>, AskBehaviour), CliError> {
    let s = layer
        .sandbox
        .clone()
        .unwrap_or_default()
        .overlay(flags_layer(flags));
    let mode: Mode = match &s.mode {
        Some(m) => m.parse().map_err(|e: String| CliError::usage(anyhow!(e)))?,
        None => Mode::default(),
    };
    let backend: BackendChoice = match &s.backend {
        Some(b) => b.parse().map_err(|e: String| CliError::usage(anyhow!(e)))?,
        None => BackendChoice::Auto,
    };
    let ask = match s.ask.as_deref() {
        None | Some("refuse") => AskBehaviour::Refuse,
        Some("pause") => AskBehaviour::Pause,
        Some(other) => {
            return Err(CliError::usage(anyhow!(
                "[sandbox] ask = \"{other}\": use \"refuse\" or \"pause\""
            )));
        }
    };
    let unix_sockets = s.unix_sockets.unwrap_or_default();
    if let Some(relative) = unix_sockets.iter().find(|p| !p.is_absolute()) {
        return Err(CliError::usage(anyhow!(
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

fn build(
    workspace: &Path,
    layer: &ConfigLayer,
    flags: &SandboxFlags,
) -> Result<(Sandbox, Policy, AskBehaviour), CliError> {
    let (config, policy_files, ask) = resolve(workspace, layer, flags)?;
    if let Some(missing) = flags.policy.as_ref().filter(|p| !p.exists()) {
        return Err(CliError::usage(anyhow!(
            "policy file {} does not exist",
            missing.display()
        )));
    }
    let policy = Policy::load(&policy_files).map_err(CliError::usage)?;
    let trampoline = std::env::current_exe()
        .map_err(|e| anyhow!("cannot find baton's own executable for the sandbox: {e}"))?;
    let sandbox = Sandbox::new(config, &trampoline).map_err(CliError::usage)?;
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

/// Starts detecting the platform's sandbox support in the background (it spawns two short
/// processes), so it overlaps with opening the store instead of adding to start-up.
pub fn warm_up() {
    if let Ok(exe) = std::env::current_exe() {
        std::thread::spawn(move || {
            baton_sandbox::detect(&exe);
        });
    }
}

/// The sandbox and policy a run's commands go through.
pub fn exec_env(
    workspace: &Path,
    layer: &ConfigLayer,
    flags: &SandboxFlags,
) -> Result<ExecEnv, CliError> {
    let (sandbox, policy, ask) = build(workspace, layer, flags)?;
    Ok(ExecEnv {
        ask,
        ..ExecEnv::new(sandbox, policy)
    })
}

/// `baton sandbox -- CMD`: one command under the current policy and sandbox.
pub fn run_one(
    workspace: &Path,
    layer: &ConfigLayer,
    args: SandboxArgs,
    secrets: Vec<String>,
) -> Result<u8, CliError> {
    let (sandbox, policy, _) = build(workspace, layer, &args.flags)?;
    let words: Vec<String> = args
        .command
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    let line =
        shlex::try_join(words.iter().map(String::as_str)).unwrap_or_else(|_| words.join(" "));
    let decision = policy.decide(&line);
    match decision.action {
        Action::Forbid | Action::Ask => {
            eprintln!("baton: refused: {}", decision.explain(&line));
            return Ok(REFUSED);
        }
        Action::Allow if decision.risky => {
            eprintln!("baton: note: {}", decision.explain(&line));
        }
        Action::Allow => {}
    }
    let timeout = Duration::from_secs(
        args.timeout
            .or(layer.shell_timeout_secs)
            .unwrap_or(baton_core::Limits::default().shell_timeout_secs)
            .max(1),
    );
    let names: Vec<String> = config::SECRET_ENV_VARS
        .iter()
        .map(|s| s.to_string())
        .collect();
    let env = baton_tools::without_secrets(std::env::vars_os().collect(), &names);
    let prepared = sandbox
        .prepare(workspace, &args.command, env)
        .map_err(CliError::usage)?;
    let redactor = Arc::new(baton_core::Redactor::new(secrets));
    let output = Output::Filter(Arc::new(Redacting(redactor)));
    let finished = baton_sandbox::run(prepared, timeout, output)
        .map_err(|e| anyhow!("could not start the sandboxed command: {e}"))?;
    if finished.timed_out {
        eprintln!(
            "baton: timed out: the command and everything it started were killed after {} s",
            timeout.as_secs()
        );
        return Ok(TIMED_OUT);
    }
    Ok(u8::try_from(finished.code()).unwrap_or(exit::FAILED))
}

/// `baton sandbox`'s output filter: secrets redacted, also across the pieces of a long line.
struct Redacting(Arc<baton_core::Redactor>);

impl baton_sandbox::StreamFilter for Redacting {
    fn filter(&self, text: &str) -> String {
        self.0.redact(text)
    }

    fn hold_back(&self, text: &str) -> usize {
        self.0.hold_back(text)
    }
}

/// The sandbox lines of `baton doctor`.
pub fn doctor_report(workspace: &Path, layer: &ConfigLayer) -> String {
    let sandbox = match build(workspace, layer, &SandboxFlags::default()) {
        Ok((sandbox, policy, _)) => {
            let home = std::env::var_os("HOME").map(PathBuf::from);
            let details: String = sandbox
                .report(home.as_deref())
                .iter()
                .map(|line| format!("\n  {line}"))
                .collect();
            format!(
                "sandbox: {}{details}\npolicy: {} rules (built-in defaults + your files; a \
                 guard rail against mistakes — the sandbox is the boundary)",
                sandbox.summary(),
                policy.rules().len()
            )
        }
        Err(e) => format!("sandbox: NOT AVAILABLE: {:#}", e.error),
    };
    format!("{sandbox}\n{}", state_report(workspace))
}

/// Where the journal, snapshots and logs are, and whether commands can reach them.
fn state_report(workspace: &Path) -> String {
    let state = baton_state::StateDir::for_workspace(workspace);
    let root = state.root().display();
    if state.is_inside_workspace() {
        return format!(
            "state: {root} — INSIDE the workspace (no HOME, XDG_STATE_HOME or BATON_STATE_DIR): \
             commands that may write the workspace could change the journal; set BATON_STATE_DIR"
        );
    }
    let old = if state.has_old_layout() {
        format!(
            "; {} still holds state of the old layout, moved there by the next command",
            state.inputs_dir().display()
        )
    } else {
        String::new()
    };
    format!(
        "state: {root} (journal, snapshots, logs, worktrees; outside the workspace, not writable \
         by commands{old})"
    )
}
