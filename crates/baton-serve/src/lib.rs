//! baton's HTTP side (`baton serve`): a JSON API over the run store, Prometheus metrics and a
//! live web dashboard whose assets are compiled in. What it shows of a run is `baton-summary`'s
//! [`RunAggregate`], the same summary `baton status` and `baton cost` print.
//!
//! Runs are written by other processes, so everything is read from the store: aggregates are
//! folds over the journal, cached per run by event count, and the live tail polls the store.

pub use baton_summary::{aggregate, tasks, view};
mod assets;
mod auth;
mod error;
mod hosts;
pub mod metrics;
mod server;
#[cfg(feature = "test-support")]
pub mod testing;

pub use baton_summary::{
    CallKind, Cost, ModelCallRow, RunAggregate, RunDetail, RunView, TaskGraph, TaskSource,
    TaskState, TaskView, Tokens, ToolCallRow, TurnRow, group_families, status_label,
};
pub use server::{DEFAULT_PAGE, MAX_PAGE, ServeOptions, router, serve};

/// Port `baton serve` listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 7878;

/// Whether binding to `addr` keeps the server to this machine.
pub fn is_loopback(addr: std::net::IpAddr) -> bool {
    addr.is_loopback()
}
