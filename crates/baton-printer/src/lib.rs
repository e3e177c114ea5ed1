//! How baton shows a run: the progress lines and the JSON-lines stream printed while it goes
//! on ([`Human`], [`JsonLines`]), the transcript of `baton logs`, and the texts of the reading
//! commands (`status`, `ls`, `cost`, `plan`, `index`, `search`, `snapshots`, `rollback`).
//!
//! Everything here renders what the journal and its read model (`baton-summary`) already hold:
//! it reads no store, starts nothing and decides nothing, so a program built on the `baton`
//! library shows a run exactly as the CLI does (ripgrep keeps its printer in a library crate for
//! the same reason). Only [`Human`] and [`JsonLines`] write, to stderr and stdout; the rest
//! returns strings.

pub mod code;
pub mod cost;
mod events;
mod json_lines;
pub mod plan;
pub mod snapshots;
pub mod status;
mod summary;
mod tables;
pub mod transcript;

pub use events::{Human, one_line, progress_line, task_line};
pub use json_lines::{EVENT_SCHEMA_VERSION, JsonLines, json_line, run_totals};
pub use summary::{duration_words, settings_text, status_line, summary_line, word};
pub use tables::{key_values, runs_table, tasks_table};
