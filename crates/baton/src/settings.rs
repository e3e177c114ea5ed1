//! A run's settings from configuration: the user file, the project file (if trusted), the
//! environment and the caller's overrides, layered key by key; a provider preset applied; every
//! value checked, so a bad one is a usage error naming its key before anything starts.

use std::path::{Path, PathBuf};

use baton_context::profile::profile_for;
use baton_core::governance::Budget;
use baton_core::{Limits, ModelSettings, ProviderKind, RunSettings, ToolChoice};

use crate::config::{self, ConfigLayer};
use crate::{Error, providers};

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The workspace directory, canonical; a path that is not a directory is a usage error.
pub fn workspace_dir(path: &Path) -> Result<PathBuf, Error> {
    let dir = path
        .canonicalize()
        .map_err(|e| Error::usage(format!("workspace {}: {e}", path.display())))?;
    if !dir.is_dir() {
        return Err(Error::usage(format!(
            "workspace {} is not a directory",
            dir.display()
        )));
    }
    Ok(dir)
}

/// The budget a configuration layer sets; bad values are usage errors naming the key.
fn budget_from(layer: &ConfigLayer) -> Result<Budget, Error> {
    budget_of(
        "",
        layer.budget_usd,
        layer.budget_tokens,
        layer.max_time.as_deref(),
    )
}

/// The per-task budget a configuration layer sets.
fn task_budget_from(layer: &ConfigLayer) -> Result<Budget, Error> {
    budget_of(
        "task_",
        layer.task_budget_usd,
        layer.task_budget_tokens,
        layer.task_max_time.as_deref(),
    )
}

/// A budget from its keys (`prefix` names them in errors: `budget_usd`, `task_budget_usd`).
fn budget_of(
    prefix: &str,
    usd: Option<f64>,
    tokens: Option<u64>,
    time: Option<&str>,
) -> Result<Budget, Error> {
    if let Some(usd) = usd
        && !(usd.is_finite() && usd > 0.0)
    {
        return Err(Error::usage(format!(
            "{prefix}budget_usd = {usd}: use a positive amount of USD"
        )));
    }
    let wall_time_secs = time.map(config::parse_duration_secs).transpose()?;
    Ok(Budget {
        usd,
        tokens,
        wall_time_secs,
    })
}

/// Parses `--tool-choice` / `tool_choice`. Whether a named tool exists is the engine's check
/// (`Engine::start` / `resume`): only it knows the run's whole registry (code index, MCP).
fn tool_choice(text: Option<&str>) -> Option<ToolChoice> {
    text.map(ToolChoice::parse)
}

/// The user file, the project file and the environment, in that order of precedence.
pub fn file_and_env_layers(workspace: &Path) -> Result<ConfigLayer, Error> {
    let mut layer = ConfigLayer::default();
    if let Some(path) = config::user_config_path(env_var) {
        layer = layer.overlay(config::read_layer(&path)?);
    }
    let project = crate::trust::project_layer(workspace)?;
    Ok(layer
        .overlay(project)
        .overlay(ConfigLayer::from_env(env_var)))
}

/// The settings of a new run (or a doctor check): files, environment and `overrides` layered,
/// a provider preset applied, every value checked.
///
/// ```
/// use baton::config::ConfigLayer;
/// let workspace = tempfile::tempdir().unwrap();
/// let overrides = ConfigLayer {
///     base_url: Some("http://127.0.0.1:8080/v1".into()),
///     model: Some("my-model".into()),
///     max_turns: Some(12),
///     ..ConfigLayer::default()
/// };
/// let (settings, _layer) = baton::settings::resolve(workspace.path(), overrides).unwrap();
/// assert_eq!(settings.limits.max_turns, 12);
///
/// let bad = ConfigLayer { max_time: Some("soon".into()), ..ConfigLayer::default() };
/// assert!(baton::settings::resolve(workspace.path(), bad).unwrap_err().is_usage());
/// ```
pub fn resolve(
    workspace: &Path,
    overrides: ConfigLayer,
) -> Result<(RunSettings, ConfigLayer), Error> {
    resolve_over(ConfigLayer::default(), workspace, overrides)
}

/// [`resolve`] over `defaults`, a layer below the user file (a program's own defaults: the
/// model an in-process provider serves).
pub fn resolve_over(
    defaults: ConfigLayer,
    workspace: &Path,
    overrides: ConfigLayer,
) -> Result<(RunSettings, ConfigLayer), Error> {
    let layer = defaults
        .overlay(file_and_env_layers(workspace)?)
        .overlay(overrides);
    settings_of(layer)
}

/// The run settings one merged configuration layer gives (no files read): the preset, the
/// model's profile and its defaults under what the layer sets.
pub fn settings_of(layer: ConfigLayer) -> Result<(RunSettings, ConfigLayer), Error> {
    let preset = preset_named(layer.provider.as_deref())?;
    // An explicit base URL (any layer) wins over the preset's.
    let base_url = layer
        .base_url
        .clone()
        .or_else(|| preset.map(|p| p.base_url.to_string()));
    let (Some(base_url), Some(model)) = (base_url.clone(), layer.model.clone()) else {
        let user_file = config::user_config_path(env_var);
        return Err(Error::usage(config::no_model_help(
            base_url.is_some(),
            layer.model.is_some(),
            user_file.as_deref(),
        )));
    };
    let profile = profile_for(&model);
    let provider_kind = preset.map_or(ProviderKind::OpenAiCompatible, |p| p.kind);
    // The model's defaults, under everything the layer sets.
    let defaults = RunSettings {
        model: ModelSettings {
            provider: provider_kind,
            wire_api: default_wire_api(&base_url, &model),
            base_url,
            model,
            response_mode: Default::default(),
            tool_choice: ToolChoice::default(),
            reasoning: baton_core::ReasoningSettings {
                history: profile.reasoning.history,
                effort: None,
                // The profile's thinking switch is for the model's own wire; through a
                // gateway (OpenRouter, a proxy) the field may mean something else.
                thinking: profile
                    .reasoning
                    .thinking
                    .filter(|_| provider_kind == ProviderKind::Anthropic),
                thinking_budget: None,
                verbosity: None,
            },
        },
        limits: Limits::default(),
        budget: Budget::default(),
        loop_detection: Default::default(),
        // Normalized as a `[context]` table would leave it (masking values filled in).
        context: config::ContextConfig::default().apply(profile.context.clone())?,
        tasks: Default::default(),
        endings: Default::default(),
    };
    let mut settings = apply(&layer, defaults)?;
    let context_layer = layer.context.clone().unwrap_or_default();
    let wire_api = settings.model.wire_api;
    let provider_can_compact =
        provider_kind == ProviderKind::Anthropic || wire_api == baton_core::WireApi::Responses;
    // The profile's choice of compaction holds where the wire can compact and configuration
    // says nothing about compaction.
    if profile.compaction == baton_context::profile::CompactionBy::Provider
        && provider_can_compact
        && context_layer.compaction.is_none()
        && context_layer.summary.is_none()
    {
        settings.context.compaction = baton_core::Compaction::Provider;
    }
    if settings.context.compaction == baton_core::Compaction::Provider
        && provider_kind == ProviderKind::OpenAiCompatible
        && wire_api != baton_core::WireApi::Responses
    {
        return Err(Error::usage(
            "[context] compaction = \"provider\" needs the Responses API (wire_api = \"responses\") \
             or Anthropic: Chat Completions servers do not compact; use \"baton\" here",
        ));
    }
    Ok((settings, layer))
}

/// The keys `layer` sets, applied onto `settings`: each set key replaces its value there, unset
/// keys keep it; every value is held to the rules of the configuration (a bad one is a usage
/// error naming its key). The one place a configuration key becomes a run setting: a new run
/// applies its merged layer onto its model's defaults ([`settings_of`]), a resume applies its
/// flags onto the settings the run recorded. A plain key goes to its setting by its own
/// declaration (`=> set(…)` in `ConfigLayer`); this holds the keys with rules of their own.
///
/// ```
/// use baton::config::ConfigLayer;
/// let layer = ConfigLayer {
///     base_url: Some("http://127.0.0.1:8080/v1".into()),
///     model: Some("m".into()),
///     ..ConfigLayer::default()
/// };
/// let (recorded, _) = baton::settings::settings_of(layer).unwrap();
/// let resumed = ConfigLayer { task_max_turns: Some(9), ..ConfigLayer::default() };
/// let settings = baton::settings::apply(&resumed, recorded.clone()).unwrap();
/// assert_eq!(settings.tasks.max_turns, Some(9));
/// assert_eq!(settings.model, recorded.model, "unset keys keep their value");
/// ```
pub fn apply(layer: &ConfigLayer, mut s: RunSettings) -> Result<RunSettings, Error> {
    // A preset switches flavour and, unless a base URL is given, endpoint.
    if let Some(preset) = preset_named(layer.provider.as_deref())? {
        s.model.provider = preset.kind;
        s.model.base_url = preset.base_url.to_string();
    }
    if let Some(b) = layer.thinking_budget.filter(|b| *b < 1024) {
        return Err(Error::usage(format!(
            "thinking_budget = {b} is too small: Anthropic's minimum is 1024 tokens"
        )));
    }
    // The plain keys, each declared with its destination (`config/layer.rs`).
    layer.apply_declared(&mut s);
    if let Some(choice) = tool_choice(layer.tool_choice.as_deref()) {
        s.model.tool_choice = choice;
    }
    if let Some(context) = &layer.context {
        s.context = context.apply(s.context)?;
    }
    s.budget = budget_from(layer)?.over(s.budget);
    s.tasks.budget = task_budget_from(layer)?.over(s.tasks.budget);
    Ok(s)
}

/// The OpenAI wire a run speaks unless `wire_api` says: the Responses API for the models
/// OpenAI serves only there, when the endpoint is OpenAI's own; Chat Completions otherwise
/// (other servers mostly speak only that).
fn default_wire_api(base_url: &str, model: &str) -> baton_core::WireApi {
    let host = base_url
        .split_once("://")
        .map_or(base_url, |(_, rest)| rest)
        .split(['/', ':'])
        .next()
        .unwrap_or_default();
    let openai = host.eq_ignore_ascii_case("api.openai.com");
    if openai {
        profile_for(model).wire_api
    } else {
        baton_core::WireApi::Chat
    }
}

/// The preset a `--provider` / `provider =` names; an unknown name is a usage error.
fn preset_named(name: Option<&str>) -> Result<Option<&'static providers::Preset>, Error> {
    name.map(|name| {
        providers::preset(name).ok_or_else(|| {
            Error::usage(format!(
                "unknown provider '{name}'; known: {}",
                providers::preset_names()
            ))
        })
    })
    .transpose()
}

/// The built-in list prices with the config's `[prices."MODEL"]` tables over them.
pub fn price_table(layer: &ConfigLayer) -> baton_model::pricing::PriceTable {
    baton_model::pricing::PriceTable::defaults()
        .with_overrides(layer.prices.clone().unwrap_or_default())
}

/// A USD budget on a model without a price would never be reached: refused before the run.
pub fn check_budget_is_priced(settings: &RunSettings, layer: &ConfigLayer) -> Result<(), Error> {
    let usd_budget = settings.budget.usd.is_some() || settings.tasks.budget.usd.is_some();
    let model = &settings.model.model;
    if usd_budget && price_table(layer).price(model).is_none() {
        return Err(Error::usage(format!(
            "--budget-usd needs the price of model '{model}', which baton does not know: add a \
             [prices.\"{model}\"] table (input_per_mtok, output_per_mtok) to your config, or bound \
             the run with --budget-tokens instead"
        )));
    }
    Ok(())
}

/// Values to scrub from everything journaled: the API key and every environment variable named
/// like a credential (a command could print baton's own environment).
pub fn secret_values(api_key: Option<String>) -> Vec<String> {
    let names: Vec<String> = config::SECRET_ENV_VARS
        .iter()
        .map(|s| s.to_string())
        .collect();
    std::env::vars_os()
        .filter(|(name, _)| baton_tools::is_secret_var(&name.to_string_lossy(), &names))
        .filter_map(|(_, value)| value.into_string().ok())
        .chain(api_key)
        .collect()
}

/// baton's state (journal, config) is per machine: a `.gitignore` inside `.baton/` keeps it out of
/// the user's commits without touching their own ignore files.
pub fn keep_state_out_of_git(workspace: &Path) {
    let dir = workspace.join(".baton");
    let ignore = dir.join(".gitignore");
    // With a store elsewhere there may be no .baton/ at all; nothing to keep out then.
    if dir.is_dir()
        && !ignore.exists()
        && let Err(e) = std::fs::write(&ignore, "# baton's run state; not for version control\n*\n")
    {
        tracing::warn!("could not write {}: {e}", ignore.display());
    }
}
