//! `baton plan`: a run's task graph with each task's state, and a checked plan file.

use baton_core::board::TaskStatus;
use baton_core::task::{Plan, PlanFile};
use baton_core::{Planning, RunState};

/// `baton plan [RUN]`: the run's task graph with each task's state, as a table, then the plan
/// file form.
pub fn render(state: &RunState) -> String {
    let Some(board) = &state.board else {
        return no_plan_text(state);
    };
    let mut out = format!(
        "{:<16} {:<9} {:>8}  {:<16} title\n",
        "task", "state", "approach", "depends on"
    );
    for entry in &board.tasks {
        let current = board.current.as_deref() == Some(entry.spec.id.as_str());
        let state = if current && entry.status == TaskStatus::Running {
            format!("running (attempt {})", entry.attempt)
        } else if let Some(d) = entry
            .delegation
            .as_ref()
            .filter(|_| entry.status == TaskStatus::Running)
        {
            let short = d.child_run.get(..12).unwrap_or(&d.child_run);
            match d.result {
                None => format!("running in run {short}"),
                Some(_) => format!("merging run {short}"),
            }
        } else {
            entry.status.as_str().to_string()
        };
        out.push_str(&format!(
            "{:<16} {:<9} {:>8}  {:<16} {}\n",
            entry.spec.id,
            state,
            entry.approach,
            if entry.spec.deps.is_empty() {
                "-".to_string()
            } else {
                entry.spec.deps.join(",")
            },
            entry.spec.title
        ));
    }
    if let Some(check) = &board.final_check {
        let result = match board.final_passed {
            Some(true) => "passed",
            Some(false) => "failed",
            None => "not run",
        };
        out.push_str(&format!("final check ({result}): {check}\n"));
    }
    out
}

/// What `baton plan` says about a run without a task graph: a planning run whose model never
/// submitted one is said so plainly (it is not a plain run).
fn no_plan_text(state: &RunState) -> String {
    let planning = state
        .settings
        .as_ref()
        .is_some_and(|s| s.tasks.planning != Planning::None);
    if !planning {
        return "this run has no task graph (start one with `--plan FILE` or `--plan auto`)\n"
            .to_string();
    }
    let status = match &state.pause {
        Some((baton_core::PauseReason::NoPlan, _)) => {
            "the run paused (no_plan) after telling it once".to_string()
        }
        Some((reason, _)) => format!("the run is paused ({})", reason.as_str()),
        None => format!("the run is {}", state.status.as_str()),
    };
    format!(
        "the model never submitted a plan: {status}. `baton resume` gives it another turn to \
         plan; `baton resume --plan FILE` supplies the plan instead\n"
    )
}

/// The checked plan in file form, as `--plan FILE --plan-only` shows it.
pub fn checked(plan: &Plan) -> String {
    format!(
        "plan OK: {} tasks{}\n{}",
        plan.tasks.len(),
        plan.final_check
            .as_deref()
            .map(|c| format!(", final check `{c}`"))
            .unwrap_or_default(),
        PlanFile::from_plan(plan).to_toml()
    )
}
