//! `supervisors/RUN.pid` in the workspace's state directory: who supervises a run, as
//! "pid start-time host" — what `baton stop` signals and `baton attach` watches.
//!
//! The supervisor keeps its pidfile open while it lives, so a reader on the same machine checks
//! that the process the file names really holds it: a pidfile that was planted (issue 47: a
//! `.baton/supervisors` symlink migrated into the state directory), or that names a pid reused
//! since, never makes `baton stop` signal some other process.

use std::fs::File;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use baton_core::RunId;
use baton_store::{Holder, RunSummary};

use baton::Error;

/// A run's pidfile, held by its live supervisor. Removed when dropped (the supervisor ends); one
/// left by a killed supervisor names a dead process and is ignored.
pub struct PidFile {
    workspace: PathBuf,
    path: PathBuf,
    /// Held open for readers' check (see the module's doc).
    _held: File,
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
            baton_state::make_private_dir(dir)
                .map_err(|e| Error::failed(format!("cannot create {}: {e}", dir.display())))?;
        }
        baton::settings::keep_state_out_of_git(workspace);
        let me = Holder::this_process();
        let start = me.pid_start.map_or("-".to_string(), |s| s.to_string());
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&path)
            .and_then(|mut file| {
                use std::io::Write;
                file.write_all(format!("{} {start} {}\n", me.pid, me.host).as_bytes())?;
                Ok(file)
            });
        let held =
            written.map_err(|e| Error::failed(format!("cannot write {}: {e}", path.display())))?;
        Ok(PidFile {
            workspace: workspace.to_path_buf(),
            path,
            _held: held,
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

/// The live supervisor of a run, if its pidfile names one. On this machine the process must
/// also hold the pidfile open (only its supervisor does); a symlink is never read.
pub fn live_supervisor(workspace: &Path, run_id: &RunId) -> Option<Holder> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(pidfile_path(workspace, run_id))
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() {
        return None;
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut file, &mut text).ok()?;
    let mut fields = text.split_whitespace();
    let holder = Holder {
        pid: fields.next()?.parse().ok()?,
        pid_start: fields.next()?.parse().ok(),
        host: fields.next()?.to_string(),
        worker_id: None,
    };
    if holder.is_known_dead() {
        return None;
    }
    if holder.host == Holder::this_process().host && !holds_open(holder.pid, &meta) {
        return None;
    }
    Some(holder)
}

/// Whether process `pid` has the file of `meta` open (one of `/proc/PID/fd/*` is it). A process
/// whose descriptors cannot be read (another user's) does not.
fn holds_open(pid: u32, meta: &std::fs::Metadata) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::metadata(fd.path()).is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What `baton stop` relies on: only a process that has the pidfile open counts as the
    /// supervisor it names — not another live process (a planted file naming it, or a pid
    /// reused), even one started by the holder itself (descriptors are close-on-exec).
    #[test]
    fn only_the_process_holding_the_pidfile_is_its_supervisor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.pid");
        let held = std::fs::File::create(&path).unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        assert!(holds_open(std::process::id(), &meta));
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let verdict = holds_open(other.id(), &meta);
        other.kill().unwrap();
        other.wait().unwrap();
        assert!(!verdict, "a process that does not hold the pidfile passed");
        drop(held);
        assert!(!holds_open(std::process::id(), &meta));
    }

    /// Field 22 of /proc/PID/stat: the start time `Holder::pid_start` holds.
    fn start_time(pid: u32) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let after_comm = &stat[stat.rfind(')').unwrap() + 2..];
        after_comm.split(' ').nth(19).unwrap().parse().unwrap()
    }

    /// A pidfile someone else wrote naming a live process — its pid, its real start time, this
    /// host — names no supervisor (`baton stop` would have signalled it); the file a supervisor
    /// writes and holds does. (The state directory is the real one for a fresh temporary
    /// workspace, removed at the end.)
    #[test]
    fn a_planted_pidfile_naming_a_live_process_names_no_supervisor() {
        let ws = tempfile::tempdir().unwrap();
        let state = baton_state::StateDir::for_workspace(ws.path());
        let planted = RunId::from_string("run-planted");
        let mut victim = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let path = pidfile_path(ws.path(), &planted);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let host = Holder::this_process().host;
        let start = start_time(victim.id());
        std::fs::write(&path, format!("{} {start} {host}\n", victim.id())).unwrap();
        let found = live_supervisor(ws.path(), &planted);

        let real = RunId::from_string("run-real");
        let pidfile = PidFile::create(ws.path(), &real).unwrap();
        let me = live_supervisor(ws.path(), &real);
        drop(pidfile);
        victim.kill().unwrap();
        victim.wait().unwrap();
        let _ = std::fs::remove_dir_all(state.root());
        assert_eq!(found, None, "a planted pidfile named a supervisor");
        assert_eq!(me.map(|h| h.pid), Some(std::process::id()));
    }
}
