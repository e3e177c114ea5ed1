//! Trust for a workspace's own files: `.baton/config.toml` and `.baton/policy.toml` arrive with a
//! cloned repository, and (under Landlock) can be written by the agent's commands. Every key of
//! the project config is honoured only for a workspace whose files the user trusted as they are
//! now — default-deny: a key needs no trust only when it is on [`HARMLESS_KEYS`], a short list
//! of keys that start no process, loosen no confinement, send no request elsewhere and change no
//! cost. The command policy needs trust too. `baton trust` records the files' SHA-256 digests in
//! the user's config directory (`trusted.toml` beside `config.toml`). A new or changed file is
//! refused, naming its keys. Flags, the environment and the user's own config file are always
//! trusted.
//!
//! The keys a project file sets are found by serialising its layer, so a key added to
//! `ConfigLayer` later needs trust until someone adds it to [`HARMLESS_KEYS`] on purpose.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::Error;
use crate::config::{self, ConfigLayer};

/// The trust file, beside the user's config file.
const TRUST_FILE: &str = "trusted.toml";

/// The project config's keys honoured without `baton trust` (named as [`sensitive_keys`] names
/// them). Each is here because it can do none of: start a process (MCP servers, checks),
/// loosen the sandbox, change where requests or the API key go (provider, base URL, wire,
/// embeddings), or change what a run may spend (model, prices, budgets, turns, timeouts,
/// retries, rate limits, context and reasoning sizes, snapshots off):
/// - `response_mode`: the same request, streamed or answered whole;
/// - `on_text_reply`: what a reply without a tool call means — end the run, pause it, or nudge
///   the model again, which `no_tool_turns` (trusted) and the run's budgets still bound;
/// - `tool_choice`: whether the model must call a tool; every turn stays bounded by the trusted
///   limits.
///
/// Everything else, including a key added later, is sensitive until it is added here.
pub const HARMLESS_KEYS: &[&str] = &["response_mode", "on_text_reply", "tool_choice"];

/// The keys `layer` sets that need `baton trust` in a project file: every set key but
/// [`HARMLESS_KEYS`], named `key` or `table.key` (`sandbox.mode`, `mcp_servers.NAME`,
/// `prices.MODEL`; an empty table by its own name), sorted.
pub fn sensitive_keys(layer: &ConfigLayer) -> Vec<String> {
    match serde_json::to_value(layer) {
        Ok(value) => set_keys(&value)
            .into_iter()
            .filter(|key| !HARMLESS_KEYS.contains(&key.as_str()))
            .collect(),
        // Cannot happen for a layer read from TOML; if it did, nothing would be known to be
        // harmless.
        Err(e) => vec![format!("(a layer that cannot be listed: {e})")],
    }
}

/// Every key a serialised layer sets, two levels deep: a table's keys as `table.key` (an MCP
/// server, a model's prices, a sandbox setting), a table that sets none as `table` itself (an
/// empty table can still replace another layer's).
fn set_keys(layer: &Value) -> Vec<String> {
    let mut keys = Vec::new();
    let Value::Object(top) = layer else {
        return keys;
    };
    for (key, value) in top {
        match value {
            Value::Null => {}
            Value::Object(table) => {
                let before = keys.len();
                keys.extend(
                    table
                        .iter()
                        .filter(|(_, v)| !v.is_null())
                        .map(|(sub, _)| format!("{key}.{sub}")),
                );
                if keys.len() == before {
                    keys.push(key.clone());
                }
            }
            _ => keys.push(key.clone()),
        }
    }
    keys.sort();
    keys
}

/// What `baton trust` records for one workspace: the digests of its two files (`None`: absent).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Trusted {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    config: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    policy: Option<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TrustFile {
    /// Keyed by the workspace's canonical path.
    #[serde(default)]
    workspaces: BTreeMap<String, Trusted>,
}

/// The workspace's two files as they are now.
struct ProjectFiles {
    config: PathBuf,
    policy: PathBuf,
    /// The config file's bytes, as digested: what is checked is what is parsed (a file swapped
    /// between two reads cannot pass the check with one content and be used with another).
    config_bytes: Option<Vec<u8>>,
    digests: Trusted,
}

impl ProjectFiles {
    fn read(workspace: &Path) -> Result<ProjectFiles, Error> {
        let config = config::project_config_path(workspace);
        let policy = workspace.join(baton_state::INPUTS_DIR).join("policy.toml");
        let config_bytes = read_if_there(&config)?;
        let digests = Trusted {
            config: config_bytes.as_deref().map(digest),
            policy: read_if_there(&policy)?.as_deref().map(digest),
        };
        Ok(ProjectFiles {
            config,
            policy,
            config_bytes,
            digests,
        })
    }

    /// The config file as a layer (empty when there is none).
    fn layer(&self) -> Result<ConfigLayer, Error> {
        let Some(bytes) = &self.config_bytes else {
            return Ok(ConfigLayer::default());
        };
        let text = std::str::from_utf8(bytes).map_err(|e| {
            Error::usage(format!(
                "cannot read config file {}: {e}",
                self.config.display()
            ))
        })?;
        config::parse_layer(&self.config, text)
    }
}

fn read_if_there(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::usage(format!("cannot read {}: {e}", path.display()))),
    }
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(bytes))
}

fn trust_file_path() -> Option<PathBuf> {
    config::user_config_path(|k| std::env::var(k).ok()).map(|p| p.with_file_name(TRUST_FILE))
}

fn key(workspace: &Path) -> String {
    workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf())
        .display()
        .to_string()
}

fn load(path: &Path) -> Result<TrustFile, Error> {
    match std::fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text)
            .map_err(|e| Error::usage(format!("invalid trust file {}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TrustFile::default()),
        Err(e) => Err(Error::usage(format!("cannot read {}: {e}", path.display()))),
    }
}

/// Refuses (a usage error: exit 2 in the CLI) a project config with sensitive keys, or a project
/// policy file, that the user has not trusted as it is now (`baton config` shows its verdict).
/// Every command that reads the project config for a run, a check or an MCP server goes through
/// [`project_layer`] instead (in `settings::file_and_env_layers`) before it starts anything.
pub fn check(workspace: &Path, project: &ConfigLayer) -> Result<(), Error> {
    check_files(workspace, &ProjectFiles::read(workspace)?, project)
}

/// The project config of `workspace`, read once and honoured only as [`check`] allows: the
/// layer returned is the one whose digest was checked.
pub fn project_layer(workspace: &Path) -> Result<ConfigLayer, Error> {
    let files = ProjectFiles::read(workspace)?;
    let layer = files.layer()?;
    check_files(workspace, &files, &layer)?;
    Ok(layer)
}

fn check_files(workspace: &Path, files: &ProjectFiles, project: &ConfigLayer) -> Result<(), Error> {
    let keys = sensitive_keys(project);
    let has_policy = files.digests.policy.is_some();
    if keys.is_empty() && !has_policy {
        return Ok(());
    }
    let trusted = match trust_file_path() {
        Some(path) => load(&path)?.workspaces.remove(&key(workspace)),
        None => None,
    };
    let mut wanted = files.digests.clone();
    if keys.is_empty() {
        // Only the policy matters: a config without sensitive keys may change freely.
        wanted.config = trusted.as_ref().and_then(|t| t.config.clone());
    }
    if trusted.as_ref() == Some(&wanted) {
        return Ok(());
    }
    let mut what = Vec::new();
    if !keys.is_empty() {
        what.push(format!(
            "{} sets {}",
            files.config.display(),
            keys.join(", ")
        ));
    }
    if has_policy {
        what.push(format!(
            "{} changes which commands may run",
            files.policy.display()
        ));
    }
    let state = if trusted.is_some() {
        "changed since you ran `baton trust`"
    } else {
        "not trusted yet"
    };
    Err(Error::usage(format!(
        "{} — settings that can start processes (MCP servers), weaken the sandbox, send requests \
         and your API key elsewhere or change what a run may cost, and these files are {state} \
         (they may come with a cloned repository, or have been written by a command). Review \
         them, then run `baton --workspace {} trust`; or pass these settings as flags or in your \
         own config file ({}), which are always trusted",
        what.join("; "),
        workspace.display(),
        config::user_config_path(|k| std::env::var(k).ok()).map_or_else(
            || "~/.config/baton/config.toml".into(),
            |p| p.display().to_string()
        )
    )))
}

/// `baton trust`: records the workspace's files as they are now; returns what was trusted, in
/// words.
pub fn trust(workspace: &Path) -> Result<String, Error> {
    // What is described is what is recorded: one read of the file.
    let files = ProjectFiles::read(workspace)?;
    let project = files.layer()?;
    let path = trust_file_path().ok_or_else(|| {
        Error::usage(
            "no user config directory (set HOME or XDG_CONFIG_HOME): nowhere to record trust",
        )
    })?;
    let mut file = load(&path)?;
    file.workspaces
        .insert(key(workspace), files.digests.clone());
    write_private(&path, &toml::to_string(&file).map_err(Error::failed)?)?;
    let keys = sensitive_keys(&project);
    let config = match &files.digests.config {
        None => "no .baton/config.toml".to_string(),
        Some(_) if keys.is_empty() => format!("{} (no sensitive keys)", files.config.display()),
        Some(_) => format!("{} (sets {})", files.config.display(), keys.join(", ")),
    };
    let policy = match &files.digests.policy {
        None => "no .baton/policy.toml".to_string(),
        Some(_) => files.policy.display().to_string(),
    };
    Ok(format!(
        "trusted {config} and {policy} as they are now; recorded in {}",
        path.display()
    ))
}

/// Written to a new file (0600) and renamed over the old one.
fn write_private(path: &Path, text: &str) -> Result<(), Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::failed(format!("cannot create {}: {e}", dir.display())))?;
    let tmp = dir.join(format!(".{TRUST_FILE}.{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(b"# Workspaces whose .baton/ files you trusted with `baton trust`.\n")?;
            f.write_all(text.as_bytes())?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::failed(format!(
            "cannot write {}: {e}",
            path.display()
        )));
    }
    Ok(())
}

/// Whether the user ran `baton trust` for `workspace` and its `.baton/` files are as they were
/// then (both absent counts, if trusted so). `baton mcp-server --port` acts only in such
/// workspaces: a caller must not make the serving user run in a directory someone else prepared.
pub fn is_trusted(workspace: &Path) -> Result<bool, Error> {
    let Some(path) = trust_file_path() else {
        return Ok(false);
    };
    let files = ProjectFiles::read(workspace)?;
    Ok(load(&path)?.workspaces.get(&key(workspace)) == Some(&files.digests))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SandboxLayer;

    #[test]
    fn every_key_but_the_declared_harmless_ones_needs_trust() {
        let harmless: ConfigLayer = toml::from_str(
            "response_mode = \"whole\"\non_text_reply = \"pause\"\ntool_choice = \"required\"\n",
        )
        .unwrap();
        assert!(sensitive_keys(&harmless).is_empty());
        let planted = ConfigLayer {
            model: Some("m".into()),
            max_turns: Some(9),
            budget_usd: Some(1.0),
            base_url: Some("http://evil".into()),
            sandbox: Some(SandboxLayer {
                mode: Some("full-access".into()),
                allow_network: Some(true),
                ..SandboxLayer::default()
            }),
            ..harmless
        };
        assert_eq!(
            sensitive_keys(&planted),
            [
                "base_url",
                "budget_usd",
                "max_turns",
                "model",
                "sandbox.allow_network",
                "sandbox.mode"
            ]
        );
        let text = "[mcp_servers.evil]\ncommand = \"sh\"\nsandbox = \"full-access\"\n\
                    [snapshots]\nenabled = false\n[prices.\"m\"]\ninput_per_mtok = 0.0\n\
                    output_per_mtok = 0.0\n[sandbox]\n";
        let planted: ConfigLayer = toml::from_str(text).unwrap();
        assert_eq!(
            sensitive_keys(&planted),
            [
                "mcp_servers.evil",
                "prices.m",
                "sandbox",
                "snapshots.enabled"
            ]
        );
    }

    /// A key nobody has classified — one added to `ConfigLayer` after this was written — is
    /// sensitive: the listing never names fields.
    #[test]
    fn a_key_nobody_declared_harmless_is_sensitive() {
        let layer = serde_json::json!({
            "response_mode": "whole",
            "a_key_added_later": 1,
            "a_table_added_later": {"x": true, "unset": null},
            "unset": null,
        });
        let keys: Vec<String> = set_keys(&layer)
            .into_iter()
            .filter(|k| !HARMLESS_KEYS.contains(&k.as_str()))
            .collect();
        assert_eq!(keys, ["a_key_added_later", "a_table_added_later.x"]);
    }

    /// Every field of `ConfigLayer` as serde knows it (from its unknown-field error), each set
    /// in a project file on its own, is reported — unless declared harmless. A new field is
    /// thereby checked too: it is reported, or (a value type none of these candidates fits)
    /// this test fails and asks for a candidate.
    #[test]
    fn each_field_of_the_layer_set_alone_is_reported_unless_harmless() {
        let error = toml::from_str::<ConfigLayer>("zz_unknown = 1\n")
            .unwrap_err()
            .to_string();
        let fields: Vec<&str> = error
            .split("expected one of ")
            .nth(1)
            .unwrap()
            .split('`')
            .skip(1)
            .step_by(2)
            .collect();
        assert!(fields.len() > 40, "{fields:?}");
        for key in HARMLESS_KEYS {
            assert!(fields.contains(key), "{key} is not a key");
        }
        let candidates = [
            "true",
            "1",
            "1.5",
            "\"whole\"",
            "\"pause\"",
            "\"adaptive\"",
            "\"low\"",
            "\"responses\"",
            "\"drop\"",
            "\"auto\"",
            "\"1h\"",
            "[\"x\"]",
        ];
        for field in fields {
            let layer = candidates
                .iter()
                .map(|value| format!("{field} = {value}\n"))
                .chain([format!("[{field}]\n")])
                .find_map(|text| toml::from_str::<ConfigLayer>(&text).ok())
                .unwrap_or_else(|| panic!("no candidate value parses for `{field}`: add one"));
            assert_ne!(layer, ConfigLayer::default(), "{field}");
            let keys = sensitive_keys(&layer);
            if HARMLESS_KEYS.contains(&field) {
                assert!(keys.is_empty(), "{field}: {keys:?}");
            } else {
                // One key, under its own name (an alias, `effort`, under the field's).
                assert_eq!(keys.len(), 1, "{field}: {keys:?}");
            }
        }
    }
}
