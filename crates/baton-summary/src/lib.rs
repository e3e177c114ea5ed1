//! The one summary of a run's journal — [`RunAggregate`], a fold over its events: status,
//! turns, tokens, cost (with unknown-price calls counted), model and tool call rows, retries by
//! class, the task graph — and the shapes the JSON API and `--json` print ([`RunView`],
//! [`RunDetail`]). `baton status`, `baton cost`, `baton ls`, the HTTP API and the metrics all read
//! runs through it, so they print the same numbers.
//!
//! The fold does no IO and never fails: a journal with events it does not know (a newer baton's)
//! still summarises.

pub mod aggregate;
pub mod tasks;
pub mod view;

pub use aggregate::{
    CallKind, Cost, EmbeddingRow, ModelCallRow, RunAggregate, Tokens, ToolCallRow, TurnRow,
};
pub use tasks::{TaskGraph, TaskSource, TaskState, TaskView};
pub use view::{RunDetail, RunView, group_families, status_label};
