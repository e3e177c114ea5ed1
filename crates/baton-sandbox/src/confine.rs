//! Child-side confinement, applied by the trampoline to itself just before it execs the
//! command: resource limits, Landlock and seccomp. All of it is inherited across `exec` and by
//! every process the command starts.

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

/// Denies debugging other processes, io_uring (whose operations bypass the seccomp filter),
/// typing into a terminal (`TIOCSTI`, `TIOCLINUX`), changing other processes' resource limits or
/// priorities, AF_UNIX sockets unless allowed (host sockets are an escape: a database's
/// `COPY … TO PROGRAM`, docker, ssh-agent), and — with the network off — every other family.
#[cfg(target_os = "linux")]
pub fn apply_seccomp(allow_network: bool, allow_unix: bool) -> Result<(), ConfineError> {
    use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};
    use std::collections::BTreeMap;
    let err = |e: &dyn std::fmt::Display| ConfineError::Seccomp(e.to_string());
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for syscall in [
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        // An empty rule list matches the syscall unconditionally.
        rules.insert(syscall, Vec::new());
    }
    // The terminal: TIOCSTI pushes input into a terminal's queue (typed into the user's shell
    // once baton exits), TIOCLINUX can do the same on a virtual console. The kernel reads the
    // request as 32 bits, so that is what is compared.
    let request_is = |request: u64| {
        SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, request)
            .and_then(|c| SeccompRule::new(vec![c]))
            .map_err(|e| err(&e))
    };
    // `Ioctl` is `c_ulong` on glibc and `c_int` on musl: the cast is needed on some targets.
    #[allow(clippy::unnecessary_cast)]
    let (tiocsti, tioclinux) = (libc::TIOCSTI as u64, libc::TIOCLINUX as u64);
    rules.insert(
        libc::SYS_ioctl,
        vec![request_is(tiocsti)?, request_is(tioclinux)?],
    );
    // Other processes' limits and priorities (baton's own, as the red-team did with `prlimit
    // --pid BATON --cpu=0:0`): only the caller itself (pid / who 0, which is what `ulimit`,
    // `setrlimit` and `nice` use) may be changed; another pid is refused, reading included.
    let other_process = |arg: u8| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, 0)
            .and_then(|c| SeccompRule::new(vec![c]))
            .map_err(|e| err(&e))
    };
    rules.insert(libc::SYS_prlimit64, vec![other_process(0)?]);
    rules.insert(libc::SYS_setpriority, vec![other_process(1)?]);
    // The same for I/O priority and scheduling: `ioprio_set(which, who, …)`,
    // `sched_setaffinity/setscheduler/setparam/setattr(pid, …)`.
    rules.insert(libc::SYS_ioprio_set, vec![other_process(1)?]);
    for syscall in [
        libc::SYS_sched_setaffinity,
        libc::SYS_sched_setscheduler,
        libc::SYS_sched_setparam,
        libc::SYS_sched_setattr,
    ] {
        rules.insert(syscall, vec![other_process(0)?]);
    }
    // socket(2)'s family, compared as the 32-bit int the kernel reads. `socketpair` is not
    // filtered: an unnamed pair reaches nothing outside.
    let family = |op: SeccompCmpOp| {
        SeccompCondition::new(0, SeccompCmpArgLen::Dword, op, libc::AF_UNIX as u64)
            .and_then(|c| SeccompRule::new(vec![c]))
            .map_err(|e| err(&e))
    };
    file_mode_rules(&mut rules)?;
    match (allow_network, allow_unix) {
        (true, true) => {}
        (true, false) => {
            rules.insert(libc::SYS_socket, vec![family(SeccompCmpOp::Eq)?]);
        }
        (false, true) => {
            rules.insert(libc::SYS_socket, vec![family(SeccompCmpOp::Ne)?]);
        }
        // An empty rule list matches every call.
        (false, false) => {
            rules.insert(libc::SYS_socket, Vec::new());
        }
    }
    install(rules, libc::EPERM)?;
    // openat2's mode is in a struct the filter cannot read: "not implemented", so callers fall
    // back to openat (whose mode the filter above checks).
    install(
        BTreeMap::from([(libc::SYS_openat2, Vec::new())]),
        libc::ENOSYS,
    )
}

/// Loads a filter that fails the calls `rules` match with `errno` and allows everything else.
#[cfg(target_os = "linux")]
fn install(
    rules: std::collections::BTreeMap<i64, Vec<seccompiler::SeccompRule>>,
    errno: i32,
) -> Result<(), ConfineError> {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter};
    let err = |e: &dyn std::fmt::Display| ConfineError::Seccomp(e.to_string());
    let arch = std::env::consts::ARCH.try_into().map_err(|e| err(&e))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .map_err(|e| err(&e))?;
    let program: BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| err(&e))?;
    seccompiler::apply_filter(&program).map_err(|e| err(&e))
}

/// Setuid/setgid files and device nodes made here would work on the host for any user: no
/// mode with those bits, no character or block device. FIFOs and sockets are fine.
#[cfg(target_os = "linux")]
fn file_mode_rules(
    rules: &mut std::collections::BTreeMap<i64, Vec<seccompiler::SeccompRule>>,
) -> Result<(), ConfineError> {
    use seccompiler::{SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};
    let err = |e: &dyn std::fmt::Display| ConfineError::Seccomp(e.to_string());
    let bit = |arg: u8, mask: u64| {
        SeccompCondition::new(
            arg,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(mask),
            mask,
        )
        .map_err(|e| err(&e))
    };
    let privileged_mode = |arg: u8| -> Result<Vec<SeccompRule>, ConfineError> {
        [libc::S_ISUID as u64, libc::S_ISGID as u64]
            .into_iter()
            .map(|m| SeccompRule::new(vec![bit(arg, m)?]).map_err(|e| err(&e)))
            .collect()
    };
    rules.insert(libc::SYS_chmod, privileged_mode(1)?);
    rules.insert(libc::SYS_fchmod, privileged_mode(1)?);
    rules.insert(libc::SYS_fchmodat, privileged_mode(2)?);
    rules.insert(libc::SYS_fchmodat2, privileged_mode(2)?);
    rules.insert(libc::SYS_creat, privileged_mode(1)?);
    // open(path, flags, mode) / openat(dir, path, flags, mode): only a creating open applies
    // its mode.
    let creating = |flags: u8, mode: u8| -> Result<Vec<SeccompRule>, ConfineError> {
        let mut out = Vec::new();
        for create in [
            libc::O_CREAT as u64,
            libc::O_TMPFILE as u64 & !(libc::O_DIRECTORY as u64),
        ] {
            for m in [libc::S_ISUID as u64, libc::S_ISGID as u64] {
                out.push(
                    SeccompRule::new(vec![bit(flags, create)?, bit(mode, m)?])
                        .map_err(|e| err(&e))?,
                );
            }
        }
        Ok(out)
    };
    rules.insert(libc::SYS_open, creating(1, 2)?);
    rules.insert(libc::SYS_openat, creating(2, 3)?);
    let device = |arg: u8| -> Result<Vec<SeccompRule>, ConfineError> {
        [libc::S_IFCHR as u64, libc::S_IFBLK as u64]
            .into_iter()
            .map(|kind| {
                SeccompCondition::new(
                    arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(libc::S_IFMT as u64),
                    kind,
                )
                .and_then(|c| SeccompRule::new(vec![c]))
                .map_err(|e| err(&e))
            })
            .collect()
    };
    rules.insert(libc::SYS_mknod, device(1)?);
    rules.insert(libc::SYS_mknodat, device(2)?);
    // Opening a file by handle bypasses every path rule.
    rules.insert(libc::SYS_open_by_handle_at, Vec::new());
    Ok(())
}

#[cfg(not(target_os = "linux"))]
pub fn apply_landlock(_spec: &ExecSpec) -> Result<String, ConfineError> {
    Ok("none".to_string())
}

#[cfg(not(target_os = "linux"))]
pub fn apply_seccomp(_allow_network: bool, _allow_unix: bool) -> Result<(), ConfineError> {
    Err(ConfineError::Seccomp(
        "not available on this platform".into(),
    ))
}
