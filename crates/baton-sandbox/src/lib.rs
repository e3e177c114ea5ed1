//! Process isolation for baton: every command the agent runs goes through a [`Sandbox`] —
//! bubblewrap namespaces where available, Landlock and seccomp applied in the child by a
//! trampoline re-exec (`unsafe` only for a few system calls, in `confine/sys.rs`), resource
//! limits, an allowlisted environment — and an execution [`policy`] decides which command lines
//! may run at all.

mod bwrap;
mod cgroup;
mod confine;
mod credentials;
mod platform;
pub mod policy;
mod protect;
mod report;
mod run;
mod sandbox;
mod spec;
mod supervisor;
pub mod trampoline;

pub use confine::Enforced;
pub use credentials::DEFAULT_DENY_READ;
pub use platform::{ALLOW_ROOT_LANDLOCK_ENV, BACKEND_ENV, Platform, detect};
pub use run::{Finished, LineFilter, Output, StreamFilter, run};
pub use sandbox::{Guard, Prepared, Sandbox, SandboxError, is_allowed, remove_stale_private_tmps};
pub use spec::{
    Backend, BackendChoice, DEFAULT_ENV_ALLOWLIST, ExecSpec, Limits, Mode, Namespaces,
    SandboxConfig,
};
