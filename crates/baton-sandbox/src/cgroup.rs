//! A pids cgroup per command, where one can be created (root, or a delegated hierarchy). It is
//! the process bound that also holds for root, whom RLIMIT_NPROC does not restrict, and it lets
//! a timeout kill processes that left the command's process group.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(0);

/// The pids hierarchy directory of baton's own cgroup, if baton may create children in it.
pub fn find_base() -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut candidates = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let rel = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "pids") {
            candidates.push(Path::new("/sys/fs/cgroup/pids").join(rel));
        } else if controllers.is_empty() {
            let root = Path::new("/sys/fs/cgroup");
            let has_pids = std::fs::read_to_string(root.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == "pids"));
            if has_pids {
                candidates.push(root.join(rel));
            }
        }
    }
    // An access check, not a trial mkdir: creating a cgroup costs tens of milliseconds and
    // this runs at every baton start. A later creation failure falls back to RLIMIT_NPROC.
    candidates.into_iter().find(|base| {
        base.join("cgroup.procs").exists()
            && rustix::fs::access(base, rustix::fs::Access::WRITE_OK).is_ok()
    })
}

/// One command's cgroup; removed (after killing what is left in it) on drop.
#[derive(Debug)]
pub struct PidsCgroup {
    dir: PathBuf,
}

impl PidsCgroup {
    pub fn create(base: &Path, max: u64) -> std::io::Result<PidsCgroup> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("baton-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir)?;
        let cg = PidsCgroup { dir };
        std::fs::write(cg.dir.join("pids.max"), max.to_string())?;
        Ok(cg)
    }

    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    pub fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.procs_file())
            .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    /// SIGKILLs every process in the cgroup until it is empty (a fork bomb keeps forking while
    /// the list is read, so one pass is not enough). Bounded: gives up after a few seconds.
    pub fn kill_all(&self) {
        let start = std::time::Instant::now();
        loop {
            let pids = self.pids();
            if pids.is_empty() || start.elapsed() > std::time::Duration::from_secs(10) {
                return;
            }
            for pid in pids {
                if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        self.kill_all();
        // Killed processes leave the cgroup only once reaped; retry briefly, quickly at first.
        let mut pause = std::time::Duration::from_micros(100);
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while std::fs::remove_dir(&self.dir).is_err() && std::time::Instant::now() < give_up {
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(20));
        }
    }
}
