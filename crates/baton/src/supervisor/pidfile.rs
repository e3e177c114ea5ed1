//! `supervisors/RUN.pid` in the workspace's state directory: who supervises a run, as
//! "pid start-time host" — what `baton stop` signals and `baton attach` watches.

use std::path::{Path, PathBuf};

use baton_core::RunId;
use baton_store::{Holder, RunSummary};

use crate::Error;

/// A run's pidfile, held by its live supervisor. Removed when dropped (the supervisor ends); one
/// left by a killed supervisor names a dead process and is ignored.
pub struct PidFile {
    workspace: PathBuf,
    path: PathBuf,
}

fn pidfile_path(workspace: &Path, run_id: &RunId) -> PathBuf {
    baton_state::StateDir::for_workspace(workspace)
        .supervisors()
        .join(format!("{run_id}.pid"))
}

impl PidFile {
    /// Claims the supervision of `run_id`. A usage error (like a run held by another process)
    /// while another supervisor of the run lives: its pidfile is what `baton stop` needs.
    pub fn create(workspace: &Path, run_id: &RunId) -> Result<PidFile, Error> {
        if let Some(other) = live_supervisor(workspace, run_id) {
            return Err(Error::usage(format!(
                "run {run_id} is already supervised by {}; `baton stop {}` pauses it",
                other.describe(),
                run_id.short()
            )));
        }
        let path = pidfile_path(workspace, run_id);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::failed(format!("cannot create {}: {e}", dir.display())))?;
        }
        crate::settings::keep_state_out_of_git(workspace);
        let me = Holder::this_process();
        let start = me.pid_start.map_or("-".to_string(), |s| s.to_string());
        std::fs::write(&path, format!("{} {start} {}\n", me.pid, me.host))
            .map_err(|e| Error::failed(format!("cannot write {}: {e}", path.display())))?;
        Ok(PidFile {
            workspace: workspace.to_path_buf(),
            path,
        })
    }

    /// Supervises `run_id` instead (a new run took the place of one that was never started).
    pub fn move_to(&mut self, run_id: &RunId) -> Result<(), Error> {
        let _ = std::fs::remove_file(&self.path);
        *self = PidFile::create(&self.workspace, run_id)?;
        Ok(())
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        // Leave no empty directory behind (it fails, as it should, while other runs' supervisors
        // keep theirs there).
        if let Some(dir) = self.path.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// The live supervisor of a run, if its pidfile names one.
pub fn live_supervisor(workspace: &Path, run_id: &RunId) -> Option<Holder> {
    let text = std::fs::read_to_string(pidfile_path(workspace, run_id)).ok()?;
    let mut fields = text.split_whitespace();
    let holder = Holder {
        pid: fields.next()?.parse().ok()?,
        pid_start: fields.next()?.parse().ok(),
        host: fields.next()?.to_string(),
        worker_id: None,
    };
    (!holder.is_known_dead()).then_some(holder)
}

/// The process working on a run right now: its supervisor, else a live lease holder.
pub fn working_on(workspace: &Path, summary: &RunSummary) -> Option<Holder> {
    live_supervisor(workspace, &summary.id).or_else(|| {
        summary
            .holder
            .as_ref()
            .filter(|h| h.alive && !h.holder.is_known_dead())
            .map(|h| h.holder.clone())
    })
}
