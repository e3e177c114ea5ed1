//! Running the real engine in tests: a real store (either backend), the standard tools, a
//! function provider, and every event collected.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton_core::governance::LoopPolicy;
use baton_core::*;
use baton_engine::{Engine, EngineParts, Extensions, RunObserver, RunOutcome, StartRun};
use baton_model::{ModelProvider, RetryPolicy};
use baton_store::Store;
use baton_store::testing::PgTestSchema;
use baton_tools::ToolRegistry;

use super::backend::Backend;
use super::fn_provider::FnProvider;

#[derive(Default)]
pub struct Collect(Mutex<Vec<EventRecord>>);

impl Collect {
    /// Everything observed so far.
    pub fn events(&self) -> Vec<EventRecord> {
        self.0.lock().unwrap().clone()
    }
}

impl RunObserver for Collect {
    fn on_event(&self, record: &EventRecord, _state: &RunState) {
        self.0.lock().unwrap().push(record.clone());
    }
}

pub fn settings(context: ContextSettings) -> RunSettings {
    RunSettings {
        tasks: Default::default(),
        model: ModelSettings {
            provider: ProviderKind::OpenAiCompatible,
            base_url: "http://127.0.0.1:9/v1".into(),
            model: "local-model".into(),
            response_mode: ResponseMode::Whole,
            tool_choice: Default::default(),
            reasoning: Default::default(),
            wire_api: Default::default(),
        },
        limits: Limits {
            max_turns: 60,
            shell_timeout_secs: 10,
        },
        context,
        budget: Default::default(),
        loop_detection: Default::default(),
        endings: Default::default(),
    }
}

pub fn engine(store: Arc<dyn Store>, provider: Arc<dyn ModelProvider>) -> (Engine, Arc<Collect>) {
    engine_with(
        store,
        provider,
        ToolRegistry::standard(),
        Extensions::default(),
    )
}

/// [`engine`] with the tools and the extensions given instead of the standard tools and none.
pub fn engine_with(
    store: Arc<dyn Store>,
    provider: Arc<dyn ModelProvider>,
    tools: ToolRegistry,
    extensions: Extensions,
) -> (Engine, Arc<Collect>) {
    let observer = Arc::new(Collect::default());
    let engine = Engine::new(EngineParts {
        store,
        provider,
        tools: Arc::new(tools),
        retry: RetryPolicy {
            max_attempts: 3,
            max_total_wait: Duration::from_secs(5),
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
        },
        secrets: vec![],
        secret_env_vars: vec![],
        exec: baton_tools::ExecEnv::unconfined(),
        observer: observer.clone(),
        stop: baton_engine::StopSignal::never(),
        model_call_timeout: Duration::from_secs(60),
        breaker_failures: 100,
        prices: Arc::new(baton_model::pricing::PriceTable::defaults()),
        rate_limiter: baton_model::ratelimit::RateLimiter::unlimited(),
        extensions,
    });
    (engine, observer)
}

/// What a test run leaves behind: the outcome, the events as observed, the store (and the
/// Postgres schema that must live as long as it).
pub struct Ran {
    pub outcome: RunOutcome,
    pub events: Vec<EventRecord>,
    pub store: Arc<dyn Store>,
    pub _schema: Option<PgTestSchema>,
}

pub async fn run(
    backend: Backend,
    ws: &std::path::Path,
    context: ContextSettings,
    provider: Arc<FnProvider>,
) -> Ran {
    // Context tests script deliberately repetitive agents (the same file read over and over to
    // grow the prompt); the loop detector, tested in governance.rs, would stop them.
    let mut settings = settings(context);
    settings.loop_detection = LoopPolicy {
        repeats: 1_000,
        alternations: 1_000,
        stalled_turns: 1_000,
        ..LoopPolicy::default()
    };
    run_with(backend, ws, settings, provider).await
}

pub async fn run_with(
    backend: Backend,
    ws: &std::path::Path,
    settings: RunSettings,
    provider: Arc<FnProvider>,
) -> Ran {
    let (store, schema) = backend.store(ws).await;
    let (engine, observer) = engine(store.clone(), provider);
    let outcome = engine
        .start(StartRun {
            plan: None,
            goal: "Fix the parser so that tests/parser.rs passes".into(),
            workspace: ws.into(),
            settings,
        })
        .await
        .unwrap();
    let events = observer.0.lock().unwrap().clone();
    Ran {
        outcome,
        events,
        store,
        _schema: schema,
    }
}
