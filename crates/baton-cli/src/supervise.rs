//! Supervised runs: `baton run` / `resume` keep the agent in a child `baton` process (the same
//! binary with `--no-supervise`) under [`baton_app::supervisor`], which restarts it when it dies of
//! anything other than a verdict. This module turns the command line into the children's
//! arguments, shows the supervisor's events, and turns its ending into an exit code.

use std::path::{Path, PathBuf};

use baton_app::supervisor::{
    ChildCommand, ChildRole, DEFAULT_MAX_RESTARTS, SUPERVISED_ENV, Supervised, SupervisionReport,
    Supervisor,
};
use baton_core::{Event, EventRecord, RunId, RunStatus};
use tokio::process::Command;

use crate::commands::{self, check_run, file_and_env_layers, workspace_dir};
use crate::detach;
use crate::globals::{Globals, global_args};
use crate::output::{json_line, progress_line};
use crate::store::{latest_resumable_run, open_existing_store, resolve_run};
use crate::{CliError, ModelFlags, ResumeArgs, RunArgs, SuperviseFlags, exit};

type CliResult = Result<u8, CliError>;

/// Test hook: a supervised child with this set aborts at once, so that the restart limit can be
/// tested with a child that always crashes. Ignored unless the process is a supervised child.
const ABORT_HOOK_ENV: &str = "BATON_TEST_AGENT_ABORT";

fn supervised(flags: &SuperviseFlags, workspace: &Path) -> Result<(bool, u32), CliError> {
    let layer = file_and_env_layers(workspace)?;
    let max = flags
        .max_restarts
        .or(layer.max_restarts)
        .unwrap_or(DEFAULT_MAX_RESTARTS);
    Ok((!flags.no_supervise && layer.supervise != Some(false), max))
}

fn abort_if_asked() {
    if std::env::var_os(SUPERVISED_ENV).is_some() && std::env::var_os(ABORT_HOOK_ENV).is_some() {
        std::process::abort();
    }
}

pub async fn run(globals: Globals<'_>, mut args: RunArgs) -> CliResult {
    if let Some(plan) = args.tasks.check_only() {
        crate::plan_cmd::print_checked(&plan?);
        return Ok(exit::FINISHED);
    }
    use std::io::IsTerminal;
    let goal = baton_app::goal::resolve(
        args.goal.as_deref(),
        args.goal_file.as_deref(),
        std::io::stdin().is_terminal(),
        baton_app::goal::read_all_stdin,
    )?;
    args.goal = Some(goal);
    args.goal_file = None;
    let workspace = workspace_dir(globals.workspace)?;
    let (supervise, max_restarts) = supervised(&args.supervise, &workspace)?;
    if !supervise {
        abort_if_asked();
        return commands::run(&workspace, globals.store, args).await;
    }
    // Usage errors are reported here, once, before any process is started.
    check_run(&workspace, &args)?;
    let run_id = args
        .run_id
        .clone()
        .map_or_else(RunId::new, RunId::from_string);
    crate::logging::attach_run(&workspace, &run_id);
    let mut sandbox_flags = args.sandbox.to_args();
    if args.no_snapshots {
        sandbox_flags.push("--no-snapshots".into());
    }
    let mut rest = model_args(&args.model)?;
    rest.extend(sandbox_flags.iter().cloned());
    rest.extend(args.tasks.to_args());
    if args.json {
        rest.push("--json".into());
    }
    if let Some(file) = &args.output_last_message {
        // Absolute: the agent process may not share this one's idea of the current directory.
        let file = std::path::absolute(file).unwrap_or_else(|_| file.clone());
        rest.extend(["--output-last-message".into(), file.display().to_string()]);
    }
    // A long goal would not fit in one argument: the agent processes read it from a file.
    if args.goal().len() > baton_app::goal::PASS_AS_FILE_OVER {
        let file = baton_app::goal::write_for_children(&workspace, run_id.as_str(), args.goal())?;
        rest.extend(["--goal-file".to_string(), file.display().to_string()]);
    } else {
        rest.extend(["--".to_string(), args.goal().to_string()]);
    }
    let globals = Globals {
        workspace: &workspace,
        ..globals
    };
    if args.supervise.detach {
        let mut detached = vec!["run".into(), "--run-id".into(), run_id.to_string()];
        detached.extend(["--max-restarts".into(), max_restarts.to_string()]);
        detached.extend(rest);
        return detach::start(globals, &run_id, detached).await;
    }
    // The settings are journaled with the run; the output format and the sandbox are the
    // process's.
    let mut resume_flags = sandbox_flags;
    if args.json {
        resume_flags.push("--json".into());
    }
    let child = BatonChild {
        workspace: workspace.clone(),
        verbose: globals.verbose,
        new_run: rest,
        resume_flags,
    };
    supervise_child(
        globals,
        args.json,
        max_restarts,
        run_id,
        ChildRole::NewRun,
        child,
    )
    .await
}

pub async fn resume(globals: Globals<'_>, args: ResumeArgs) -> CliResult {
    let workspace = workspace_dir(globals.workspace)?;
    let (supervise, max_restarts) = supervised(&args.supervise, &workspace)?;
    if !supervise {
        abort_if_asked();
        return commands::resume(&workspace, globals.store, args).await;
    }
    let run_id = {
        let opened = open_existing_store(&workspace, globals.store).await?;
        let id = match &args.run {
            Some(prefix) => resolve_run(&opened, prefix).await?,
            None => latest_resumable_run(&opened).await?.id,
        };
        opened.store.close().await;
        id
    };
    crate::logging::attach_run(&workspace, &run_id);
    let mut flags = model_args(&args.model)?;
    flags.extend(args.sandbox.to_args());
    if let Some(plan) = &args.plan {
        // Every child gets it: once journaled, the same plan again changes nothing.
        let plan = std::path::absolute(plan).unwrap_or_else(|_| plan.clone());
        flags.extend(["--plan".into(), plan.display().to_string()]);
    }
    if args.no_snapshots {
        flags.push("--no-snapshots".into());
    }
    if args.json {
        flags.push("--json".into());
    }
    let globals = Globals {
        workspace: &workspace,
        ..globals
    };
    if args.supervise.detach {
        let mut detached = vec!["resume".into(), run_id.to_string()];
        detached.extend(["--max-restarts".into(), max_restarts.to_string()]);
        detached.extend(flags);
        return detach::start(globals, &run_id, detached).await;
    }
    let child = BatonChild {
        workspace: workspace.clone(),
        verbose: globals.verbose,
        new_run: Vec::new(),
        resume_flags: flags,
    };
    supervise_child(
        globals,
        args.json,
        max_restarts,
        run_id,
        ChildRole::Resume,
        child,
    )
    .await
}

/// The model flags as given, to pass on to a child: as data (one `--settings-layer` JSON
/// argument holding the layer they make), so a new setting needs no spelling out here.
fn model_args(flags: &ModelFlags) -> Result<Vec<String>, CliError> {
    let layer = commands::flags_layer_checked(flags)?;
    if layer == baton::config::ConfigLayer::default() {
        return Ok(Vec::new());
    }
    let mut value = serde_json::to_value(&layer)?;
    // Unset keys are left out: the argument stays short in `ps`.
    if let serde_json::Value::Object(map) = &mut value {
        map.retain(|_, v| !v.is_null());
    }
    Ok(vec!["--settings-layer".into(), value.to_string()])
}

/// A child: this binary again, with the global options and `--no-supervise`.
struct BatonChild {
    workspace: PathBuf,
    verbose: u8,
    /// `run` arguments after `--run-id ID`, for a child that creates the run.
    new_run: Vec<String>,
    /// Flags every `resume` child gets (a `baton resume`'s overrides; none after a `run`, whose
    /// settings are journaled).
    resume_flags: Vec<String>,
}

impl ChildCommand for BatonChild {
    fn command(&self, run_id: &RunId, role: ChildRole) -> Result<Command, baton::Error> {
        let exe = std::env::current_exe().map_err(|e| {
            baton::Error::failed(format!(
                "cannot find the baton executable to start the agent: {e}"
            ))
        })?;
        let mut command = Command::new(exe);
        command.args(global_args(Globals {
            workspace: &self.workspace,
            store: None,
            verbose: self.verbose,
        }));
        match role {
            ChildRole::NewRun => {
                command.args(["run", "--no-supervise", "--run-id", run_id.as_str()]);
                command.args(&self.new_run);
            }
            ChildRole::Resume => {
                command.args(["resume", run_id.as_str(), "--no-supervise"]);
                command.args(&self.resume_flags);
            }
        }
        Ok(command)
    }
}

/// The supervisor's own events, in the format of the children's.
struct Shown {
    json: bool,
}

impl SupervisionReport for Shown {
    fn journaled(&self, record: &EventRecord) {
        use std::io::Write;
        if self.json {
            let _ = writeln!(std::io::stdout(), "{}", json_line(record));
        } else if let Some(line) = progress_line(&record.event, &baton_core::RunState::default()) {
            let _ = writeln!(std::io::stderr(), "{line}");
        }
    }

    fn not_journaled(&self, event: &Event) {
        // The JSONL stream carries journaled events and nothing else: stderr only.
        if let Some(line) = progress_line(event, &baton_core::RunState::default()) {
            eprintln!("{line}");
        }
    }
}

/// Supervises `run_id` with children made by `child`; the exit code.
async fn supervise_child(
    globals: Globals<'_>,
    json: bool,
    max_restarts: u32,
    run_id: RunId,
    role: ChildRole,
    child: BatonChild,
) -> CliResult {
    let supervisor = Supervisor {
        workspace: globals.workspace.to_path_buf(),
        store: globals.store.map(str::to_owned),
        run_id,
        role,
        max_restarts,
        child: Box::new(child),
        report: Box::new(Shown { json }),
    };
    let (run_id, ending) = supervisor.supervise().await?;
    Ok(match ending {
        Supervised::Exited(code) => code,
        Supervised::Ended(RunStatus::Finished) => exit::FINISHED,
        Supervised::Ended(RunStatus::Failed) => exit::FAILED,
        Supervised::Ended(_) => exit::PAUSED,
        Supervised::GaveUp { cause, restarts } => {
            eprintln!(
                "error: the agent process of run {run_id} {cause}; it was restarted {restarts} \
                 times, the limit (--max-restarts); `baton resume {}` continues the run",
                run_id.short()
            );
            exit::FAILED
        }
        Supervised::PausedWhileWaiting => {
            if !json {
                println!(
                    "run {run_id} paused\nresume it with `baton resume {}`",
                    run_id.short()
                );
            }
            exit::PAUSED
        }
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::{Cli, Command as CliCommand};

    fn parsed_run(args: &[&str]) -> RunArgs {
        match Cli::try_parse_from(args).map(|cli| cli.command) {
            Ok(CliCommand::Run(run)) => run,
            _ => panic!("not a run: {args:?}"),
        }
    }

    #[test]
    fn a_child_gets_the_model_flags_it_was_given() {
        let given = [
            "baton",
            "run",
            "--provider",
            "openai",
            "--base-url",
            "http://h/v1",
            "--model",
            "m",
            "--max-turns",
            "7",
            "--tool-choice",
            "required",
            "--context-window",
            "4096",
            "--no-stream",
            "goal",
        ];
        let flags = model_args(&parsed_run(&given).model).unwrap();
        assert_eq!(flags.len(), 2, "one --settings-layer argument: {flags:?}");
        let mut again = vec!["baton", "run"];
        again.extend(flags.iter().map(String::as_str));
        again.extend(["--", "goal"]);
        let child = parsed_run(&again).model;
        // The child's layer is exactly the parent's: every flag arrived, as data.
        let parent = commands::flags_layer_checked(&parsed_run(&given).model).unwrap();
        assert_eq!(commands::flags_layer_checked(&child).unwrap(), parent);
        assert_eq!(parent.max_turns, Some(7));
        assert_eq!(parent.context.and_then(|c| c.window), Some(4096));
        // And passing it on again changes nothing (a detached supervisor's children).
        assert_eq!(model_args(&child).unwrap(), flags);
        assert!(
            model_args(&parsed_run(&["baton", "run", "g"]).model)
                .unwrap()
                .is_empty()
        );
    }

    /// Every run-shaping flag is the config key of its name: set them all at once and each
    /// lands in the layer (a flag with no key, or one that sets nothing, fails here).
    #[test]
    fn every_flag_is_a_config_key() {
        use clap::{CommandFactory, Parser};
        #[derive(Parser)]
        struct Only {
            #[command(flatten)]
            model: ModelFlags,
        }
        let mut given: Vec<String> = vec!["baton".into()];
        let mut flags = 0;
        for arg in Only::command().get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            // `--mcp*` make their own layer (`McpFlags::layer`), which reads files.
            if arg.is_hide_set() || long.contains("mcp") || long == "help" {
                continue;
            }
            given.push(format!("--{long}"));
            flags += 1;
            // A switch (`--no-stream`: no value, it sets its key's word) is given bare.
            let switch = arg.get_num_args().is_some_and(|n| n.max_values() == 0);
            if !arg.get_action().takes_values() || switch {
                continue;
            }
            let value = match arg.get_value_names().and_then(|v| v.first()) {
                None => continue,
                Some(name) => match name.as_str() {
                    "N" => "7",
                    "USD" => "1.5",
                    "DURATION" => "5m",
                    "URL" => "http://h/v1",
                    "NAME" if long == "provider" => "openai",
                    "NAME" => "m",
                    "MODE" => "required",
                    "WORD" => "high",
                    choices => choices.split('|').next().unwrap(),
                },
            };
            given.push(value.into());
        }
        let layer = commands::flags_layer_checked(&Only::parse_from(&given).model).unwrap();
        let value = serde_json::to_value(&layer).unwrap();
        let set: Vec<&String> = value
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, _)| k)
            .collect();
        assert!(flags >= 20, "{given:?}");
        assert_eq!(
            set.len(),
            flags,
            "each flag sets its key: {given:?} gave {set:?}"
        );
    }
}
