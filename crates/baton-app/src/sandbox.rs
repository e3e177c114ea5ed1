//! `baton sandbox -- CMD`: one command run under the workspace's sandbox and policy, as a
//! run's `shell` call would be, outside any run.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use baton::config::{self, ConfigLayer};
use baton::{Error, exec::build};
use baton_sandbox::Output;
use baton_sandbox::policy::Action;

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
