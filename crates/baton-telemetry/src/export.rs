//! The thin IO half: span records → OpenTelemetry `SpanData` → an OTLP/HTTP exporter driven by
//! one background task. Exporting never blocks or fails a run: the observer only queues (a full
//! queue drops), the first export failure is logged once, the final flush has a deadline.

use std::borrow::Cow;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use baton_core::RunObserver;
use baton_core::{EventRecord, RunId, RunState};
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status as OtelStatus, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value as OtelValue};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter, SpanLinks};
use tokio::sync::{mpsc, oneshot};

use crate::spans::{Kind, SpanBuilder, SpanRecord, Status, Value, trace_id};

/// Spans waiting for the exporter; past this they are dropped (a receiver that is down or slow
/// must not make baton hold an unbounded backlog).
const QUEUE: usize = 4096;
/// Spans per export request.
const BATCH: usize = 512;
/// Longest one export may take before it is given up (the exporter's own timeout applies too).
const EXPORT_DEADLINE: Duration = Duration::from_secs(10);

enum Msg {
    Span(Box<SpanData>),
    Flush(oneshot::Sender<()>),
}

/// One process's trace exporter (shared by every run it drives).
pub struct Telemetry {
    tx: mpsc::Sender<Msg>,
    dropped: std::sync::Arc<AtomicU64>,
    scope: InstrumentationScope,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Whether the environment asks for traces: an OTLP endpoint is set and tracing is not
/// switched off (`OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none`).
pub fn enabled_by_env() -> bool {
    let endpoint = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))
        .is_some();
    let disabled = env("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let none = env("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
    endpoint && !disabled && !none
}

/// `http/json` when asked for; otherwise protobuf, the OTLP/HTTP default (gRPC is not built in).
fn protocol() -> Protocol {
    let asked =
        env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"));
    match asked.as_deref() {
        Some(p) if p.eq_ignore_ascii_case("http/json") => Protocol::HttpJson,
        Some(p) if !p.eq_ignore_ascii_case("http/protobuf") => {
            tracing::warn!("OTEL_EXPORTER_OTLP_PROTOCOL={p} is not supported; using http/protobuf");
            Protocol::HttpBinary
        }
        _ => Protocol::HttpBinary,
    }
}

impl Telemetry {
    /// The exporter the environment asks for, or `None` (not asked for, or misconfigured: then
    /// a warning says why and the run goes on untraced). Must be called inside a tokio runtime.
    pub fn from_env() -> Option<Telemetry> {
        if !enabled_by_env() {
            return None;
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(protocol())
            .build();
        let mut exporter = match exporter {
            Ok(exporter) => exporter,
            Err(e) => {
                tracing::warn!("OpenTelemetry export is off: {e}");
                return None;
            }
        };
        let mut resource = Resource::builder()
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
        if env("OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("baton");
        }
        exporter.set_resource(&resource.build());
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(pump(exporter, rx));
        Some(Telemetry {
            tx,
            dropped: Default::default(),
            scope: InstrumentationScope::builder("baton")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        })
    }

    /// An observer for one run. `prior` is the run's journal before this process (a resume):
    /// it is replayed so that spans opened earlier end here with their ids, and not exported
    /// (the process that ended them did).
    pub fn observer(&self, run_id: &RunId, prior: &[EventRecord]) -> TraceObserver {
        let mut builder = SpanBuilder::new(run_id.clone());
        for record in prior {
            builder.push(record);
        }
        TraceObserver {
            builder: Mutex::new(builder),
            trace: TraceId::from_bytes(trace_id(run_id)),
            tx: self.tx.clone(),
            dropped: self.dropped.clone(),
            scope: self.scope.clone(),
        }
    }

    /// Sends what is queued, waiting at most `deadline`. Call on every way out of a run.
    pub async fn flush(&self, deadline: Duration) {
        let (done, wait) = oneshot::channel();
        let flushed = tokio::time::timeout(deadline, async {
            if self.tx.send(Msg::Flush(done)).await.is_ok() {
                let _ = wait.await;
            }
        })
        .await;
        if flushed.is_err() {
            tracing::warn!("OpenTelemetry: gave up waiting for the receiver after {deadline:?}");
        }
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            tracing::warn!("OpenTelemetry: {dropped} spans dropped (the export queue was full)");
        }
    }
}

/// Exports batches in order; reports the first failure once and drops failed batches.
async fn pump(exporter: opentelemetry_otlp::SpanExporter, mut rx: mpsc::Receiver<Msg>) {
    let warned = AtomicBool::new(false);
    let mut batch: Vec<SpanData> = Vec::new();
    while let Some(msg) = rx.recv().await {
        let mut acks = Vec::new();
        let mut take = |msg: Msg, batch: &mut Vec<SpanData>| match msg {
            Msg::Span(span) => batch.push(*span),
            Msg::Flush(ack) => acks.push(ack),
        };
        take(msg, &mut batch);
        // Whatever else is already queued goes in the same request.
        while batch.len() < BATCH
            && let Ok(msg) = rx.try_recv()
        {
            take(msg, &mut batch);
        }
        if !batch.is_empty() {
            let spans = std::mem::take(&mut batch);
            let count = spans.len();
            let result = tokio::time::timeout(EXPORT_DEADLINE, exporter.export(spans)).await;
            let error = match result {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some(format!("no answer within {EXPORT_DEADLINE:?}")),
            };
            if let Some(error) = error {
                if warned.swap(true, Ordering::Relaxed) {
                    tracing::debug!("OpenTelemetry export failed, {count} spans dropped: {error}");
                } else {
                    tracing::warn!(
                        "OpenTelemetry export failed, {count} spans dropped (later failures are \
                         logged at debug level only): {error}"
                    );
                }
            }
        }
        for ack in acks {
            let _ = ack.send(());
        }
    }
}

/// Turns a run's journaled events into spans and queues them for export.
pub struct TraceObserver {
    builder: Mutex<SpanBuilder>,
    trace: TraceId,
    tx: mpsc::Sender<Msg>,
    dropped: std::sync::Arc<AtomicU64>,
    scope: InstrumentationScope,
}

impl RunObserver for TraceObserver {
    fn on_event(&self, record: &EventRecord, _state: &RunState) {
        let ended = match self.builder.lock() {
            Ok(mut builder) => builder.push(record),
            Err(_) => return,
        };
        for span in ended {
            let data = span_data(span, self.trace, &self.scope);
            if self.tx.try_send(Msg::Span(Box::new(data))).is_err() {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

fn time(at: jiff::Timestamp) -> SystemTime {
    SystemTime::try_from(at).unwrap_or(SystemTime::UNIX_EPOCH)
}

fn value(v: Value) -> OtelValue {
    match v {
        Value::Str(s) => OtelValue::String(s.into()),
        Value::Int(i) => OtelValue::I64(i),
        Value::F64(f) => OtelValue::F64(f),
        Value::Bool(b) => OtelValue::Bool(b),
        Value::StrList(list) => OtelValue::Array(Array::String(
            list.into_iter().map(StringValue::from).collect(),
        )),
    }
}

/// One span record as the SDK's exportable span, in the run's trace.
pub fn span_data(span: SpanRecord, trace: TraceId, scope: &InstrumentationScope) -> SpanData {
    SpanData {
        span_context: SpanContext::new(
            trace,
            SpanId::from_bytes(span.span_id),
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: span.parent.map_or(SpanId::INVALID, SpanId::from_bytes),
        parent_span_is_remote: false,
        span_kind: match span.kind {
            Kind::Internal => SpanKind::Internal,
            Kind::Client => SpanKind::Client,
        },
        name: Cow::Owned(span.name),
        start_time: time(span.start),
        end_time: time(span.end),
        attributes: span
            .attributes
            .into_iter()
            .map(|(k, v)| KeyValue::new(k, value(v)))
            .collect(),
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status: match span.status {
            Status::Unset => OtelStatus::Unset,
            Status::Ok => OtelStatus::Ok,
            Status::Error(message) => OtelStatus::error(message),
        },
        instrumentation_scope: scope.clone(),
    }
}
