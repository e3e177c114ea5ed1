//! Trust for a workspace's own files: `.baton/config.toml` and `.baton/policy.toml` arrive with a
//! cloned repository, and (under Landlock) can be written by the agent's commands. The keys that
//! could send the API key elsewhere or weaken the sandbox, and the command policy, are honoured
//! only for a workspace whose files the user trusted as they are now: `baton trust` records
//! their SHA-256 digests in the user's config directory (`trusted.toml` beside `config.toml`).
//! A new or changed file is refused, naming its keys. Flags, the environment and the user's own
//! config file are always trusted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::Error;
use crate::config::{self, ConfigLayer};

/// The trust file, beside the user's config file.
const TRUST_FILE: &str = "trusted.toml";

/// The project config's keys that can redirect the API key (`provider`, `base_url`) or weaken
/// the sandbox (every `[sandbox]` key: mode, network, writable paths, environment, policy,
/// limits, backend).
pub fn sensitive_keys(layer: &ConfigLayer) -> Vec<String> {
    let mut keys = Vec::new();
    let mut note = |set: bool, key: &str| {
        if set {
            keys.push(key.to_string());
        }
    };
    note(layer.provider.is_some(), "provider");
    note(layer.base_url.is_some(), "base_url");
    if let Some(s) = &layer.sandbox {
        for (set, key) in [
            (s.mode.is_some(), "mode"),
            (s.allow_network.is_some(), "allow_network"),
            (s.backend.is_some(), "backend"),
            (s.env.is_some(), "env"),
            (s.writable.is_some(), "writable"),
            (s.policy.is_some(), "policy"),
            (s.ask.is_some(), "ask"),
            (
                s.dangerously_unsandboxed.is_some(),
                "dangerously_unsandboxed",
            ),
            (s.unix_sockets.is_some(), "unix_sockets"),
            (s.allow_read.is_some(), "allow_read"),
            (s.tmp_size_mb.is_some(), "tmp_size_mb"),
            (s.cpu_secs.is_some(), "cpu_secs"),
            (s.memory_mb.is_some(), "memory_mb"),
            (s.max_processes.is_some(), "max_processes"),
            (s.file_size_mb.is_some(), "file_size_mb"),
            (s.open_files.is_some(), "open_files"),
        ] {
            note(set, &format!("[sandbox] {key}"));
        }
    }
    // A project file must not send an embeddings key, or the code, somewhere of its choosing.
    if let Some(e) = &layer.embeddings {
        note(e.base_url.is_some(), "[embeddings] base_url");
        note(e.api_key_env.is_some(), "[embeddings] api_key_env");
        note(e.cache_url.is_some(), "[embeddings] cache_url");
    }
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
    digests: Trusted,
}

impl ProjectFiles {
    fn read(workspace: &Path) -> Result<ProjectFiles, Error> {
        let config = config::project_config_path(workspace);
        let policy = workspace.join(baton_state::INPUTS_DIR).join("policy.toml");
        let digests = Trusted {
            config: digest(&config)?,
            policy: digest(&policy)?,
        };
        Ok(ProjectFiles {
            config,
            policy,
            digests,
        })
    }
}

fn digest(path: &Path) -> Result<Option<String>, Error> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(format!("sha256:{:x}", Sha256::digest(bytes)))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::usage(format!("cannot read {}: {e}", path.display()))),
    }
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

/// Refuses (a usage error: exit 2 in the CLI) a project config with sensitive keys, or a project policy file, that the
/// user has not trusted as it is now.
pub fn check(workspace: &Path, project: &ConfigLayer) -> Result<(), Error> {
    let keys = sensitive_keys(project);
    let files = ProjectFiles::read(workspace)?;
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
        "{} — settings that can send your API key elsewhere or weaken the sandbox, and these \
         files are {state} (they may come with a cloned repository, or have been written by a \
         command). Review them, then run `baton --workspace {} trust`; or pass these settings \
         as flags or in your own config file ({}), which are always trusted",
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
    let project = config::read_layer(&config::project_config_path(workspace))?;
    let files = ProjectFiles::read(workspace)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SandboxLayer;

    #[test]
    fn only_keys_that_redirect_the_key_or_weaken_the_sandbox_need_trust() {
        let harmless = ConfigLayer {
            model: Some("m".into()),
            max_turns: Some(9),
            budget_usd: Some(1.0),
            ..ConfigLayer::default()
        };
        assert!(sensitive_keys(&harmless).is_empty());
        let planted = ConfigLayer {
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
            ["base_url", "[sandbox] mode", "[sandbox] allow_network"]
        );
    }
}
