//! Sandbox wiring of the CLI: the `[sandbox]` config and the sandbox flags layered into the
//! execution environment of a run's commands, and the `baton sandbox -- CMD` command.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::anyhow;
use baton::config::{ConfigLayer, SandboxLayer};
use baton_app::sandbox::CommandEnd;
use baton_tools::ExecEnv;
use clap::Args;

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

/// `layer` with the sandbox flags over its `[sandbox]` table.
fn with_flags(layer: &ConfigLayer, flags: &SandboxFlags) -> Result<ConfigLayer, CliError> {
    if let Some(missing) = flags.policy.as_ref().filter(|p| !p.exists()) {
        return Err(CliError::usage(anyhow!(
            "policy file {} does not exist",
            missing.display()
        )));
    }
    Ok(ConfigLayer {
        sandbox: Some(
            layer
                .sandbox
                .clone()
                .unwrap_or_default()
                .overlay(flags_layer(flags)),
        ),
        ..layer.clone()
    })
}

/// The sandbox and policy a run's commands go through: the config's `[sandbox]` with the flags.
pub fn exec_env(
    workspace: &Path,
    layer: &ConfigLayer,
    flags: &SandboxFlags,
) -> Result<ExecEnv, CliError> {
    Ok(baton::exec::exec_env(
        workspace,
        &with_flags(layer, flags)?,
    )?)
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

/// `baton sandbox -- CMD`: one command under the current policy and sandbox.
pub fn run_one(
    workspace: &Path,
    layer: &ConfigLayer,
    args: SandboxArgs,
    secrets: Vec<String>,
) -> Result<u8, CliError> {
    let note = |text: &str| eprintln!("baton: note: {text}");
    let timeout = args.timeout.map(Duration::from_secs);
    let layer = with_flags(layer, &args.flags)?;
    let end =
        baton_app::sandbox::run_command(workspace, &layer, &args.command, timeout, secrets, &note)?;
    Ok(match end {
        CommandEnd::Refused(why) => {
            eprintln!("baton: refused: {why}");
            REFUSED
        }
        CommandEnd::TimedOut(after) => {
            eprintln!(
                "baton: timed out: the command and everything it started were killed after {} s",
                after.as_secs()
            );
            TIMED_OUT
        }
        CommandEnd::Exited(code) => u8::try_from(code).unwrap_or(exit::FAILED),
    })
}
