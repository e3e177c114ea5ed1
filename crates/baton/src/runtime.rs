//! [`Runtime`]: a built engine for one workspace — store, provider, tools, sandbox, observers,
//! prices, rate limiter, retry policy and secrets put together from settings — and the
//! [`RuntimeBuilder`] that assembles it. Every part has a default taken from the workspace's
//! configuration; a program replaces the ones it wants to own (an in-process model, its own
//! tools, a shared store).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use baton_core::{RunId, RunSettings};
use baton_engine::{
    Engine, EngineParts, Extensions, Fanout, RunObserver, RunOutcome, SettingsOverride, Snapshots,
    StartRun, StopSignal, WorkspacePersistence,
};
use baton_model::ModelProvider;
use baton_store::Store;
use baton_tools::{ExecEnv, ToolRegistry};

use crate::config::{self, ConfigLayer};
use crate::{Error, client, exec, settings, store};

/// The base URL journaled for a run whose provider the program gave (no HTTP endpoint).
pub const IN_PROCESS: &str = "in-process";

/// A run engine for one workspace, ready to start, resume or submit runs.
///
/// ```no_run
/// # async fn demo() -> baton::Result<()> {
/// // Settings from the workspace's config files and the environment (BATON_BASE_URL, …).
/// let runtime = baton::Runtime::builder().workspace(".").build().await?;
/// let outcome = runtime.start("make the failing test pass").await?;
/// println!("{outcome:?}");
/// # Ok(())
/// # }
/// ```
pub struct Runtime {
    engine: Engine,
    workspace: PathBuf,
    settings: RunSettings,
    store: Arc<dyn Store>,
    secrets: Vec<String>,
    /// The configured MCP servers (their sessions end when the runtime is dropped).
    mcp: Option<Arc<baton_mcp::McpTools>>,
    notices: Vec<String>,
}

impl Runtime {
    /// A builder with every part at its default.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// Starts a new run on `goal` and drives it until it finishes, fails or pauses.
    pub async fn start(&self, goal: impl Into<String>) -> Result<RunOutcome, Error> {
        Ok(self.engine.start(self.request(goal.into(), None)).await?)
    }

    /// Starts a new run that works through `plan` (a validated task graph with checks).
    pub async fn start_with_plan(
        &self,
        goal: impl Into<String>,
        plan: baton_core::task::Plan,
    ) -> Result<RunOutcome, Error> {
        Ok(self
            .engine
            .start(self.request(goal.into(), Some(plan)))
            .await?)
    }

    /// Like [`Runtime::start`], under an id the caller chose (a supervisor that must know the
    /// run before the process that runs it creates it).
    pub async fn start_with_id(
        &self,
        run_id: RunId,
        request: StartRun,
    ) -> Result<RunOutcome, Error> {
        Ok(self.engine.start_with_id(run_id, request).await?)
    }

    /// Replays `run_id`'s journal and keeps going from where it stopped: finished model and
    /// tool calls are never repeated. `overrides` changes settings from now on.
    pub async fn resume(
        &self,
        run_id: &RunId,
        overrides: &SettingsOverride,
    ) -> Result<RunOutcome, Error> {
        Ok(self.engine.resume(run_id, overrides).await?)
    }

    /// Creates a run on `goal` and journals its start without taking a step, for a worker
    /// (`baton worker`) sharing the store to claim and run.
    pub async fn submit(&self, goal: impl Into<String>) -> Result<RunId, Error> {
        Ok(self.engine.submit(self.request(goal.into(), None)).await?)
    }

    /// The request [`Runtime::start`] sends: this workspace and these settings.
    pub fn request(&self, goal: String, plan: Option<baton_core::task::Plan>) -> StartRun {
        StartRun {
            goal,
            workspace: self.workspace.clone(),
            settings: self.settings.clone(),
            plan,
        }
    }

    /// The engine itself, for what the runtime does not wrap (a worker's claimed runs).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The store runs are journaled in.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The settings new runs start with.
    pub fn settings(&self) -> &RunSettings {
        &self.settings
    }

    /// The workspace directory (canonical).
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The secret values scrubbed from everything journaled (the API key, credential-named
    /// environment variables): a program redacts its own logs with them too.
    pub fn secrets(&self) -> &[String] {
        &self.secrets
    }

    /// The configured MCP servers and how each one's start went (`None`: none configured).
    pub fn mcp(&self) -> Option<&baton_mcp::McpTools> {
        self.mcp.as_deref()
    }

    /// What the build found worth telling the user, one line each: each MCP server's start (a
    /// failed one is left out of the run), "no embedder configured" for the code index. Also
    /// logged at `info`; may echo a secret from a server's stderr, so redact before printing.
    pub fn notices(&self) -> &[String] {
        &self.notices
    }

    /// Ends the MCP servers' sessions now (dropping the runtime ends them too, without waiting).
    pub async fn shutdown(&self) {
        if let Some(mcp) = &self.mcp {
            mcp.shutdown().await;
        }
    }
}

/// How a runtime's code index serves its runs (see [`RuntimeBuilder::code_index`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CodeIndexing {
    /// Opened for the runs, refreshed in the background as they change files, its repo map in
    /// task briefs and its embedding usage journaled. An index that cannot be opened (a
    /// read-only workspace) leaves the code tools out; a misconfigured embedder is an error.
    #[default]
    Live,
    /// Opened only so that the code tools are among a submitted run's journaled tools: nothing
    /// is indexed here (the worker that claims the run indexes its own copy). An index that
    /// cannot be opened is an error.
    ToolsOnly,
}

/// Told the secret values as soon as they are known, before anything that may echo one (an
/// MCP server's stderr) is logged or reported: a program adds them to its own log redaction.
pub type SecretsHook = Arc<dyn Fn(&[String]) + Send + Sync>;

/// Assembles a [`Runtime`]; see [`Runtime::builder`]. Only the workspace is required.
///
/// This is the one place settings become a running engine: the CLI's `run`, `resume` and
/// `submit`, the supervisor's children (which are `baton run`/`resume` processes) and the
/// worker's claimed runs all build one here.
#[derive(Default)]
pub struct RuntimeBuilder {
    workspace: Option<PathBuf>,
    settings: Option<RunSettings>,
    config: Option<ConfigLayer>,
    resolved: Option<(RunSettings, ConfigLayer)>,
    /// The store and its PostgreSQL URL when it is one (for the shared embedding cache).
    store: Option<(Arc<dyn Store>, Option<String>)>,
    provider: Option<Arc<dyn ModelProvider>>,
    tools: Option<ToolRegistry>,
    observers: Vec<Arc<dyn RunObserver>>,
    stop: Option<StopSignal>,
    exec: Option<ExecEnv>,
    snapshots: Option<Snapshots>,
    persistence: Option<Arc<dyn WorkspacePersistence>>,
    code_index: CodeIndexing,
    secrets_hook: Option<SecretsHook>,
}

impl RuntimeBuilder {
    /// The directory the agent works in (required).
    pub fn workspace(mut self, dir: impl AsRef<Path>) -> Self {
        self.workspace = Some(dir.as_ref().to_owned());
        self
    }

    /// The settings of new runs. Default: resolved from the configuration
    /// ([`settings::resolve`]: user file, trusted project file, environment, [`Self::config`]).
    pub fn settings(mut self, settings: RunSettings) -> Self {
        self.settings = Some(settings);
        self
    }

    /// Configuration keys over the files and the environment (the CLI's flags are one such
    /// layer): prices, rate limits, retries, timeouts, `[sandbox]`, `[snapshots]`.
    pub fn config(mut self, layer: ConfigLayer) -> Self {
        self.config = Some(layer);
        self
    }

    /// The settings of new runs and the whole configuration, both already resolved by the
    /// caller (the CLI layers its flags itself): used as given, no file is read again. Takes the
    /// place of [`Self::settings`] and [`Self::config`].
    pub fn resolved(mut self, settings: RunSettings, layer: ConfigLayer) -> Self {
        self.resolved = Some((settings, layer));
        self
    }

    /// Where runs are journaled. Default: the workspace's SQLite journal (or `BATON_STORE`).
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some((store, None));
        self
    }

    /// A store opened by [`store::open_store_for_run`]: a PostgreSQL one also keeps the code
    /// index's embeddings when `[embeddings] cache = "postgres"`.
    pub fn opened_store(mut self, opened: store::Opened) -> Self {
        let url = opened.postgres_url().map(str::to_owned);
        self.store = Some((opened.store, url));
        self
    }

    /// A PostgreSQL store already open, with its URL (where `[embeddings] cache = "postgres"`
    /// shares vectors): a worker's one connection pool for all its runs.
    pub fn postgres_store(mut self, store: Arc<dyn Store>, url: Option<String>) -> Self {
        self.store = Some((store, url));
        self
    }

    /// The model. Default: the HTTP provider the settings name (Chat Completions, Responses or
    /// Anthropic Messages), its key from the environment.
    pub fn provider(mut self, provider: Arc<dyn ModelProvider>) -> Self {
        self.provider = Some(provider);
        self
    }

    /// The agent's tools. Default: [`ToolRegistry::standard`].
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = Some(tools);
        self
    }

    /// Adds an observer of every journaled event and stream delta; several are called in the
    /// order added. Default: none.
    pub fn observer(mut self, observer: Arc<dyn RunObserver>) -> Self {
        self.observers.push(observer);
        self
    }

    /// What pauses a run cleanly (Ctrl-C in the CLI). Default: never.
    pub fn stop_signal(mut self, stop: StopSignal) -> Self {
        self.stop = Some(stop);
        self
    }

    /// How commands execute. Default: the configuration's `[sandbox]` and policy files
    /// ([`exec::exec_env`]).
    pub fn exec(mut self, exec: ExecEnv) -> Self {
        self.exec = Some(exec);
        self
    }

    /// Workspace snapshots in the state directory's shadow git. Default: the configuration's
    /// `[snapshots] enabled`, on if unset.
    pub fn snapshots(mut self, snapshots: Snapshots) -> Self {
        self.snapshots = Some(snapshots);
        self
    }

    /// Where a run's workspace is saved as it changes (a worker's artifact store), so that a
    /// run claimed elsewhere continues from it. Default: nowhere.
    pub fn persistence(mut self, persistence: Arc<dyn WorkspacePersistence>) -> Self {
        self.persistence = Some(persistence);
        self
    }

    /// How the code index serves the runs. Default: [`CodeIndexing::Live`]. Ignored when the
    /// program gives its own [`Self::tools`] (it gets exactly those, and the MCP servers').
    pub fn code_index(mut self, indexing: CodeIndexing) -> Self {
        self.code_index = indexing;
        self
    }

    /// Called with the secret values as soon as they are known, before anything that may echo
    /// one is logged (the CLI's and the worker's log redaction). Default: nobody.
    pub fn on_secrets(mut self, hook: SecretsHook) -> Self {
        self.secrets_hook = Some(hook);
        self
    }

    /// Builds the runtime: every part not given is made from the configuration. Bad
    /// configuration is an [`Error::Usage`] naming the key; nothing has started yet.
    pub async fn build(self) -> Result<Runtime, Error> {
        let dir = self
            .workspace
            .as_deref()
            .ok_or_else(|| Error::usage("Runtime::builder() needs a workspace"))?;
        let workspace = settings::workspace_dir(dir)?;
        let overrides = self.config.unwrap_or_default();
        let (run_settings, layer) = match (self.resolved, self.settings) {
            (Some(resolved), _) => resolved,
            (None, Some(given)) => {
                let layer = settings::file_and_env_layers(&workspace)?.overlay(overrides);
                (given, layer)
            }
            // An in-process provider needs no endpoint: its description names the model in
            // the journal unless the configuration says otherwise.
            (None, None) => {
                let defaults = match &self.provider {
                    Some(provider) => ConfigLayer {
                        base_url: Some(IN_PROCESS.into()),
                        model: Some(provider.describe()),
                        ..ConfigLayer::default()
                    },
                    None => ConfigLayer::default(),
                };
                settings::resolve_over(defaults, &workspace, overrides)?
            }
        };
        let (store, store_url) = match self.store {
            Some(given) => given,
            // As the CLI's `--store`, which falls back to `BATON_STORE` the same way.
            None => {
                let url = std::env::var("BATON_STORE")
                    .ok()
                    .filter(|u| !u.trim().is_empty());
                let opened = store::open_store_for_run(&workspace, url.as_deref()).await?;
                let url = opened.postgres_url().map(str::to_owned);
                (opened.store, url)
            }
        };
        let exec = match self.exec {
            Some(exec) => exec,
            None => exec::exec_env(&workspace, &layer)?,
        };
        let snapshots =
            self.snapshots
                .unwrap_or(match layer.snapshots.as_ref().and_then(|s| s.enabled) {
                    Some(false) => Snapshots::Off,
                    _ => Snapshots::On,
                });
        // A plain function, not a closure: a closure over `&[String]` held across the awaits
        // below makes the build's future not `Send` for every lifetime (a compiler limit).
        let hook = self.secrets_hook;
        // What the servers are given must be scrubbed from what is said about them (a failed
        // server's stderr) before any of it is.
        tell_secrets(hook.as_ref(), &crate::mcp::secret_values(&layer));
        let mcp = crate::mcp::start(&workspace, &layer, &exec).await?;
        let mut notices = mcp.as_deref().map(crate::mcp::describe).unwrap_or_default();
        // A program that brings its own tools gets exactly those (and the MCP servers').
        let code = match &self.tools {
            Some(_) => None,
            None => open_code(self.code_index, &workspace, &layer, store_url.as_deref()).await?,
        };
        // Only a live index refreshes on changes and renders briefs; a tools-only one is there
        // for its tools' specs.
        let live_code = match self.code_index {
            CodeIndexing::Live => code.as_ref(),
            CodeIndexing::ToolsOnly => None,
        };
        if live_code.is_some_and(|c| c.embeddings().is_none()) {
            notices.push(crate::embeddings::NO_EMBEDDER.to_string());
        }
        for line in &notices {
            tracing::info!("{line}");
        }
        let tools = match self.tools {
            Some(tools) => crate::mcp::registry(tools, mcp.as_deref()),
            None => crate::code::run_tools(code.as_ref(), mcp.as_deref()),
        };
        // The optional parts reach the engine as one value; how each MCP server started is
        // journaled by the engine when a run starts or resumes.
        let extensions = crate::code::with_code(
            Extensions {
                snapshots,
                persistence: self.persistence,
                mcp_servers: mcp.as_deref().map(crate::mcp::starts).unwrap_or_default(),
                ..Extensions::default()
            },
            live_code,
        );
        let parts = Parts {
            settings: &run_settings,
            layer: &layer,
            provider: self.provider,
            tools,
            observer: crate::code::observing(observer_of(self.observers), live_code),
            stop: self.stop.unwrap_or_else(StopSignal::never),
            extensions,
        };
        let (engine, secrets) = engine(parts, store.clone(), exec)?;
        tell_secrets(hook.as_ref(), &secrets);
        Ok(Runtime {
            engine,
            workspace,
            settings: run_settings,
            store,
            secrets,
            mcp,
            notices,
        })
    }
}

/// What [`engine`] needs beside the store and the execution environment.
struct Parts<'a> {
    /// The run's settings (the provider is built for their model unless one is given).
    settings: &'a RunSettings,
    /// The merged configuration: timeouts, retries, prices, rate limit, breaker.
    layer: &'a ConfigLayer,
    /// A provider to use instead of the one the settings name.
    provider: Option<Arc<dyn ModelProvider>>,
    /// The agent's tools.
    tools: ToolRegistry,
    /// Who sees each journaled event.
    observer: Arc<dyn RunObserver>,
    /// What pauses the run.
    stop: StopSignal,
    /// The optional parts: snapshots, persistence, the code index, the MCP servers' starts.
    extensions: Extensions,
}

/// An engine from its parts, and the secrets it scrubs: [`RuntimeBuilder::build`]'s last step.
fn engine(
    parts: Parts<'_>,
    store: Arc<dyn Store>,
    exec: ExecEnv,
) -> Result<(Engine, Vec<String>), Error> {
    let layer = parts.layer;
    let (provider, api_key) = match parts.provider {
        Some(provider) => (provider, None),
        None => {
            let client = client::model_client(&parts.settings.model, layer)?;
            (client.provider, client.api_key)
        }
    };
    let rate_limiter =
        baton_model::ratelimit::RateLimiter::new(layer.rate_limit.unwrap_or_default())
            .map_err(|e| Error::usage(format!("invalid [rate_limit] in the config: {e}")))?;
    let mut secrets = settings::secret_values(api_key);
    secrets.extend(crate::mcp::secret_values(layer));
    secrets.extend(crate::embeddings::secret_values(layer.embeddings.as_ref()));
    let engine = Engine::new(EngineParts {
        store,
        provider,
        tools: Arc::new(parts.tools),
        retry: client::retry_policy(layer),
        secrets: secrets.clone(),
        secret_env_vars: config::SECRET_ENV_VARS
            .iter()
            .map(|s| s.to_string())
            .collect(),
        exec,
        observer: parts.observer,
        stop: parts.stop,
        model_call_timeout: Duration::from_secs(layer.model_call_timeout_secs.unwrap_or(1800)),
        breaker_failures: layer.circuit_breaker_failures.unwrap_or(10).max(1),
        rate_limiter,
        prices: Arc::new(settings::price_table(layer)),
        extensions: parts.extensions,
    });
    Ok((engine, secrets))
}

/// The code index as `indexing` says (see [`CodeIndexing`]).
async fn open_code(
    indexing: CodeIndexing,
    workspace: &Path,
    layer: &ConfigLayer,
    store_url: Option<&str>,
) -> Result<Option<Arc<crate::code::CodeIntel>>, Error> {
    match indexing {
        CodeIndexing::Live => crate::code::CodeIntel::for_run(workspace, layer, store_url).await,
        CodeIndexing::ToolsOnly => crate::code::CodeIntel::open(workspace, layer, store_url)
            .await
            .map(Some),
    }
}

fn tell_secrets(hook: Option<&SecretsHook>, secrets: &[String]) {
    if let Some(hook) = hook {
        hook(secrets);
    }
}

fn observer_of(mut observers: Vec<Arc<dyn RunObserver>>) -> Arc<dyn RunObserver> {
    match observers.len() {
        1 => observers.remove(0),
        _ => Arc::new(Fanout(observers)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker builds its runtimes inside `tokio::spawn`: the build must be a `Send` future
    /// for every lifetime (a store's opening once was not).
    #[test]
    fn the_build_is_a_send_future() {
        fn is_send<T: Send>(_: T) {}
        is_send(RuntimeBuilder::default().build());
    }
}
