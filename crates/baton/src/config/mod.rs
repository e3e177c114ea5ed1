//! Layered configuration: user file < project file < environment < flags (each layer overrides
//! the ones before it, key by key). Merging is pure; reading files and the environment is done
//! at the edges so the precedence rules are unit-tested without touching either.

use std::path::{Path, PathBuf};

use baton_core::{Compaction, ContextSettings, Masking};
use serde::{Deserialize, Serialize};

use crate::Error;
use crate::layered::{Layered, layered};

pub mod flags;
mod layer;
mod sources;
pub use layer::ConfigLayer;
pub use sources::{Source, set_keys};

/// The `[snapshots]` table.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotsConfig {
    /// `false`: no workspace snapshots (`--no-snapshots`).
    pub enabled: Option<bool>,
}

/// A later `[snapshots]` table replaces an earlier one (it has one key).
impl Layered for SnapshotsConfig {}

impl Layered for CompactionBy {}

/// The declaration of [`ContextConfig`], handed to the macro `$then` like
/// [`config_layer_fields!`](crate::config_layer_fields): the library makes the table with
/// `layered!`, the CLI the clap twin that `ConfigLayer`'s twin flattens (`--context-window`).
#[macro_export]
macro_rules! context_config_fields {
    ($then:path) => {
        $then! {
        /// The `[context]` table: every key overrides the model profile's value. Only `window` is a
        /// flag (`--context-window`); the rest are file keys.
        #[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
        #[serde(deny_unknown_fields)]
        pub struct ContextConfig {
            /// The model's context window in tokens (default: from the model's profile).
            #[arg(
                long = "context-window",
                value_name = "N",
                value_parser = $crate::config::flags::whole::<u64>,
            )]
            pub window: Option<u64>,
            /// Compact when the prompt passes this percentage of the window.
            #[arg(skip)]
            pub compact_at_percent: Option<u8>,
            /// `false` turns observation masking off.
            #[arg(skip)]
            pub masking: Option<bool>,
            /// Turns whose tool outputs stay unmasked.
            #[arg(skip)]
            pub mask_keep_turns: Option<u32>,
            /// Turns masked together (keeps the prompt prefix stable between batches).
            #[arg(skip)]
            pub mask_batch_turns: Option<u32>,
            /// Tool outputs shorter than this many bytes are never masked.
            #[arg(skip)]
            pub mask_min_bytes: Option<u32>,
            /// `false` turns compaction off (a run that outgrows the window then pauses).
            #[arg(skip)]
            pub summary: Option<bool>,
            /// Turns a compaction keeps verbatim after its summary.
            #[arg(skip)]
            pub keep_recent_turns: Option<u32>,
            /// Who compacts: `baton` (its handoff summary), `provider` (the Responses API's
            /// server-side compaction) or `off`.
            #[arg(skip)]
            pub compaction: Option<$crate::config::CompactionBy>,
        }
                }
    };
}

crate::context_config_fields!(layered);

/// `[context] compaction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionBy {
    /// baton's own handoff summary.
    Baton,
    /// The provider's server-side compaction (Responses, Anthropic).
    Provider,
    /// No compaction: a run that outgrows the window pauses.
    Off,
}

impl ContextConfig {
    /// Applies these overrides to a profile's settings. Errors name the offending key.
    pub fn apply(&self, mut context: ContextSettings) -> Result<ContextSettings, Error> {
        if let Some(window) = self.window {
            if window < 1_024 {
                return Err(Error::usage(format!(
                    "context window {window} is too small: baton needs at least 1024 tokens"
                )));
            }
            context.window_tokens = window;
        }
        if let Some(percent) = self.compact_at_percent {
            if !(10..=100).contains(&percent) {
                return Err(Error::usage(format!(
                    "[context] compact_at_percent = {percent}: use 10 to 100"
                )));
            }
            context.compact_at_percent = percent;
        }
        let (mut keep, mut batch, mut min) = match context.masking {
            Masking::OlderThan {
                keep_turns,
                batch_turns,
                min_bytes,
            } => (keep_turns, batch_turns, min_bytes),
            // Turned on by configuration over a profile without masking: the default
            // profile's values.
            Masking::Off => (4, 12, 400),
        };
        keep = self.mask_keep_turns.unwrap_or(keep);
        batch = self.mask_batch_turns.unwrap_or(batch).max(1);
        min = self.mask_min_bytes.unwrap_or(min);
        let masking_on = self
            .masking
            .unwrap_or(!matches!(context.masking, Masking::Off));
        context.masking = if masking_on {
            Masking::OlderThan {
                keep_turns: keep,
                batch_turns: batch,
                min_bytes: min,
            }
        } else {
            Masking::Off
        };
        let keep_recent = match context.compaction {
            Compaction::Summarize { keep_recent_turns } => keep_recent_turns,
            Compaction::Off | Compaction::Provider => 2,
        };
        let summarize = Compaction::Summarize {
            keep_recent_turns: self.keep_recent_turns.unwrap_or(keep_recent),
        };
        context.compaction = match (self.compaction, self.summary) {
            (Some(CompactionBy::Provider), _) => Compaction::Provider,
            (Some(CompactionBy::Off), _) | (None, Some(false)) => Compaction::Off,
            (Some(CompactionBy::Baton), _) | (None, Some(true)) => summarize,
            (None, None) if context.compaction == Compaction::Off => Compaction::Off,
            (None, None) if context.compaction == Compaction::Provider => Compaction::Provider,
            (None, None) => summarize,
        };
        Ok(context)
    }
}

layered! {
/// The `[sandbox]` table; merged key by key like the rest.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxLayer {
    /// `read-only`, `workspace-write` (default) or `full-access`.
    pub mode: Option<String>,
    /// `true`: commands may reach the network.
    pub allow_network: Option<bool>,
    /// `auto` (default), `bwrap` or `landlock`.
    pub backend: Option<String>,
    /// Extra environment variables passed to commands (`NAME` or `PREFIX_*`).
    pub env: Option<Vec<String>>,
    /// Extra directories writable in `workspace-write` mode.
    pub writable: Option<Vec<PathBuf>>,
    /// UNIX sockets commands may connect to (default: none; no AF_UNIX socket can be made).
    pub unix_sockets: Option<Vec<PathBuf>>,
    /// Paths commands may not read, besides the built-in credential list (`~/` = home).
    pub deny_read: Option<Vec<PathBuf>>,
    /// Paths commands may read although hidden (`~/` = home): in the home directory, which is
    /// hidden but for its toolchains, or taken out of the built-in lists.
    pub allow_read: Option<Vec<PathBuf>>,
    /// A policy file used instead of `.baton/policy.toml` (on top of the user's).
    pub policy: Option<PathBuf>,
    /// What an `ask` rule does in an unattended run: `refuse`.
    pub ask: Option<String>,
    /// Run commands unconfined where the platform cannot sandbox them.
    pub dangerously_unsandboxed: Option<bool>,
    /// `0` removes a limit.
    pub cpu_secs: Option<u64>,
    /// Memory limit per command, in MiB (0: none).
    pub memory_mb: Option<u64>,
    /// Process limit per command (0: none).
    pub max_processes: Option<u64>,
    /// Largest file a command may write, in MiB (0: none).
    pub file_size_mb: Option<u64>,
    /// Open files per command (0: none).
    pub open_files: Option<u64>,
    /// Size of the private /tmp in MB (bubblewrap); `0` removes the bound.
    pub tmp_size_mb: Option<u64>,
}
}

/// Parses a duration such as `90`, `90s`, `45m`, `2h` or `1h30m` into seconds.
pub fn parse_duration_secs(text: &str) -> Result<u64, Error> {
    let text = text.trim();
    let bad = || {
        Error::usage(format!(
            "`{text}` is not a duration: use e.g. 90s, 45m, 2h or 1h30m"
        ))
    };
    if let Ok(secs) = text.parse::<u64>() {
        return Ok(secs);
    }
    let mut total: u64 = 0;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return Err(bad()),
        };
        let n: u64 = number.parse().map_err(|_| bad())?;
        total = total.saturating_add(n.saturating_mul(unit));
        number.clear();
    }
    if !number.is_empty() || total == 0 {
        return Err(bad());
    }
    Ok(total)
}

/// Reads a config file; a missing file is an empty layer, a malformed one an error naming it.
pub fn read_layer(path: &Path) -> Result<ConfigLayer, Error> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ConfigLayer::default()),
        Err(e) => {
            return Err(Error::usage(format!(
                "cannot read config file {}: {e}",
                path.display()
            )));
        }
    };
    parse_layer(path, &text)
}

/// A config file's text (read from `path`, named in errors) as a layer.
pub fn parse_layer(path: &Path, text: &str) -> Result<ConfigLayer, Error> {
    toml::from_str(text).map_err(|e| {
        let hint = did_you_mean(&e.to_string())
            .map(|known| format!(" (did you mean `{known}`?)"))
            .unwrap_or_default();
        Error::usage(format!(
            "invalid config file {}{hint}: {}",
            path.display(),
            in_words(&e.to_string())
        ))
    })
}

/// serde names the Rust type it wanted ("expected u32"); a person wants the TOML form.
fn in_words(error: &str) -> String {
    let mut out = error.to_string();
    for (rust, words) in [
        ("expected u8", "expected a whole number (no quotes)"),
        ("expected u32", "expected a whole number (no quotes)"),
        ("expected u64", "expected a whole number (no quotes)"),
        ("expected usize", "expected a whole number (no quotes)"),
        ("expected f64", "expected a number (no quotes)"),
        ("expected f32", "expected a number (no quotes)"),
    ] {
        out = out.replace(rust, words);
    }
    out
}

/// For serde's "unknown field `modle`, expected one of `model`, …": the closest expected name.
fn did_you_mean(error: &str) -> Option<String> {
    let unknown = error.split("unknown field `").nth(1)?.split('`').next()?;
    let expected = error
        .split("expected one of ")
        .nth(1)
        .or_else(|| error.split("expected ").nth(1))?;
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|known| (edit_distance(unknown, known), known))
        .filter(|(distance, known)| *distance <= 2.max(known.len() / 4))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, known)| known.to_string())
}

/// Levenshtein distance (config keys are short).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

/// `$XDG_CONFIG_HOME/baton/config.toml`, else `~/.config/baton/config.toml`.
pub fn user_config_path(get: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(dir) = get("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir).join("baton/config.toml"));
    }
    get("HOME")
        .filter(|d| !d.is_empty())
        .map(|home| PathBuf::from(home).join(".config/baton/config.toml"))
}

/// `WORKSPACE/.baton/config.toml`: the project's config file.
pub fn project_config_path(workspace: &Path) -> PathBuf {
    workspace.join(".baton/config.toml")
}

/// The API key: the first non-empty of `vars` (see `providers::key_variables`). Never stored.
pub fn api_key(vars: &[&str], get: impl Fn(&str) -> Option<String>) -> Option<String> {
    vars.iter()
        .filter_map(|v| get(v))
        .find(|k| !k.trim().is_empty())
}

/// Names of variables that hold secrets: kept out of commands' environments.
pub const SECRET_ENV_VARS: &[&str] = &["BATON_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"];

/// What to say when the endpoint or the model name is missing, naming what is missing and the
/// real config paths.
pub fn no_model_help(has_base_url: bool, has_model: bool, user_file: Option<&Path>) -> String {
    let missing = match (has_base_url, has_model) {
        (false, false) => {
            "no model configured: baton needs an OpenAI-compatible endpoint and a model name"
        }
        (false, true) => {
            "no base URL configured: baton knows the model but not where to send requests"
        }
        _ => "no model name configured: baton knows the endpoint but not which model to ask for",
    };
    let user = user_file.map_or_else(
        || "~/.config/baton/config.toml".to_string(),
        |p| p.display().to_string(),
    );
    format!(
        "{missing}.
Set them in any of these (later ones win):
  user file      {user}
                 base_url = \"http://127.0.0.1:8080/v1\"
                 model = \"NAME\"
  project file   .baton/config.toml (same keys; honoured after `baton trust`)
  environment    BATON_BASE_URL=http://127.0.0.1:8080/v1 BATON_MODEL=NAME
  flags          baton run --base-url http://127.0.0.1:8080/v1 --model NAME \"GOAL\"
Or pick a preset: --provider openai|anthropic|deepseek|qwen|moonshot|glm|openrouter|ollama|vllm|llamacpp
(or provider = \"…\" / BATON_PROVIDER) and give only the model.
The API key, if the server needs one, is read from BATON_API_KEY, the preset's variable
(e.g. ANTHROPIC_API_KEY) or OPENAI_API_KEY, and is never written to disk."
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::ResponseMode;

    fn layer(base: Option<&str>, model: Option<&str>, turns: Option<u32>) -> ConfigLayer {
        ConfigLayer {
            base_url: base.map(String::from),
            model: model.map(String::from),
            max_turns: turns,
            ..ConfigLayer::default()
        }
    }

    #[test]
    fn an_unknown_key_gets_the_closest_known_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        for (text, hint) in [
            ("modle = \"m\"\n", Some("model")),
            ("max_turn = 3\n", Some("max_turns")),
            ("[sandbox]\nalow_network = true\n", Some("allow_network")),
            ("completely_else = 1\n", None),
        ] {
            std::fs::write(&path, text).unwrap();
            let err = format!("{:#}", read_layer(&path).unwrap_err());
            assert!(err.contains(&path.display().to_string()), "{err}");
            match hint {
                Some(known) => assert!(err.contains(&format!("did you mean `{known}`?")), "{err}"),
                None => assert!(!err.contains("did you mean"), "{err}"),
            }
        }
        // A value error names the file, the key and the expected form.
        std::fs::write(&path, "max_turns = \"many\"\n").unwrap();
        let err = format!("{:#}", read_layer(&path).unwrap_err());
        assert!(
            err.contains("max_turns") && err.contains("expected a whole number"),
            "{err}"
        );
        assert!(!err.contains("u32"), "{err}");
    }

    #[test]
    fn later_layers_win_key_by_key() {
        let user = layer(Some("u"), Some("um"), Some(1));
        let project = layer(Some("p"), None, None);
        let env = layer(None, Some("em"), None);
        let flags = layer(None, None, Some(9));
        let merged = user.overlay(project).overlay(env).overlay(flags);
        assert_eq!(merged, layer(Some("p"), Some("em"), Some(9)));
    }

    #[test]
    fn env_layer_reads_only_baton_variables_and_ignores_empty_values() {
        let env = |k: &str| match k {
            "BATON_BASE_URL" => Some("http://x/v1".to_string()),
            "BATON_MODEL" => Some("  ".to_string()),
            _ => None,
        };
        assert_eq!(
            ConfigLayer::from_env(env),
            layer(Some("http://x/v1"), None, None)
        );
    }

    #[test]
    fn api_key_prefers_baton_variable() {
        let both = |k: &str| match k {
            "BATON_API_KEY" => Some("b".to_string()),
            "OPENAI_API_KEY" => Some("o".to_string()),
            _ => None,
        };
        assert_eq!(
            api_key(&["BATON_API_KEY", "OPENAI_API_KEY"], both).as_deref(),
            Some("b")
        );
        let openai_only = |k: &str| (k == "OPENAI_API_KEY").then(|| "o".to_string());
        assert_eq!(
            api_key(&["BATON_API_KEY", "OPENAI_API_KEY"], openai_only).as_deref(),
            Some("o")
        );
        assert_eq!(api_key(&["BATON_API_KEY"], |_| None), None);
    }

    #[test]
    fn malformed_and_unknown_keys_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "model = \n").unwrap();
        let err = format!("{:#}", read_layer(&path).unwrap_err());
        assert!(err.contains(&path.display().to_string()), "{err}");
        std::fs::write(&path, "modle = \"x\"\n").unwrap();
        let err = format!("{:#}", read_layer(&path).unwrap_err());
        assert!(err.contains("unknown field"), "{err}");
        assert_eq!(
            read_layer(&dir.path().join("missing.toml")).unwrap(),
            ConfigLayer::default()
        );
        std::fs::write(&path, "response_mode = \"whole\"\nmax_turns = 5\n").unwrap();
        let ok = read_layer(&path).unwrap();
        assert_eq!(ok.response_mode, Some(ResponseMode::Whole));
        assert_eq!(ok.max_turns, Some(5));
    }

    #[test]
    fn sandbox_tables_merge_key_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user.toml");
        let project = dir.path().join("project.toml");
        std::fs::write(
            &user,
            "[sandbox]\nmode = \"read-only\"\nmax_processes = 100\n",
        )
        .unwrap();
        std::fs::write(
            &project,
            "[sandbox]\nallow_network = true\nmax_processes = 0\n",
        )
        .unwrap();
        let env =
            ConfigLayer::from_env(|k| (k == "BATON_SANDBOX_BACKEND").then(|| "landlock".into()));
        let merged = read_layer(&user)
            .unwrap()
            .overlay(read_layer(&project).unwrap())
            .overlay(env);
        assert_eq!(
            merged.sandbox,
            Some(SandboxLayer {
                mode: Some("read-only".into()),
                allow_network: Some(true),
                backend: Some("landlock".into()),
                max_processes: Some(0),
                ..SandboxLayer::default()
            })
        );
        std::fs::write(&user, "[sandbox]\nmod = \"x\"\n").unwrap();
        let err = format!("{:#}", read_layer(&user).unwrap_err());
        assert!(err.contains("unknown field `mod`"), "{err}");
    }

    #[test]
    fn user_config_follows_xdg_then_home() {
        let xdg = |k: &str| match k {
            "XDG_CONFIG_HOME" => Some("/x".to_string()),
            "HOME" => Some("/h".to_string()),
            _ => None,
        };
        assert_eq!(
            user_config_path(xdg),
            Some(PathBuf::from("/x/baton/config.toml"))
        );
        let home = |k: &str| (k == "HOME").then(|| "/h".to_string());
        assert_eq!(
            user_config_path(home),
            Some(PathBuf::from("/h/.config/baton/config.toml"))
        );
    }
}

#[cfg(test)]
mod context_tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration_secs("90").unwrap(), 90);
        assert_eq!(parse_duration_secs("90s").unwrap(), 90);
        assert_eq!(parse_duration_secs("45m").unwrap(), 2700);
        assert_eq!(parse_duration_secs("1h30m").unwrap(), 5400);
        for bad in ["", "h", "10x", "1.5h", "m30", "0s"] {
            assert!(parse_duration_secs(bad).is_err(), "{bad}");
        }
    }

    fn parse(text: &str) -> ContextConfig {
        let layer: ConfigLayer = toml::from_str(text).unwrap();
        layer.context.unwrap_or_default()
    }

    #[test]
    fn context_keys_override_the_profile() {
        let config = parse(
            "[context]\nwindow = 4096\ncompact_at_percent = 70\nmask_keep_turns = 1\nkeep_recent_turns = 5\n",
        );
        let applied = config.apply(ContextSettings::default()).unwrap();
        assert_eq!(applied.window_tokens, 4096);
        assert_eq!(applied.compact_at_percent, 70);
        assert_eq!(
            applied.masking,
            Masking::OlderThan {
                keep_turns: 1,
                batch_turns: 12,
                min_bytes: 400
            }
        );
        assert_eq!(
            applied.compaction,
            Compaction::Summarize {
                keep_recent_turns: 5
            }
        );
    }

    #[test]
    fn tiers_can_be_switched_off_and_on() {
        let off = parse("[context]\nmasking = false\nsummary = false\n")
            .apply(ContextSettings::default())
            .unwrap();
        assert_eq!(
            (off.masking, off.compaction),
            (Masking::Off, Compaction::Off)
        );
        let on = parse("[context]\nmasking = true\n").apply(off).unwrap();
        assert!(matches!(on.masking, Masking::OlderThan { .. }));
        assert_eq!(on.compaction, Compaction::Off);
    }

    #[test]
    fn bad_values_are_named() {
        let err = parse("[context]\nwindow = 10\n")
            .apply(ContextSettings::default())
            .unwrap_err();
        assert!(err.to_string().contains("too small"), "{err}");
        let err = parse("[context]\ncompact_at_percent = 150\n")
            .apply(ContextSettings::default())
            .unwrap_err();
        assert!(err.to_string().contains("compact_at_percent"), "{err}");
        assert!(toml::from_str::<ConfigLayer>("[context]\nwindw = 1\n").is_err());
    }

    #[test]
    fn context_tables_merge_key_by_key() {
        let user: ConfigLayer =
            toml::from_str("[context]\nwindow = 4096\nmasking = false\n").unwrap();
        let project: ConfigLayer = toml::from_str("[context]\nwindow = 9000\n").unwrap();
        let merged = user.overlay(project).context.unwrap();
        assert_eq!((merged.window, merged.masking), (Some(9000), Some(false)));
    }
}
