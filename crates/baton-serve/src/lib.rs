//! baton's HTTP side (`baton serve`): a JSON API over the run store, Prometheus metrics and a
//! live web dashboard whose assets are compiled in; and [`RunAggregate`], the one summary of a
//! run's journal that `baton status`, `baton cost`, the API and the metrics all share.
//!
//! Runs are written by other processes, so everything is read from the store: aggregates are
//! folds over the journal, cached per run by event count, and the live tail polls the store.

pub mod aggregate;
mod assets;
mod auth;
pub mod metrics;
mod server;
pub mod tasks;
#[cfg(feature = "test-support")]
pub mod testing;
pub mod view;

pub use aggregate::{CallKind, Cost, ModelCallRow, RunAggregate, Tokens, ToolCallRow, TurnRow};
pub use server::{DEFAULT_PAGE, MAX_PAGE, ServeOptions, router, serve};
pub use tasks::{TaskGraph, TaskSource, TaskState, TaskView};
pub use view::{RunDetail, RunView, group_families, status_label};

/// Port `baton serve` listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 7878;

/// Whether binding to `addr` keeps the server to this machine (no token needed then).
pub fn is_loopback(addr: std::net::IpAddr) -> bool {
    addr.is_loopback()
}
