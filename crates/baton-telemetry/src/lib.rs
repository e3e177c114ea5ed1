//! OpenTelemetry traces of baton runs, built from the journal rather than from the engine's
//! call stack: `spans` turns journal events into span records (pure, unit-tested), `export`
//! ships them over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` (or the traces-specific
//! variable) is set. Deriving the trace from the journal means every process of a run — a
//! resume, a supervisor's restart, a worker's takeover — lands in one trace with one tree.
//! `logs` is the other half of what a run leaves for people: the process's `tracing` output on
//! stderr and as redacted JSON lines in the run's log file.

mod export;
pub mod logs;
pub mod spans;

pub use export::{Telemetry, TraceObserver, span_data};
