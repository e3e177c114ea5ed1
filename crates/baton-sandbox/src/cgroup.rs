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

/// Where a memory cgroup per command can be made: the unified hierarchy's directory of baton's
/// own cgroup when its `memory` controller is on for children, else the v1 `memory`
/// hierarchy's; `None` when baton may create neither.
pub fn find_memory_base() -> Option<MemoryBase> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let writable = |base: &Path| {
        base.join("cgroup.procs").exists()
            && rustix::fs::access(base, rustix::fs::Access::WRITE_OK).is_ok()
    };
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let rel = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == "memory") {
            let base = Path::new("/sys/fs/cgroup/memory").join(rel);
            if writable(&base) {
                return Some(MemoryBase::V1(base));
            }
        } else if controllers.is_empty() {
            let base = Path::new("/sys/fs/cgroup").join(rel);
            let on_for_children = std::fs::read_to_string(base.join("cgroup.subtree_control"))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
            if on_for_children && writable(&base) {
                return Some(MemoryBase::V2(base));
            }
        }
    }
    None
}

/// Where memory cgroups are made, and which interface they have.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub enum MemoryBase {
    /// `memory.max` in the unified hierarchy.
    V2(PathBuf),
    /// `memory.limit_in_bytes` (and `memory.memsw.limit_in_bytes`) in the v1 hierarchy.
    V1(PathBuf),
}

/// One command's memory cgroup: a bound on the memory of its whole tree (RLIMIT_AS bounds each
/// process only).
#[derive(Debug)]
pub struct MemoryCgroup {
    cgroup: PidsCgroup,
}

impl MemoryCgroup {
    pub fn create(base: &MemoryBase, max_bytes: u64) -> std::io::Result<MemoryCgroup> {
        let (dir, files): (&Path, &[&str]) = match base {
            MemoryBase::V2(dir) => (dir, &["memory.max", "memory.swap.max"]),
            // memsw (memory + swap) must be set after, and not below, the memory limit.
            MemoryBase::V1(dir) => (
                dir,
                &["memory.limit_in_bytes", "memory.memsw.limit_in_bytes"],
            ),
        };
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = dir.join(format!("baton-mem-{}-{n}", std::process::id()));
        std::fs::create_dir(&dir)?;
        let cgroup = PidsCgroup { dir };
        let value = |file: &str| {
            if file == "memory.swap.max" {
                "0".to_string()
            } else {
                max_bytes.to_string()
            }
        };
        std::fs::write(cgroup.dir.join(files[0]), value(files[0]))?;
        if cgroup.dir.join(files[1]).exists() {
            std::fs::write(cgroup.dir.join(files[1]), value(files[1]))?;
        }
        Ok(MemoryCgroup { cgroup })
    }

    pub fn procs_file(&self) -> PathBuf {
        self.cgroup.procs_file()
    }
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
