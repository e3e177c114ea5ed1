//! One measured run: the engine, a real store, a zero-latency model and a no-op echo tool.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use baton_core::*;
use baton_engine::{Engine, EngineParts, RunObserver, RunOutcome, SettingsOverride, StartRun};
use baton_model::{ModelError, ModelProvider, RetryPolicy, StreamObserver};
use baton_store::testing::PgTestSchema;
use baton_store::{PostgresStore, SqliteStore, Store};
use baton_tools::{ToolContext, ToolRegistry, TypedTool};
use serde::{Deserialize, Serialize};

use crate::counting::{CountingStore, journal_bytes};

/// Characters of text the model sends the tool each turn (and the tool echoes back), as in the
/// LangGraph benchmark.
pub const PAYLOAD_CHARS: usize = 400;

#[derive(Clone, Copy, Debug)]
pub enum BackendKind {
    Sqlite,
    Postgres,
}

impl BackendKind {
    pub fn parse(name: &str) -> BackendKind {
        match name {
            "sqlite" => BackendKind::Sqlite,
            "postgres" => BackendKind::Postgres,
            other => panic!("unknown store {other:?}: sqlite or postgres"),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Sqlite => "sqlite",
            BackendKind::Postgres => "postgres",
        }
    }
}

/// What the no-op tool declares: read-only (what it is, as the peer's tool) — its intent may
/// wait for the next commit, so a turn costs one — or mutating, whose intent must be durable
/// before it runs: a turn costs two commits, the floor for a turn that changes something.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolKind {
    ReadOnly,
    Mutating,
}

impl ToolKind {
    pub fn parse(name: &str) -> ToolKind {
        match name {
            "read-only" => ToolKind::ReadOnly,
            "mutating" => ToolKind::Mutating,
            other => panic!("unknown tool kind {other:?}: read-only or mutating"),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ToolKind::ReadOnly => "read-only",
            ToolKind::Mutating => "mutating",
        }
    }
}

/// What one run measured; printed by the child process as one JSON line.
#[derive(Debug, Serialize, Deserialize)]
pub struct Measured {
    pub store: String,
    /// The no-op tool's declared effect ([`ToolKind::name`]).
    pub tool: String,
    pub turns: usize,
    /// Every turn's harness time, in order.
    pub turn_ms: Vec<f64>,
    /// All commits of the run (its start and pause included) per turn.
    pub commits_per_turn: f64,
    /// Commits per turn between the first turn's model call and the last's.
    pub steady_commits_per_turn: f64,
    /// The same commits per effect started (model calls, summary calls and tool calls): the floor
    /// of "journal before effect" is one.
    pub commits_per_effect: f64,
    /// Of a turn's time, what the store's appends took (mean).
    pub append_ms_per_turn: f64,
    /// Serialized events appended, per turn.
    pub journal_bytes_per_turn: f64,
    /// What the store takes after the run, per turn: the SQLite file, or the PostgreSQL schema's
    /// tables with their indexes and TOAST.
    pub stored_bytes_per_turn: f64,
    /// What the store took before the run (its schema): fixed, whatever the run's length.
    pub empty_store_bytes: u64,
    /// What a turn carries: the tool call's arguments and the tool's output.
    pub content_bytes_per_turn: f64,
    pub compactions: usize,
    /// Peak RSS of the process when the run paused, before the resume.
    pub peak_rss_run_kib: u64,
    /// Peak RSS after the resume too (which loads and replays the whole journal).
    pub peak_rss_kib: u64,
    pub resume_to_ready_ms: f64,
    /// Events the resumed run replayed.
    pub resumed_events: u64,
}

/// Text of exactly `len` characters from a vocabulary of 18 words, different per turn.
fn words(seed: usize, len: usize) -> String {
    const WORDS: &[&str] = &[
        "agent", "tool", "call", "result", "state", "graph", "journal", "durable", "commit",
        "replay", "resume", "turn", "model", "reply", "context", "window", "budget", "retry",
    ];
    let mut out = String::with_capacity(len + 16);
    let mut i = seed.wrapping_mul(2_654_435_761);
    while out.len() < len {
        i = i
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        out.push_str(WORDS[(i >> 33) % WORDS.len()]);
        out.push(' ');
    }
    out.truncate(len);
    out
}

/// Real source code, the kind of text a coding agent's tools carry: baton's own.
const SOURCES: &[&str] = &[
    include_str!("../../src/run_loop.rs"),
    include_str!("../../src/journal.rs"),
    include_str!("../../../baton-context/src/encoder.rs"),
    include_str!("../../../baton-store/src/sqlite/appender.rs"),
    include_str!("../../../baton-core/src/state.rs"),
];

/// `len` characters of real source code, from a different place every turn (deterministic). The
/// text decides how well the store compresses a turn: real code compresses about as a coding
/// agent's tool traffic does, where the word salad of a small vocabulary this bench used before
/// compressed far better and would flatter the store's bytes.
fn text(seed: usize, len: usize) -> String {
    // `BATON_OVERHEAD_TEXT=words`: the word salad this bench sent before, to compare with runs
    // measured then.
    if std::env::var("BATON_OVERHEAD_TEXT").is_ok_and(|t| t == "words") {
        return words(seed, len);
    }
    let mut i = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
    i = i
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    let source = SOURCES[(i >> 40) % SOURCES.len()];
    let start = source.floor_char_boundary((i >> 8) % source.len().saturating_sub(len * 4).max(1));
    source[start..].chars().take(len).collect()
}

#[derive(Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// The text to echo.
    text: String,
}

/// The no-op tool: returns its argument. It changes nothing, whatever it declares.
struct Echo<const MUTATING: bool>;

#[async_trait]
impl<const MUTATING: bool> TypedTool for Echo<MUTATING> {
    type Args = EchoArgs;
    const NAME: &'static str = "echo";
    const EFFECT: ToolEffect = if MUTATING {
        ToolEffect::Mutating
    } else {
        ToolEffect::ReadOnly
    };

    fn description(&self) -> String {
        "Echo the text back.".into()
    }

    async fn run(&self, _ctx: &ToolContext<'_>, args: EchoArgs) -> ToolResult {
        ToolResult::success(args.text)
    }
}

/// The zero-latency model: a turn's call records when it came and answers at once — one
/// `echo` call per turn until `calls_before_finish`, then `finish`; a compaction's summary
/// request gets a short summary. It keeps no requests (their memory would be the model's).
struct Model {
    started: Instant,
    calls: AtomicUsize,
    calls_before_finish: AtomicUsize,
    /// Microseconds since `started` of every turn's model call.
    arrivals: Mutex<Vec<u64>>,
    /// The store whose commits are counted, and their number at each turn's model call: the
    /// steady state between the first and the last call.
    commits: Option<Arc<CountingStore>>,
    commits_at_call: Mutex<Vec<u64>>,
    summaries: AtomicUsize,
}

impl Model {
    fn new(turns: usize, commits: Option<Arc<CountingStore>>) -> Model {
        Model {
            commits,
            commits_at_call: Mutex::new(Vec::with_capacity(turns + 2)),
            started: Instant::now(),
            calls: AtomicUsize::new(0),
            calls_before_finish: AtomicUsize::new(usize::MAX),
            arrivals: Mutex::new(Vec::with_capacity(turns + 2)),
            summaries: AtomicUsize::new(0),
        }
    }
}

fn reply(message: AssistantMessage, finish_reason: &str) -> ModelReply {
    ModelReply {
        message,
        usage: Some(Usage {
            prompt_tokens: 1_000,
            completion_tokens: 120,
            ..Default::default()
        }),
        finish_reason: Some(finish_reason.into()),
        served_model: None,
    }
}

fn tool_call(name: &str, arguments: String) -> AssistantMessage {
    AssistantMessage {
        content: None,
        tool_calls: vec![ToolCall {
            id: String::new(),
            name: name.into(),
            arguments,
        }],
        ..Default::default()
    }
}

#[async_trait]
impl ModelProvider for Model {
    fn describe(&self) -> String {
        "zero-latency benchmark model".into()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        _observer: &mut dyn StreamObserver,
    ) -> Result<ModelReply, ModelError> {
        if request.tool_choice == ToolChoice::None {
            self.summaries.fetch_add(1, Ordering::Relaxed);
            let message = AssistantMessage {
                content: Some("Echoed text turn after turn; nothing else to remember.".into()),
                ..Default::default()
            };
            return Ok(reply(message, "stop"));
        }
        let at = self.started.elapsed().as_micros() as u64;
        self.arrivals.lock().unwrap().push(at);
        let commits = self.commits.as_ref().map_or(0, |c| c.count() as u64);
        self.commits_at_call.lock().unwrap().push(commits);
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        if n >= self.calls_before_finish.load(Ordering::Relaxed) {
            let args = serde_json::json!({"summary": "echoed every turn"}).to_string();
            return Ok(reply(tool_call(FINISH_TOOL, args), "tool_calls"));
        }
        let args = serde_json::json!({"text": text(n, PAYLOAD_CHARS)}).to_string();
        Ok(reply(tool_call("echo", args), "tool_calls"))
    }
}

struct Quiet;
impl RunObserver for Quiet {
    fn on_event(&self, _record: &EventRecord, _state: &RunState) {}
}

/// Where the run's store lives; kept alive for the whole measurement.
enum Place {
    /// The directory, and the guard that removes it (none with `BATON_OVERHEAD_KEEP`).
    Sqlite {
        dir: std::path::PathBuf,
        _guard: Option<tempfile::TempDir>,
    },
    Postgres(PgTestSchema),
}

impl Place {
    async fn new(backend: BackendKind, turns: usize, tool: ToolKind) -> Place {
        match backend {
            BackendKind::Sqlite => {
                // For inspecting what the journal holds, the file can outlive the measurement.
                if let Some(keep) = std::env::var_os("BATON_OVERHEAD_KEEP") {
                    let dir =
                        std::path::Path::new(&keep).join(format!("{turns}-sqlite-{}", tool.name()));
                    std::fs::create_dir_all(&dir).unwrap();
                    for name in ["baton.db", "baton.db-wal", "baton.db-shm"] {
                        let _ = std::fs::remove_file(dir.join(name));
                    }
                    return Place::Sqlite { dir, _guard: None };
                }
                let guard = tempfile::tempdir().unwrap();
                Place::Sqlite {
                    dir: guard.path().to_path_buf(),
                    _guard: Some(guard),
                }
            }
            BackendKind::Postgres => Place::Postgres(PgTestSchema::create().await),
        }
    }

    async fn open(&self) -> Opened {
        match self {
            Place::Sqlite { dir, .. } => Opened::Sqlite(Arc::new(
                SqliteStore::open(&dir.join("baton.db")).await.unwrap(),
            )),
            Place::Postgres(schema) => Opened::Postgres(Arc::new(schema.store().await)),
        }
    }

    /// What the store takes: the SQLite file (and WAL), or every table of the PostgreSQL
    /// schema with its indexes and TOAST (`pg_total_relation_size`).
    async fn stored_bytes(&self) -> u64 {
        match self {
            Place::Sqlite { dir, .. } => {
                let size = |name: &str| std::fs::metadata(dir.join(name)).map_or(0, |m| m.len());
                size("baton.db") + size("baton.db-wal")
            }
            Place::Postgres(schema) => schema.stored_bytes().await,
        }
    }
}

/// An open store, which the measurement closes (SQLite folds its WAL in then).
enum Opened {
    Sqlite(Arc<SqliteStore>),
    Postgres(Arc<PostgresStore>),
}

impl Opened {
    fn store(&self) -> Arc<dyn Store> {
        match self {
            Opened::Sqlite(s) => s.clone(),
            Opened::Postgres(s) => s.clone(),
        }
    }

    async fn close(self) {
        match self {
            Opened::Sqlite(s) => s.close().await,
            Opened::Postgres(s) => s.close().await,
        }
    }
}

fn engine(store: Arc<dyn Store>, model: Arc<Model>, tool: ToolKind) -> Engine {
    let tools = match tool {
        ToolKind::ReadOnly => ToolRegistry::new().with(Arc::new(Echo::<false>)),
        ToolKind::Mutating => ToolRegistry::new().with(Arc::new(Echo::<true>)),
    };
    Engine::new(EngineParts {
        store,
        provider: model,
        tools: Arc::new(tools.with(Arc::new(baton_tools::Finish))),
        retry: RetryPolicy::default(),
        secrets: vec![],
        secret_env_vars: vec![],
        exec: baton_tools::ExecEnv::unconfined(),
        observer: Arc::new(Quiet),
        stop: baton_engine::StopSignal::never(),
        model_call_timeout: Duration::from_secs(60),
        breaker_failures: 100,
        prices: Arc::new(baton_model::pricing::PriceTable::defaults()),
        rate_limiter: baton_model::ratelimit::RateLimiter::unlimited(),
        extensions: baton_engine::Extensions::default(),
    })
}

fn settings(turns: usize) -> RunSettings {
    RunSettings {
        tasks: Default::default(),
        model: ModelSettings {
            provider: ProviderKind::OpenAiCompatible,
            base_url: "http://127.0.0.1:9/v1".into(),
            model: "gpt-4.1".into(),
            response_mode: ResponseMode::Whole,
            tool_choice: Default::default(),
            reasoning: Default::default(),
            wire_api: Default::default(),
        },
        limits: Limits {
            max_turns: turns as u32,
            shell_timeout_secs: 10,
        },
        context: ContextSettings::default(),
        budget: Default::default(),
        // The model calls the same tool every turn, with different text: no loop to detect.
        loop_detection: baton_core::governance::LoopPolicy {
            repeats: u32::MAX,
            alternations: u32::MAX,
            stalled_turns: u32::MAX,
            ..Default::default()
        },
        endings: Default::default(),
    }
}

/// Runs `turns` echo turns to the turn limit (the run pauses), resumes the run in a fresh engine
/// on a freshly opened store, and finishes it on the first call.
pub async fn measure(turns: usize, backend: BackendKind, tool: ToolKind) -> Measured {
    let place = Place::new(backend, turns, tool).await;
    let workspace = tempfile::tempdir().unwrap();

    let opened = place.open().await;
    // What the store takes before the run: its schema, and nothing a turn adds.
    let empty_store_bytes = place.stored_bytes().await;
    let store = Arc::new(CountingStore::new(opened.store()));
    let model = Arc::new(Model::new(turns, Some(store.clone())));
    let outcome = engine(store.clone(), model.clone(), tool)
        .start(StartRun {
            goal: "echo 400 characters of text every turn".into(),
            workspace: workspace.path().into(),
            settings: settings(turns),
            plan: None,
        })
        .await
        .unwrap();
    // The end of the last turn: the pause is journaled.
    let ended = model.started.elapsed().as_micros() as u64;
    let RunOutcome::Paused { run_id, .. } = outcome else {
        panic!("expected a pause at the turn limit, got {outcome:?}");
    };
    let arrivals = model.arrivals.lock().unwrap().clone();
    assert_eq!(arrivals.len(), turns, "one model call per turn");
    let appends = store.appends();
    let commits = appends.len() as u64;
    let at_call = model.commits_at_call.lock().unwrap().clone();
    let steady = (at_call[turns - 1] - at_call[0]) as f64 / (turns - 1) as f64;
    // Between those calls: turns − 1 model calls and as many tool calls, and every compaction's
    // summary call.
    let effects = 2 * (turns - 1) + model.summaries.load(Ordering::Relaxed);
    let commits_per_effect = (at_call[turns - 1] - at_call[0]) as f64 / effects as f64;
    let append_ms = appends.iter().map(|a| a.micros).sum::<u64>() as f64 / 1_000.0;
    let run_events: usize = appends.iter().map(|a| a.kinds.len()).sum();
    drop(store);
    opened.close().await;
    let peak_rss_run_kib = peak_rss_kib();

    let turn_ms = arrivals
        .iter()
        .zip(arrivals.iter().skip(1).chain(std::iter::once(&ended)))
        .map(|(a, b)| (b - a) as f64 / 1_000.0)
        .collect();

    let (resume_to_ready_ms, resumed_events) = resume(&place, &run_id, turns, tool).await;
    let peak_rss_resume_kib = peak_rss_kib();
    let stored_bytes = place.stored_bytes().await;
    // Sizes last: reading the whole journal back would otherwise count in the peaks above.
    let opened = place.open().await;
    let mut events = opened.store().load_events(&run_id).await.unwrap();
    events.truncate(run_events);
    let (journal_bytes, content) = journal_bytes(&events);
    drop(events);
    opened.close().await;
    Measured {
        store: backend.name().into(),
        tool: tool.name().into(),
        turns,
        turn_ms,
        commits_per_turn: commits as f64 / turns as f64,
        steady_commits_per_turn: steady,
        commits_per_effect,
        append_ms_per_turn: append_ms / turns as f64,
        journal_bytes_per_turn: journal_bytes as f64 / turns as f64,
        stored_bytes_per_turn: stored_bytes as f64 / turns as f64,
        empty_store_bytes,
        content_bytes_per_turn: content as f64 / turns as f64,
        compactions: model.summaries.load(Ordering::Relaxed),
        peak_rss_run_kib,
        peak_rss_kib: peak_rss_resume_kib,
        resume_to_ready_ms,
        resumed_events,
    }
}

/// Opens the store again and resumes: ready is the moment the first model request goes out.
async fn resume(place: &Place, run_id: &RunId, turns: usize, tool: ToolKind) -> (f64, u64) {
    let began = Instant::now();
    let opened = place.open().await;
    let store = opened.store();
    let model = Arc::new(Model::new(1, None));
    model.calls_before_finish.store(0, Ordering::Relaxed);
    let resumed = engine(store.clone(), model.clone(), tool);
    let limit = turns as u32 + 5;
    let overrides = SettingsOverride::edit(move |s| s.limits.max_turns = limit);
    let outcome = resumed.resume(run_id, &overrides).await.unwrap();
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    let first_request = model.arrivals.lock().unwrap()[0];
    let ready = model.started.duration_since(began) + Duration::from_micros(first_request);
    let events = store.get_run(run_id).await.unwrap().unwrap().event_count;
    drop((resumed, store));
    opened.close().await;
    (ready.as_secs_f64() * 1_000.0, events)
}

/// The median time of appending 4 KiB to a file and fsyncing it, 200 times, in the directory the
/// SQLite stores are made in (as the peer's `fsync_latency.py` measures it): a durable commit
/// costs at least one of these, so two a turn put a floor under the time per turn that no
/// harness can go below on this disk.
pub fn fsync_median_ms() -> f64 {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let mut file = std::fs::File::create(dir.path().join("fsync-probe")).unwrap();
    let block = vec![0x5a_u8; 4096];
    let mut ms: Vec<f64> = (0..200)
        .map(|_| {
            let began = Instant::now();
            file.write_all(&block).unwrap();
            file.sync_all().unwrap();
            began.elapsed().as_secs_f64() * 1_000.0
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    ms[ms.len() / 2]
}

/// The process's peak resident set (VmHWM), in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}
