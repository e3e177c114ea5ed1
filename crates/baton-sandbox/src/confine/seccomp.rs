//! The seccomp filter every sandboxed command runs under (inherited across `exec` and by every
//! process it starts). It refuses what Landlock and the namespaces cannot see: system calls
//! whose effect reaches outside whatever the paths allow.

use super::ConfineError;

/// What the filter lets through, from the command's settings and its backend.
#[derive(Clone, Copy, Debug)]
pub struct SeccompPolicy {
    pub allow_network: bool,
    /// AF_UNIX sockets may be made (the user allowlisted some socket paths).
    pub allow_unix: bool,
    /// The command has an IPC namespace of its own (bubblewrap's, or the trampoline's on the
    /// Landlock backend): SysV IPC reaches only its own objects.
    pub private_ipc: bool,
}

/// Denies debugging other processes, io_uring (whose operations bypass the seccomp filter),
/// typing into a terminal (`TIOCSTI`, `TIOCLINUX`), changing other processes' resource limits or
/// priorities, the kernel's keyrings, AF_UNIX sockets unless allowed (host sockets are an
/// escape: a database's `COPY … TO PROGRAM`, docker, ssh-agent; a datagram socket reaches one
/// with a bare `sendto`), SysV IPC where the host's would be reached, and — with the network
/// off — every other family.
pub fn apply_seccomp(policy: SeccompPolicy) -> Result<(), ConfineError> {
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
        // The keyrings are the kernel's, not the sandbox's: the user and session keyrings hold
        // other programs' secrets (Kerberos tickets, ecryptfs and fscrypt keys, tokens), readable
        // and — where nothing else stops it — writable by any process of the uid.
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
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
    if !policy.private_ipc {
        // The host's segments, semaphores and queues (a database's shared buffers): with no IPC
        // namespace of its own, a command could attach to them by id.
        for syscall in SYSV_IPC {
            rules.insert(syscall, Vec::new());
        }
    }
    if !policy.allow_unix {
        // An unnamed datagram pair is still a datagram socket: `sendto` (or `connect`) with a
        // path sends to any host socket at that path (`/dev/log`, a daemon's). Stream and
        // seqpacket pairs cannot be redirected (the kernel refuses or ignores an address).
        let datagram = SeccompCondition::new(
            1,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK),
            libc::SOCK_DGRAM as u64,
        )
        .and_then(|c| SeccompRule::new(vec![c]))
        .map_err(|e| err(&e))?;
        rules.insert(libc::SYS_socketpair, vec![datagram]);
    }
    match (policy.allow_network, policy.allow_unix) {
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

/// The low bits of socket(2)'s type: `SOCK_NONBLOCK` and `SOCK_CLOEXEC` sit above them.
const SOCK_TYPE_MASK: u64 = 0xf;

/// Every SysV IPC call (x86_64 and aarch64 have no `ipc(2)` multiplexer).
const SYSV_IPC: [i64; 12] = [
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmctl,
    libc::SYS_shmdt,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
];

/// Loads a filter that fails the calls `rules` match with `errno` and allows everything else.
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
