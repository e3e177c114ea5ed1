//! Task-graph flags of `run` / `resume`, plan files, and `baton plan`.

use std::path::Path;

use anyhow::anyhow;
use baton_core::task::Plan;
use baton_core::{OnTaskFailure, Planning, RunSettings};
use clap::{Args, ValueEnum};

use crate::CliError;

/// Tasks at once, at most: each is a run with its own model calls and a copy of the workspace.
const MAX_PARALLEL: u32 = 16;

/// How `run` gets and works through a task graph.
#[derive(Args, Clone, Default)]
pub struct TaskFlags {
    /// A plan file (`[[task]]` tables with id, title, instructions, deps, check, risky), or
    /// `auto`: the model plans first (`submit_plan`).
    #[arg(long, value_name = "FILE|auto")]
    plan: Option<String>,
    /// Plan, write the plan to .baton/plans/RUN.toml and pause for review (`baton resume`
    /// works through it, `baton resume --plan FILE` replaces it first). With `--plan FILE`:
    /// check the file and print it, start nothing.
    #[arg(long)]
    plan_only: bool,
    /// Run-level check after all tasks (e.g. the test suite); replaces the plan's `check`.
    #[arg(long, value_name = "CMD")]
    check: Option<String>,
    /// Failed checks a task may fix within one approach (default 3).
    #[arg(long, value_name = "N", value_parser = crate::flag_values::whole::<u32>)]
    fix_attempts: Option<u32>,
    /// Approaches per task, each after rolling the workspace back (default 2).
    #[arg(long, value_name = "N", value_parser = crate::flag_values::whole::<u32>)]
    approaches: Option<u32>,
    /// Independent tasks worked on at once (default 1), each by its own run in its own
    /// worktree (`worktrees/RUN` in the state directory), merged back when verified; a merge conflict becomes a
    /// follow-up task.
    #[arg(long, value_name = "N", value_parser = crate::flag_values::whole::<u32>)]
    parallel: Option<u32>,
    /// When a task fails for good: go on with the tasks that do not need it (`continue`,
    /// default) or pause for a person (`pause`).
    #[arg(long, value_name = "WHAT")]
    on_task_failure: Option<FailurePolicy>,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum FailurePolicy {
    Continue,
    Pause,
}

/// What `run` is asked to do about planning.
pub enum PlanRequest {
    /// One conversation, no task graph.
    None,
    /// Work through this plan.
    File(Plan),
    /// Let the model plan (and maybe stop for review).
    Planner(Planning),
    /// `--plan FILE --plan-only`: just check and print the file.
    CheckOnly(Plan),
}

impl TaskFlags {
    /// Reads and validates the plan file, applies the task settings; usage errors name the
    /// file and the problem.
    pub fn resolve(&self, settings: &mut RunSettings) -> Result<PlanRequest, CliError> {
        let tasks = &mut settings.tasks;
        if let Some(n) = self.fix_attempts {
            tasks.fix_attempts = positive(n, "--fix-attempts")?;
        }
        if let Some(n) = self.approaches {
            tasks.approaches = positive(n, "--approaches")?;
        }
        if let Some(n) = self.parallel {
            let n = positive(n, "--parallel")?;
            if n > MAX_PARALLEL {
                return Err(CliError::usage(anyhow!(
                    "--parallel {n} is more than {MAX_PARALLEL} tasks at once"
                )));
            }
            tasks.parallel = n;
        }
        if let Some(policy) = self.on_task_failure {
            tasks.on_failure = match policy {
                FailurePolicy::Continue => OnTaskFailure::Continue,
                FailurePolicy::Pause => OnTaskFailure::Pause,
            };
        }
        if let Some(check) = &self.check
            && check.trim().is_empty()
        {
            return Err(CliError::usage(anyhow!("--check is empty: give a command")));
        }
        let request = match (self.plan.as_deref(), self.plan_only) {
            (None, false) => {
                if self.check.is_some() {
                    return Err(CliError::usage(anyhow!(
                        "--check needs a task graph: add `--plan FILE` or `--plan auto`"
                    )));
                }
                PlanRequest::None
            }
            (None | Some("auto"), true) => PlanRequest::Planner(Planning::PlannerThenReview),
            (Some("auto"), false) => PlanRequest::Planner(Planning::Planner),
            (Some(path), only) => {
                let mut plan = load_plan(Path::new(path))?;
                if let Some(check) = &self.check {
                    plan.final_check = Some(check.clone());
                }
                if only {
                    PlanRequest::CheckOnly(plan)
                } else {
                    PlanRequest::File(plan)
                }
            }
        };
        if let PlanRequest::Planner(planning) = request {
            tasks.planning = planning;
        }
        Ok(request)
    }

    /// `--plan FILE --plan-only`: the checked plan (or the error), before anything about a
    /// model or a store is needed.
    pub fn check_only(&self) -> Option<Result<Plan, CliError>> {
        let path = self
            .plan
            .as_deref()
            .filter(|p| *p != "auto" && self.plan_only)?;
        Some(
            load_plan(Path::new(path))
                .map(|mut plan| {
                    if let Some(check) = &self.check {
                        plan.final_check = Some(check.clone());
                    }
                    plan
                })
                .map_err(CliError::from),
        )
    }

    /// The flags as given, for a supervised child (the plan path made absolute: the child
    /// may resolve paths elsewhere).
    pub fn to_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(plan) = &self.plan {
            let value = if plan == "auto" {
                plan.clone()
            } else {
                std::path::absolute(plan)
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|_| plan.clone())
            };
            args.extend(["--plan".into(), value]);
        }
        if self.plan_only {
            args.push("--plan-only".into());
        }
        let mut pair = |name: &str, value: Option<String>| {
            if let Some(value) = value {
                args.extend([name.to_string(), value]);
            }
        };
        pair("--check", self.check.clone());
        pair("--fix-attempts", self.fix_attempts.map(|n| n.to_string()));
        pair("--approaches", self.approaches.map(|n| n.to_string()));
        pair("--parallel", self.parallel.map(|n| n.to_string()));
        pair(
            "--on-task-failure",
            self.on_task_failure.map(|p| {
                match p {
                    FailurePolicy::Continue => "continue",
                    FailurePolicy::Pause => "pause",
                }
                .to_string()
            }),
        );
        args
    }
}

fn positive(n: u32, flag: &str) -> Result<u32, CliError> {
    if n == 0 {
        Err(CliError::usage(anyhow!("{flag} must be at least 1")))
    } else {
        Ok(n)
    }
}

pub use baton_app::plans::{load_plan, write_review_file};

/// Prints what `--plan FILE --plan-only` shows: the checked plan in file form.
pub fn print_checked(plan: &Plan) {
    use std::io::Write;
    let _ = write!(std::io::stdout(), "{}", baton_printer::plan::checked(plan));
}
