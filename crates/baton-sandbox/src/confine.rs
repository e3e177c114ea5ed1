//! Child-side confinement, applied by the trampoline to itself just before it execs the
//! command: resource limits, namespaces (Landlock backend), Landlock and seccomp. All of it is
//! inherited across `exec` and by every process the command starts.

#[cfg(target_os = "linux")]
pub mod namespaces;
#[cfg(target_os = "linux")]
mod seccomp;
#[cfg(target_os = "linux")]
pub mod sys;

#[cfg(target_os = "linux")]
pub use seccomp::{SeccompPolicy, apply_seccomp};

use crate::spec::{ExecSpec, Limits, Mode};
use rustix::process::{Resource, Rlimit, setrlimit};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// What the confinement actually achieved on this kernel, as reported by the probe.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enforced {
    /// `full`, `partial` or `none`.
    pub landlock: String,
    pub seccomp: bool,
    /// Whether the trampoline could make private mount and IPC namespaces (the Landlock
    /// backend's read-only filesystem and private SysV IPC).
    #[serde(default)]
    pub namespaces: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    #[error("setting the {resource} limit failed: {source}")]
    Rlimit {
        resource: &'static str,
        source: std::io::Error,
    },
    #[error("Landlock: {0}")]
    Landlock(String),
    #[error("seccomp: {0}")]
    Seccomp(String),
    #[error("dropping privileges: {0}")]
    Privileges(String),
    #[error("private namespaces: {0}")]
    Namespaces(String),
}

pub fn apply_limits(limits: &Limits, nproc_offset: u64) -> Result<(), ConfineError> {
    let table = [
        (Resource::Cpu, limits.cpu_secs, "CPU time"),
        (Resource::As, limits.memory_bytes, "memory"),
        (
            Resource::Nproc,
            limits.max_processes.map(|n| n.saturating_add(nproc_offset)),
            "process count",
        ),
        (Resource::Fsize, limits.file_size_bytes, "file size"),
        (Resource::Nofile, limits.open_files, "open files"),
        // Core dumps of a memory-limited process are large files nobody asked for.
        (Resource::Core, Some(0), "core size"),
    ];
    for (resource, value, name) in table {
        let Some(value) = value else { continue };
        let value = Some(value);
        setrlimit(
            resource,
            Rlimit {
                current: value,
                maximum: value,
            },
        )
        .map_err(|e| ConfineError::Rlimit {
            resource: name,
            source: e.into(),
        })?;
    }
    Ok(())
}

/// Leaves the command no privilege: an empty bounding set (so not even an exec as uid 0 gets
/// capabilities back), no ambient, effective, permitted or inheritable capabilities, and
/// `no_new_privs` (setuid binaries run with the caller's rights). Root keeps its uid but loses
/// what made it root: `mknod`, `chown` of others' files, `clock_settime`, `bpf`, raw network
/// configuration, `open_by_handle_at`, reading others' `/proc/PID/environ`.
#[cfg(target_os = "linux")]
pub fn drop_privileges() -> Result<(), ConfineError> {
    use rustix::thread::{
        CapabilitySet, CapabilitySets, capabilities, capability_is_in_bounding_set,
        clear_ambient_capability_set, remove_capability_from_bounding_set, set_capabilities,
        set_no_new_privs,
    };
    let err = |what: &str, e: rustix::io::Errno| ConfineError::Privileges(format!("{what}: {e}"));
    let last = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .unwrap_or(40)
        .min(63);
    let each = || (0..=last).map(|cap| CapabilitySet::from_bits_retain(1u64 << cap));
    let may_drop = capabilities(None)
        .map_err(|e| err("reading capabilities", e))?
        .effective
        .contains(CapabilitySet::SETPCAP);
    if may_drop {
        for cap in each() {
            match remove_capability_from_bounding_set(cap) {
                // A capability newer than this kernel's list.
                Ok(()) | Err(rustix::io::Errno::INVAL) => {}
                Err(e) => return Err(err("dropping the bounding set", e)),
            }
        }
    }
    match clear_ambient_capability_set() {
        Ok(()) | Err(rustix::io::Errno::INVAL) => {}
        Err(e) => return Err(err("clearing ambient capabilities", e)),
    }
    let none = CapabilitySet::empty();
    set_capabilities(
        None,
        CapabilitySets {
            effective: none,
            permitted: none,
            inheritable: none,
        },
    )
    .map_err(|e| err("clearing capabilities", e))?;
    set_no_new_privs(true).map_err(|e| err("setting no_new_privs", e))?;
    // Fail closed: what is left is checked, not assumed. Without CAP_SETPCAP (an unprivileged
    // user, or root inside bubblewrap's `--cap-drop ALL`) the bounding set stays as it was;
    // with no_new_privs an exec can then gain no capability, not even as uid 0 (the kernel
    // caps what an exec grants at the permitted set before it, which is empty).
    let left = capabilities(None).map_err(|e| err("reading capabilities", e))?;
    let nnp = rustix::thread::no_new_privs().map_err(|e| err("reading no_new_privs", e))?;
    if may_drop && each().any(|cap| capability_is_in_bounding_set(cap).unwrap_or(false)) {
        return Err(ConfineError::Privileges(
            "the bounding set is not empty after dropping it".into(),
        ));
    }
    if !left.effective.is_empty() || !left.permitted.is_empty() || !nnp {
        return Err(ConfineError::Privileges(
            "capabilities are left after dropping them".into(),
        ));
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub fn drop_privileges() -> Result<(), ConfineError> {
    Ok(())
}

#[cfg(target_os = "linux")]
pub fn apply_landlock(spec: &ExecSpec) -> Result<String, ConfineError> {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
        RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
    };
    let err = |e: &dyn std::fmt::Display| ConfineError::Landlock(e.to_string());
    // The newest ABI this code was written and tested against; older kernels get what they
    // support (best effort) and the status says so.
    let abi = ABI::V6;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .scope(Scope::from_all(abi))
        .map_err(|e| err(&e))?;
    let confine_fs = spec.mode != Mode::FullAccess;
    if confine_fs {
        ruleset = ruleset
            .handle_access(AccessFs::from_all(abi))
            .map_err(|e| err(&e))?;
    }
    if !spec.allow_network {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| err(&e))?;
    }
    let mut created = ruleset.create().map_err(|e| err(&e))?;
    if confine_fs {
        let read = AccessFs::from_read(abi);
        let all = AccessFs::from_all(abi);
        // Everything is readable but what `credentials.rs` hides.
        let rules =
            crate::credentials::read_allowlist(Path::new("/"), &spec.deny_read, &spec.reveal_read);
        for path in rules {
            // Gone since it was listed (a temporary file, say): nothing to read there.
            let Ok(fd) = PathFd::new(&path) else {
                continue;
            };
            let access = if path.is_dir() {
                read
            } else {
                read & AccessFs::from_file(abi)
            };
            created = created
                .add_rule(PathBeneath::new(fd, access))
                .map_err(|e| ConfineError::Landlock(format!("{}: {e}", path.display())))?;
        }
        for path in &spec.writable {
            created = add_beneath(created, path, all)?;
        }
        // The null device, and terminals only where they are the command's own.
        for dev in crate::credentials::writable_devices(&spec.deny_read, &spec.reveal_read) {
            created = add_beneath(created, &dev, all & !AccessFs::Execute)?;
        }
    }
    let status = created.restrict_self().map_err(|e| err(&e))?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => "full",
        RulesetStatus::PartiallyEnforced => "partial",
        RulesetStatus::NotEnforced => "none",
    }
    .to_string())
}

#[cfg(target_os = "linux")]
fn add_beneath(
    created: landlock::RulesetCreated,
    path: &Path,
    access: landlock::BitFlags<landlock::AccessFs>,
) -> Result<landlock::RulesetCreated, ConfineError> {
    use landlock::{PathBeneath, PathFd, RulesetCreatedAttr};
    // A regular file gets only the rights that apply to files, else the rule is rejected.
    let access = if path.is_dir() {
        access
    } else {
        access & landlock::AccessFs::from_file(landlock::ABI::V6)
    };
    let fd = PathFd::new(path).map_err(|e| ConfineError::Landlock(e.to_string()))?;
    created
        .add_rule(PathBeneath::new(fd, access))
        .map_err(|e| ConfineError::Landlock(format!("{}: {e}", path.display())))
}

#[cfg(not(target_os = "linux"))]
pub fn apply_landlock(_spec: &ExecSpec) -> Result<String, ConfineError> {
    Ok("none".to_string())
}

/// What the filter lets through (see the Linux filter).
#[cfg(not(target_os = "linux"))]
#[derive(Clone, Copy, Debug)]
pub struct SeccompPolicy {
    pub allow_network: bool,
    pub allow_unix: bool,
    pub private_ipc: bool,
}

#[cfg(not(target_os = "linux"))]
pub fn apply_seccomp(_policy: SeccompPolicy) -> Result<(), ConfineError> {
    Err(ConfineError::Seccomp(
        "not available on this platform".into(),
    ))
}
