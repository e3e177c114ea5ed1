//! The system calls the sandbox makes that no safe wrapper offers: marking inherited file
//! descriptors close-on-exec, `unshare`, `mount_setattr`, and blocking and taking the
//! supervisor's termination signals. This is the crate's only `unsafe`;
//! each block is a plain system call on arguments built here, and none closes, moves or
//! invalidates a descriptor or memory that Rust code owns.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::path::Path;

/// Marks every descriptor but 0–2 close-on-exec: what baton's own parent left open without
/// `FD_CLOEXEC` (a secret file, a socket, a terminal) must not reach the command. Descriptors
/// Rust opens are close-on-exec already, so nothing this process uses is lost.
pub fn cloexec_inherited_fds() -> io::Result<()> {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets a flag on open descriptors; it
    // closes none, so no `OwnedFd`/`File` is invalidated.
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() != Some(libc::ENOSYS) && err.raw_os_error() != Some(libc::EINVAL) {
        return Err(err);
    }
    // Kernels before 5.11: one at a time, from the list of open descriptors. The list is
    // collected first (reading the directory opens a descriptor of its own).
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: F_SETFD only sets the close-on-exec flag; a descriptor that is no longer open
        // (the directory's own) answers EBADF, which is ignored.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Ok(())
}

/// `unshare(2)` of the given namespaces (`CLONE_NEW*` flags; never `CLONE_FILES`).
pub fn unshare(flags: libc::c_int) -> io::Result<()> {
    debug_assert_eq!(flags & libc::CLONE_FILES, 0);
    // SAFETY: without CLONE_FILES, unsharing namespaces does not change which descriptors this
    // process's threads share (the hazard rustix's `unshare_unsafe` documents).
    if unsafe { libc::unshare(flags) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `struct mount_attr` of `<linux/mount.h>`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
/// `MS_PRIVATE`, as the `u64` the structure holds on every target.
const MS_PRIVATE: u64 = 0x40000;

/// Makes the mount at `path` and every mount beneath it read-only (`readonly`) or writable,
/// and private (nothing done here propagates to the host's mounts). Other per-mount flags
/// (`nosuid`, `nodev`, `noexec`, atime) are left as they are.
pub fn mount_tree_setattr(path: &Path, readonly: bool) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a path"))?;
    let attr = MountAttr {
        attr_set: if readonly { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if readonly { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: MS_PRIVATE,
        userns_fd: 0,
    };
    // SAFETY: the path is a valid NUL-terminated string and `attr` a live `struct mount_attr`
    // whose size is passed with it; the kernel only reads both.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c_path.as_ptr(),
            (libc::AT_RECURSIVE | libc::AT_SYMLINK_NOFOLLOW) as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The signals that end a process by default and that someone outside may send a supervisor
/// (`kill PID`, `pkill baton`, a closed terminal).
const TERMINATION: [libc::c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];

fn termination_set() -> io::Result<libc::sigset_t> {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set it is given; sigaddset only writes to it.
    unsafe {
        if libc::sigemptyset(set.as_mut_ptr()) != 0 {
            return Err(io::Error::last_os_error());
        }
        for signal in TERMINATION {
            if libc::sigaddset(set.as_mut_ptr(), signal) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(set.assume_init())
    }
}

/// Blocks the termination signals in the calling thread and the threads it starts afterwards,
/// so that they wait to be taken by [`take_termination_signal`] instead of killing the process.
/// Children started with `std::process::Command` get an empty mask again (std resets it).
pub fn block_termination_signals() -> io::Result<()> {
    termination_mask(libc::SIG_BLOCK)
}

/// Lets the termination signals through to the calling thread again.
pub fn unblock_termination_signals() -> io::Result<()> {
    termination_mask(libc::SIG_UNBLOCK)
}

fn termination_mask(how: libc::c_int) -> io::Result<()> {
    let set = termination_set()?;
    // SAFETY: a valid, initialised set; the old mask is not asked for.
    let r = unsafe { libc::pthread_sigmask(how, &set, std::ptr::null_mut()) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(r))
    }
}

/// Waits up to `timeout` for a blocked termination signal; returns it if one came.
pub fn take_termination_signal(timeout: std::time::Duration) -> Option<libc::c_int> {
    let set = termination_set().ok()?;
    let timeout = libc::timespec {
        tv_sec: timeout.as_secs().try_into().unwrap_or(libc::time_t::MAX),
        tv_nsec: timeout.subsec_nanos().into(),
    };
    // SAFETY: a valid set and timespec, both only read; no siginfo is asked for.
    let signal = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &timeout) };
    (signal > 0).then_some(signal)
}
