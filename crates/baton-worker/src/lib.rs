//! The worker runtime behind `baton worker`: processes on any number of machines claim queued
//! runs from one shared PostgreSQL store and drive them. A run's workspace travels as tar
//! snapshots in an artifact store ([`Artifacts`]: a directory or an S3-compatible bucket); the
//! claim loop ([`Worker`]) restores it, runs the engine in that copy, snapshots it back after
//! every mutating tool call and at the end, and hands a run back to the queue when the worker
//! stops — so a killed worker's run is taken over by another from its last snapshot and its
//! journal.
#![warn(missing_docs)]

pub mod artifacts;
mod pool;

pub use artifacts::{ArtifactError, ArtifactLocation, Artifacts};
pub use pool::{Hooks, News, Worker, worker_id};
