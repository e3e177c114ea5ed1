//! The pure half: journal events → span records (parent, name, start, end, attributes,
//! status). No OpenTelemetry types here, so the mapping is tested with plain event lists.
//!
//! Ids are derived from the run id (trace) and the sequence number of the event that opened a
//! span (span), so every process of a run — a resume, a supervisor's restart, a worker taking
//! it over — builds the same tree: a span opened in one process and ended in the next has one
//! id, and children find their parent without any state but the journal.

use std::collections::{BTreeMap, HashMap};

use baton_core::{Event, EventRecord, ProviderKind, RunId, RunSettings, ToolOutcome, Usage};
use jiff::Timestamp;
use sha2::{Digest, Sha256};

/// The trace of a run: the first 16 bytes of SHA-256 over the run id.
pub fn trace_id(run_id: &RunId) -> [u8; 16] {
    let digest = Sha256::digest(format!("baton-trace:{run_id}").as_bytes());
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    // An all-zero id is invalid in OpenTelemetry; SHA-256 giving one is not a real case, but
    // the fix costs nothing.
    if id == [0; 16] {
        id[15] = 1;
    }
    id
}

/// The span opened by the event at `seq` (the run span is the one opened at seq 0).
pub fn span_id(run_id: &RunId, seq: u64) -> [u8; 8] {
    let digest = Sha256::digest(format!("baton-span:{run_id}:{seq}").as_bytes());
    let mut id = [0u8; 8];
    id.copy_from_slice(&digest[..8]);
    if id == [0; 8] {
        id[7] = 1;
    }
    id
}

/// An attribute value (the subset of OpenTelemetry's that the spans use).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    F64(f64),
    Bool(bool),
    StrList(Vec<String>),
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Str(v.to_string())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Str(v)
    }
}
impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::Int(i64::from(v))
    }
}
impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Int(i64::from(v))
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::F64(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}

/// OpenTelemetry's span status.
#[derive(Clone, Debug, PartialEq)]
pub enum Status {
    Unset,
    Ok,
    Error(String),
}

/// OpenTelemetry's span kind, for the kinds used here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Internal,
    /// A call to a remote service (the model server).
    Client,
}

/// One ended span.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanRecord {
    pub span_id: [u8; 8],
    /// `None` for the run span, the root.
    pub parent: Option<[u8; 8]>,
    pub name: String,
    pub kind: Kind,
    pub start: Timestamp,
    pub end: Timestamp,
    pub attributes: Vec<(&'static str, Value)>,
    pub status: Status,
}

impl SpanRecord {
    /// The value of attribute `key`, if set.
    pub fn attr(&self, key: &str) -> Option<&Value> {
        self.attributes
            .iter()
            .find_map(|(k, v)| (*k == key).then_some(v))
    }
}

/// A span that has started and not yet ended.
#[derive(Clone, Debug)]
struct Open {
    id: [u8; 8],
    parent: Option<[u8; 8]>,
    name: String,
    kind: Kind,
    start: Timestamp,
    attributes: Vec<(&'static str, Value)>,
}

impl Open {
    fn new(run: &RunId, record: &EventRecord, parent: [u8; 8], name: String, kind: Kind) -> Open {
        Open {
            id: span_id(run, record.seq),
            parent: Some(parent),
            name,
            kind,
            start: record.at,
            attributes: Vec::new(),
        }
    }

    fn attr(mut self, key: &'static str, value: impl Into<Value>) -> Open {
        self.attributes.push((key, value.into()));
        self
    }

    fn end(mut self, at: Timestamp, status: Status, extra: Attrs) -> SpanRecord {
        self.attributes.extend(extra);
        SpanRecord {
            span_id: self.id,
            parent: self.parent,
            name: self.name,
            kind: self.kind,
            // A clock step backwards must not make a negative span.
            start: self.start.min(at),
            end: at,
            attributes: self.attributes,
            status,
        }
    }
}

type Attrs = Vec<(&'static str, Value)>;

/// Folds a run's journal into ended spans. Feed every event in order with [`SpanBuilder::push`];
/// it returns the spans that event ended. Spans still open at the end of a process are not
/// returned: a later process of the run ends them (it replays the journal first).
pub struct SpanBuilder {
    run_id: RunId,
    run: Option<Open>,
    model: Option<ModelInfo>,
    task: Option<Open>,
    turn: Option<Open>,
    model_call: Option<Open>,
    compaction: Option<Open>,
    /// By call id; several may be open (a tool started in one process, ended in the next).
    tools: BTreeMap<String, Open>,
    /// By task (`None`: the run's final check).
    checks: HashMap<Option<String>, Open>,
    rollbacks: HashMap<Option<String>, Open>,
    /// Tasks worked on by parallel child runs (each child run exports its own spans).
    delegated: HashMap<String, Open>,
    /// Totals for the run span.
    usage: Usage,
    cost_usd: f64,
    turns: u32,
}

#[derive(Clone, Debug)]
struct ModelInfo {
    model: String,
    provider: &'static str,
    server: Option<(String, Option<u16>)>,
}

impl ModelInfo {
    fn of(settings: &RunSettings) -> ModelInfo {
        let m = &settings.model;
        ModelInfo {
            model: m.model.clone(),
            provider: provider_name(m.provider, &m.base_url),
            server: server_of(&m.base_url),
        }
    }
}

/// `gen_ai.provider.name`: the well-known value for the API spoken and the host.
pub fn provider_name(kind: ProviderKind, base_url: &str) -> &'static str {
    if kind == ProviderKind::Anthropic {
        return "anthropic";
    }
    let host = server_of(base_url).map(|(h, _)| h).unwrap_or_default();
    let known = [
        ("openai.com", "openai"),
        ("deepseek.com", "deepseek"),
        ("x.ai", "x_ai"),
        ("mistral.ai", "mistral_ai"),
        ("groq.com", "groq"),
        ("perplexity.ai", "perplexity"),
        ("azure.com", "azure.ai.openai"),
    ];
    known
        .iter()
        .find(|(suffix, _)| host == *suffix || host.ends_with(&format!(".{suffix}")))
        .map_or("openai", |(_, name)| name)
}

/// Host and port of a base URL (never its user info or path, which may carry credentials).
fn server_of(base_url: &str) -> Option<(String, Option<u16>)> {
    let rest = base_url.split_once("://").map_or(base_url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host_port.is_empty() {
        return None;
    }
    // [v6]:port, host:port, host
    if let Some(v6) = host_port.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        let port = after.strip_prefix(':').and_then(|p| p.parse().ok());
        return Some((host.to_string(), port));
    }
    match host_port.rsplit_once(':') {
        Some((host, port)) => Some((host.to_string(), port.parse().ok())),
        None => Some((host_port.to_string(), None)),
    }
}

fn usage_attrs(usage: &Usage) -> Attrs {
    let mut attrs: Attrs = vec![
        ("gen_ai.usage.input_tokens", usage.prompt_tokens.into()),
        ("gen_ai.usage.output_tokens", usage.completion_tokens.into()),
    ];
    if let Some(cached) = usage.cached_prompt_tokens {
        attrs.push(("gen_ai.usage.cache_read.input_tokens", cached.into()));
    }
    if let Some(written) = usage.cache_write_tokens {
        attrs.push(("gen_ai.usage.cache_creation.input_tokens", written.into()));
    }
    if let Some(reasoning) = usage.reasoning_tokens {
        attrs.push(("baton.usage.reasoning_tokens", reasoning.into()));
    }
    attrs
}

/// An enum's name as it is journaled (snake_case), from its `Debug` name.
fn snake(value: &impl std::fmt::Debug) -> String {
    let debug = format!("{value:?}");
    let mut out = String::with_capacity(debug.len() + 4);
    for (i, c) in debug.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

impl SpanBuilder {
    pub fn new(run_id: RunId) -> SpanBuilder {
        SpanBuilder {
            run_id,
            run: None,
            model: None,
            task: None,
            turn: None,
            model_call: None,
            compaction: None,
            tools: BTreeMap::new(),
            checks: HashMap::new(),
            rollbacks: HashMap::new(),
            delegated: HashMap::new(),
            usage: Usage::default(),
            cost_usd: 0.0,
            turns: 0,
        }
    }

    fn run_span(&self) -> [u8; 8] {
        span_id(&self.run_id, 0)
    }

    /// Parent of a turn, a check or a rollback: the task in progress, else the run.
    fn task_or_run(&self) -> [u8; 8] {
        self.task.as_ref().map_or_else(|| self.run_span(), |t| t.id)
    }

    /// Parent of a model or tool call: the turn, else the task, else the run.
    fn turn_or_up(&self) -> [u8; 8] {
        self.turn
            .as_ref()
            .map_or_else(|| self.task_or_run(), |t| t.id)
    }

    fn model_name(&self) -> String {
        self.model
            .as_ref()
            .map_or_else(|| "unknown".to_string(), |m| m.model.clone())
    }

    fn model_attrs(&self, open: Open) -> Open {
        let Some(model) = &self.model else {
            return open;
        };
        let mut open = open
            .attr("gen_ai.provider.name", model.provider)
            .attr("gen_ai.request.model", model.model.as_str());
        if let Some((host, port)) = &model.server {
            open = open.attr("server.address", host.as_str());
            if let Some(port) = port {
                open = open.attr("server.port", u32::from(*port));
            }
        }
        open
    }

    /// Ends the spans a process left open when the next one takes over: the model call or
    /// compaction in flight was abandoned (its answer was never journaled; it is sent again).
    /// Tools stay open: their result (re-run or "interrupted") is journaled later.
    fn abandon_in_flight(&mut self, at: Timestamp, out: &mut Vec<SpanRecord>) {
        for open in [self.model_call.take(), self.compaction.take()]
            .into_iter()
            .flatten()
        {
            out.push(open.end(
                at,
                Status::Error("interrupted".into()),
                vec![("error.type", "interrupted".into())],
            ));
        }
    }

    fn end_task(
        &mut self,
        at: Timestamp,
        outcome: &str,
        status: Status,
        out: &mut Vec<SpanRecord>,
    ) {
        // A turn cannot outlive its task.
        if let Some(turn) = self.turn.take() {
            out.push(turn.end(at, Status::Unset, Vec::new()));
        }
        if let Some(task) = self.task.take() {
            out.push(task.end(at, status, vec![("baton.task.outcome", outcome.into())]));
        }
    }

    /// Takes in the next journal event; returns the spans it ended.
    pub fn push(&mut self, record: &EventRecord) -> Vec<SpanRecord> {
        let mut out = Vec::new();
        match &record.event {
            Event::RunStarted { .. }
            | Event::RunResumed { .. }
            | Event::SupervisorRestarted { .. }
            | Event::RunPaused { .. }
            | Event::RunFinished { .. }
            | Event::RunFailed { .. } => self.push_run(record, &mut out),
            Event::TurnStarted { .. }
            | Event::TurnFinished { .. }
            | Event::ModelCallStarted { .. }
            | Event::ModelCallFailed { .. }
            | Event::ModelCallFinished { .. } => self.push_turn(record, &mut out),
            Event::ToolCallStarted { .. } | Event::ToolCallFinished { .. } => {
                self.push_tool(record, &mut out)
            }
            Event::CompactionStarted { .. }
            | Event::CompactionFailed { .. }
            | Event::CompactionFinished { .. } => self.push_compaction(record, &mut out),
            Event::TaskStarted { .. }
            | Event::TaskFinished { .. }
            | Event::TaskFailed { .. }
            | Event::TaskDelegated { .. }
            | Event::TaskReturned { .. }
            | Event::MergeStarted { .. }
            | Event::MergeConflicted { .. }
            | Event::TaskSkipped { .. }
            | Event::CheckStarted { .. }
            | Event::CheckFinished { .. }
            | Event::RollbackStarted { .. }
            | Event::RollbackFinished { .. } => self.push_task(record, &mut out),
            Event::BudgetWarning { .. }
            | Event::LoopDetected { .. }
            | Event::McpServerFailed { .. }
            | Event::McpServerStarted { .. }
            | Event::RepoMapRendered { .. }
            | Event::EmbeddingsUsed { .. }
            | Event::NoteAdded { .. }
            | Event::TextEndAccepted { .. }
            | Event::PlanSet { .. }
            | Event::SnapshotTaken { .. } => {}
        }
        out
    }

    fn add_usage(&mut self, usage: &Usage) {
        self.usage.prompt_tokens += usage.prompt_tokens;
        self.usage.completion_tokens += usage.completion_tokens;
    }

    /// The run ended for good: everything still open ends with it, the run span last.
    fn end_run(
        &mut self,
        at: Timestamp,
        status: Status,
        exit_code: i32,
        out: &mut Vec<SpanRecord>,
    ) {
        self.abandon_in_flight(at, out);
        let tools = std::mem::take(&mut self.tools);
        for open in tools.into_values() {
            out.push(open.end(at, Status::Unset, Vec::new()));
        }
        for open in std::mem::take(&mut self.checks).into_values() {
            out.push(open.end(at, Status::Unset, Vec::new()));
        }
        for open in std::mem::take(&mut self.rollbacks).into_values() {
            out.push(open.end(at, Status::Unset, Vec::new()));
        }
        for open in std::mem::take(&mut self.delegated).into_values() {
            out.push(open.end(at, Status::Unset, outcome("interrupted")));
        }
        let task_status = match &status {
            Status::Ok => Status::Unset,
            other => other.clone(),
        };
        self.end_task(at, "interrupted", task_status, out);
        // A run journaled before this process (a resume without its start replayed) still has
        // its span: its start is unknown here, so it starts at the end.
        let open = self.run.take().unwrap_or_else(|| Open {
            id: self.run_span(),
            parent: None,
            name: "invoke_agent baton".into(),
            kind: Kind::Internal,
            start: at,
            attributes: vec![("baton.run.id", self.run_id.to_string().into())],
        });
        let mut extra = usage_attrs(&self.usage);
        extra.push(("baton.cost_usd", self.cost_usd.into()));
        extra.push(("baton.turns", self.turns.into()));
        extra.push(("baton.exit_code", exit_code.into()));
        if let Status::Error(_) = status {
            extra.push(("error.type", "run_failed".into()));
        }
        out.push(open.end(at, status, extra));
    }
}

/// Every span the journal `events` ended, in the order they ended.
pub fn spans(run_id: &RunId, events: &[EventRecord]) -> Vec<SpanRecord> {
    let mut builder = SpanBuilder::new(run_id.clone());
    events.iter().flat_map(|e| builder.push(e)).collect()
}

mod fold;

#[cfg(test)]
#[path = "spans_tests.rs"]
mod tests;

fn outcome(outcome: &'static str) -> Attrs {
    vec![("baton.task.outcome", outcome.into())]
}
