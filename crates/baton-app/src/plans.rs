//! Plan files: a task graph with checks as a person writes it (TOML, or JSON for `.json`
//! files), read and validated, and a run's plan written back out for review before it starts
//! (`--plan-only`).
//!
//! ```no_run
//! # async fn demo(runtime: baton::Runtime) -> baton::Result<()> {
//! let plan = baton_app::plans::load_plan("plan.toml".as_ref())?;
//! runtime.start_with_plan("ship the release", plan).await?;
//! # Ok(())
//! # }
//! ```

use std::path::{Path, PathBuf};

use baton_core::RunState;
use baton_core::task::{Plan, PlanFile};

use baton::Error;

/// Reads a plan file (TOML; `.json` files as JSON) and validates it; a file that cannot be read
/// or is not a valid plan is a usage error naming it.
pub fn load_plan(path: &Path) -> Result<Plan, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::usage(format!("cannot read plan file {}: {e}", path.display())))?;
    let parsed = if path.extension().is_some_and(|e| e == "json") {
        PlanFile::from_json(&text)
    } else {
        PlanFile::from_toml(&text)
    };
    parsed
        .and_then(PlanFile::validate)
        .map_err(|e| Error::usage(format!("plan file {}: {e}", path.display())))
}

/// Where a run's plan is written for review: `.baton/plans/RUN.toml` in the workspace (the
/// directory of the files a person edits).
pub fn review_path(workspace: &Path, run: &str) -> PathBuf {
    workspace
        .join(baton_tools::STATE_DIR)
        .join("plans")
        .join(format!("{run}.toml"))
}

/// Writes the run's plan as an editable plan file; returns its path.
pub fn write_review_file(workspace: &Path, state: &RunState) -> Result<PathBuf, Error> {
    let (Some(board), Some(run)) = (&state.board, &state.run_id) else {
        return Err(Error::failed("the run has no plan to write"));
    };
    let plan = Plan {
        tasks: board.tasks.iter().map(|t| t.spec.clone()).collect(),
        final_check: board.final_check.clone(),
    };
    let path = review_path(workspace, run.as_str());
    let write = || -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(&path, PlanFile::from_plan(&plan).to_toml())
    };
    write()
        .map_err(|e| Error::failed(format!("cannot write the plan to {}: {e}", path.display())))?;
    Ok(path)
}
