//! The checks of `baton doctor`, each a report in plain words: one tiny request to the configured
//! model with a diagnosis of whatever goes wrong (nothing listening, unknown host, TLS, key,
//! model name); the sandbox and where the state lives; the code index's embedder; the MCP
//! servers, started.
//!
//! ```no_run
//! # async fn demo(settings: baton::RunSettings) -> baton::Result<()> {
//! let layer = baton::config::ConfigLayer::default();
//! let (answered, report) = baton_app::doctor::model_check(&settings, &layer).await?;
//! println!("{report}");
//! assert!(answered, "the model did not answer");
//! # Ok(())
//! # }
//! ```

use std::path::{Path, PathBuf};
use std::time::Instant;

use baton_core::{ErrorClass, Message, ModelRequest, ModelSettings, ResponseMode, ToolChoice};
use baton_model::{ModelError, NoObserver};
use baton_printer::{one_line, word};

use baton::Result;
use baton::client;
use baton::config::ConfigLayer;

/// What a failed check means for the user, from the error's class and text.
pub fn diagnose(error: &ModelError, settings: &ModelSettings) -> String {
    let text = error.message.to_lowercase();
    let url = &settings.base_url;
    let hint = match error.class {
        ErrorClass::Auth => "the server refused the API key: set BATON_API_KEY (or the provider's own variable) to a valid key".to_string(),
        ErrorClass::QuotaExhausted => "the account has no quota or credit left".to_string(),
        ErrorClass::RateLimited => "rate limited right now; the endpoint and key work".to_string(),
        ErrorClass::Overloaded => "the provider is overloaded right now; the endpoint and key work".to_string(),
        ErrorClass::ContextOverflow => "the server says the prompt is too long for this model".to_string(),
        ErrorClass::InvalidRequest
            if settings.wire_api == baton_core::WireApi::Chat
                && (text.contains("v1/responses") || baton_context::profile::responses_only(&settings.model)) =>
        {
            format!(
                "model '{}' is served only on the Responses API, and this run speaks Chat Completions: \
                 set wire_api = \"responses\" in the config or pass --wire-api responses",
                settings.model
            )
        }
        ErrorClass::InvalidRequest if error.status == Some(404) || text.contains("model") => format!(
            "the server does not know model '{}' (or {url} is not the API root): check --model and --base-url",
            settings.model
        ),
        ErrorClass::InvalidRequest => "the server rejected the request as invalid".to_string(),
        ErrorClass::BadResponse => format!("{url} answered, but not like a {} API: check --base-url / --provider", word(&settings.provider)),
        ErrorClass::Transient | ErrorClass::Unreachable if text.contains("dns") || text.contains("lookup") || text.contains("resolve") => {
            format!("the host in {url} cannot be found (DNS): check the URL and your network")
        }
        ErrorClass::Transient | ErrorClass::Unreachable if text.contains("refused") => {
            format!("nothing is listening at {url}: is the server running on that port?")
        }
        ErrorClass::Transient | ErrorClass::Unreachable if text.contains("certificate") || text.contains("tls") || text.contains("ssl") => {
            format!("TLS failed talking to {url}: certificate or protocol problem (http vs https?)")
        }
        ErrorClass::Transient if text.contains("timed out") || text.contains("took longer") => {
            format!("{url} did not answer in time")
        }
        ErrorClass::Transient => "the server failed or the connection broke".to_string(),
        ErrorClass::Unreachable => format!("nothing answered at {url}: check the URL and that the server runs"),
    };
    format!("{hint}\n  ({error})")
}

/// Sends the model of `run_settings` one tiny request; whether it answered, and the report.
pub async fn model_check(
    run_settings: &baton_core::RunSettings,
    layer: &ConfigLayer,
) -> Result<(bool, String)> {
    let settings = &run_settings.model;
    let client = client::model_client(settings, layer)?;
    let request = ModelRequest {
        model: settings.model.clone(),
        messages: vec![Message::User {
            content: "Reply with the single word: ok".into(),
        }],
        tools: vec![],
        response_mode: ResponseMode::Whole,
        tool_choice: ToolChoice::Auto,
        reasoning: settings.reasoning.clone(),
        provider_compaction_at: Default::default(),
    };
    let started = Instant::now();
    let outcome = client.provider.complete(&request, &mut NoObserver).await;
    let elapsed = started.elapsed().as_secs_f64();
    let head = format!(
        "{} model '{}' at {}",
        provider_name(settings),
        settings.model,
        settings.base_url
    );
    let profile = baton_context::profile::profile_for(&settings.model);
    let profile_line = profile_line(settings, &profile, run_settings.context.compaction);
    Ok(match outcome {
        Ok(reply) => {
            let usage = reply
                .usage
                .map(|u| {
                    format!(
                        "{} prompt + {} completion tokens",
                        u.prompt_tokens, u.completion_tokens
                    )
                })
                .unwrap_or_else(|| "no usage reported".into());
            let said = reply.message.content.unwrap_or_default();
            (
                true,
                format!(
                    "ok: {head} answered in {elapsed:.1}s ({usage}): {:?}\n{profile_line}",
                    one_line(&said, 80)
                ),
            )
        }
        Err(error) => (
            false,
            format!(
                "FAILED: {head}\n  {}\n{profile_line}",
                diagnose(&error, settings)
            ),
        ),
    })
}

/// What the run would speak and how: the wire, the reasoning settings and the context policy
/// the model's profile chose.
fn profile_line(
    settings: &ModelSettings,
    profile: &baton_context::profile::ModelProfile,
    compaction: baton_core::Compaction,
) -> String {
    let wire = match (settings.provider, settings.wire_api) {
        (baton_core::ProviderKind::Anthropic, _) => "Anthropic Messages",
        (_, baton_core::WireApi::Responses) => "Responses API",
        (_, baton_core::WireApi::Chat) => "Chat Completions",
    };
    let r = &settings.reasoning;
    let mut line = format!(
        "  profile '{}': wire {wire}; reasoning history {}, effort {}, thinking {}; compaction {}{}",
        profile.name,
        word(&r.history),
        r.effort.as_deref().unwrap_or("(server default)"),
        r.thinking
            .map_or("(server default)".to_string(), |t| word(&t)),
        match compaction {
            baton_core::Compaction::Summarize { .. } => "baton's summary",
            baton_core::Compaction::Provider => "the provider's",
            baton_core::Compaction::Off => "off",
        },
        r.verbosity
            .map_or(String::new(), |v| format!("; verbosity {}", v.as_str()))
    );
    if settings.wire_api == baton_core::WireApi::Chat
        && settings.provider == baton_core::ProviderKind::OpenAiCompatible
        && profile.wire_api == baton_core::WireApi::Responses
    {
        line.push_str(&format!(
            "\n  note: OpenAI serves '{}' only on the Responses API; with Chat Completions it \
             answers \"This model is only supported in v1/responses\" (use --wire-api responses)",
            settings.model
        ));
    }
    line
}

fn provider_name(settings: &ModelSettings) -> &'static str {
    match settings.provider {
        baton_core::ProviderKind::OpenAiCompatible => "OpenAI-compatible",
        baton_core::ProviderKind::Anthropic => "Anthropic",
    }
}

/// The sandbox lines: what isolates commands here, the policy, and where the state lives.
pub fn sandbox_report(workspace: &Path, layer: &ConfigLayer) -> String {
    let sandbox = match baton::exec::build(workspace, layer) {
        Ok((sandbox, policy, _)) => {
            let home = std::env::var_os("HOME").map(PathBuf::from);
            let details: String = sandbox
                .report(home.as_deref())
                .iter()
                .map(|line| format!("\n  {line}"))
                .collect();
            format!(
                "sandbox: {}{details}\npolicy: {} rules (built-in defaults + your files; a \
                 guard rail against mistakes — the sandbox is the boundary)",
                sandbox.summary(),
                policy.rules().len()
            )
        }
        Err(e) => format!("sandbox: NOT AVAILABLE: {e}"),
    };
    format!("{sandbox}\n{}", state_report(workspace))
}

/// Where the journal, snapshots and logs are, and whether commands can reach them.
fn state_report(workspace: &Path) -> String {
    let state = baton_state::StateDir::for_workspace(workspace);
    let root = state.root().display();
    if state.is_inside_workspace() {
        return format!(
            "state: {root} — INSIDE the workspace (no HOME, XDG_STATE_HOME or BATON_STATE_DIR): \
             commands that may write the workspace could change the journal; set BATON_STATE_DIR"
        );
    }
    let old = if state.has_old_layout() {
        format!(
            "; {} still holds state of the old layout, moved there by the next command",
            state.inputs_dir().display()
        )
    } else {
        String::new()
    };
    format!(
        "state: {root} (journal, snapshots, logs, worktrees; outside the workspace, not writable \
         by commands{old})"
    )
}

/// The code index's lines: where it is and which embedder it uses (a local
/// model is loaded, which checks its files); false when the embeddings are misconfigured.
pub async fn code_index_report(workspace: &Path, layer: &ConfigLayer) -> (bool, String) {
    let path = baton_state::StateDir::for_workspace(workspace).code_index();
    let config = layer.embeddings.clone();
    let resolved = tokio::task::spawn_blocking(move || {
        baton::embeddings::resolve(config.as_ref(), None, &|k| std::env::var(k).ok())
    })
    .await;
    let (ok, embeddings) = match resolved {
        Ok(Ok(Some(e))) => (
            true,
            format!(
                "embeddings: {} (vectors: {})",
                e.description,
                e.metered.model_id()
            ),
        ),
        Ok(Ok(None)) => (
            true,
            format!("embeddings: none — {}", baton::embeddings::NO_EMBEDDER),
        ),
        Ok(Err(e)) => (false, format!("embeddings: misconfigured: {e}")),
        Err(e) => (false, format!("embeddings: could not be checked: {e}")),
    };
    (ok, format!("code index: {}\n{embeddings}", path.display()))
}

/// The MCP servers' lines: every configured server started, with exactly what failed; `None`
/// when none is configured. Also a misconfigured table is reported here, not raised. The caller
/// redacts the text (a server's stderr may echo what it was given: [`baton::mcp::secret_values`]).
pub async fn mcp_report(workspace: &Path, layer: &ConfigLayer) -> Option<(bool, String)> {
    if !baton::mcp::configured(layer) {
        return None;
    }
    let started = match baton::exec::exec_env(workspace, layer) {
        Ok(exec) => baton::mcp::start(workspace, layer, &exec).await,
        Err(e) => return Some((false, format!("MCP servers: not started: {e}"))),
    };
    match started {
        Ok(Some(mcp)) => {
            let ok = mcp.failures().count() == 0;
            let lines = baton::mcp::describe(&mcp).join("\n");
            mcp.shutdown().await;
            Some((ok, lines))
        }
        Ok(None) => None,
        Err(e) => Some((false, format!("MCP servers: {e}"))),
    }
}
