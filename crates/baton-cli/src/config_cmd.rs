//! `baton config`: every setting a run started now would use, with where it came from (the
//! user file, the project file, the environment, a flag — later ones win, key by key), the
//! real paths of the files, and the defaults of what nothing sets.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::commands::{env_var, flags_layer_checked, resolve_settings};
use crate::config::{self, ConfigLayer};
use crate::{CliError, ModelFlags, exit};

/// `println!` that ignores a closed stdout (`baton config | head`) instead of panicking.
macro_rules! println {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// Where a key's value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Source(String);

/// `key` → (value, source, the sources it overrode), for every key some layer sets.
pub(crate) fn set_keys(
    layers: &[(Source, ConfigLayer)],
) -> BTreeMap<String, (Value, Source, Vec<Source>)> {
    let mut out: BTreeMap<String, (Value, Source, Vec<Source>)> = BTreeMap::new();
    for (source, layer) in layers {
        let Ok(value) = serde_json::to_value(layer) else {
            continue;
        };
        let mut flat = Vec::new();
        flatten("", &value, &mut flat);
        for (key, value) in flat {
            match out.get_mut(&key) {
                Some(entry) => {
                    let before = std::mem::replace(&mut entry.1, source.clone());
                    entry.2.push(before);
                    entry.0 = value;
                }
                None => {
                    out.insert(key, (value, source.clone(), Vec::new()));
                }
            }
        }
    }
    out
}

/// Tables become `table.key`; `[prices."MODEL"]` stays one value per model.
fn flatten(prefix: &str, value: &Value, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Null => {}
        Value::Object(map) if prefix.is_empty() || prefix != "prices" => {
            for (key, value) in map {
                let key = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                if prefix.is_empty() && key == "prices" {
                    if let Value::Object(models) = value {
                        for (model, price) in models {
                            out.push((format!("prices.\"{model}\""), price.clone()));
                        }
                    }
                    continue;
                }
                flatten(&key, value, out);
            }
        }
        other => out.push((prefix.to_string(), other.clone())),
    }
}

pub fn config(workspace: &Path, flags: &ModelFlags) -> Result<u8, CliError> {
    let workspace = crate::commands::workspace_dir(workspace)?;
    let user_path = config::user_config_path(env_var);
    let project_path = config::project_config_path(&workspace);
    let user = match &user_path {
        Some(path) => config::read_layer(path).map_err(CliError::usage)?,
        None => ConfigLayer::default(),
    };
    let project = config::read_layer(&project_path).map_err(CliError::usage)?;
    let trust = match crate::trust::check(&workspace, &project) {
        Ok(()) => "honoured".to_string(),
        Err(e) => format!("REFUSED — {e}"),
    };
    let exists = |p: &Path| if p.exists() { "" } else { " (absent)" };
    println!("files and sources (later ones win, key by key):");
    match &user_path {
        Some(p) => println!("  user file      {}{}", p.display(), exists(p)),
        None => println!("  user file      none (no HOME or XDG_CONFIG_HOME)"),
    }
    println!(
        "  project file   {}{}: {trust}",
        project_path.display(),
        exists(&project_path)
    );
    println!("  environment    BATON_PROVIDER, BATON_BASE_URL, BATON_MODEL, BATON_SANDBOX_BACKEND");
    println!(
        "  flags          --provider, --base-url, --model, … (this command takes the run's model flags)"
    );
    println!(
        "  state          {}",
        baton_state::StateDir::for_workspace(&workspace)
            .root()
            .display()
    );
    let layers = vec![
        (Source("user file".into()), user),
        (Source("project file".into()), project),
        (Source("environment".into()), ConfigLayer::from_env(env_var)),
        (Source("flag".into()), flags_layer_checked(flags)?),
    ];
    let keys = set_keys(&layers);
    println!();
    if keys.is_empty() {
        println!("no key is set anywhere: every setting is its default");
    } else {
        println!("{:<28}  {:<36}  SOURCE", "KEY", "VALUE");
        for (key, (value, source, overrode)) in &keys {
            let overrode = if overrode.is_empty() {
                String::new()
            } else {
                let names: Vec<&str> = overrode.iter().map(|s| s.0.as_str()).collect();
                format!(" (over {})", names.join(", "))
            };
            println!(
                "{key:<28}  {:<36}  {}{overrode}",
                crate::output::one_line(&value.to_string(), 36),
                source.0
            );
        }
    }
    println!();
    match resolve_settings(&workspace, flags) {
        Ok((settings, _)) => {
            let m = &settings.model;
            println!("what a run started now uses (defaults where nothing above is set):");
            println!(
                "  model          {} at {} ({})",
                m.model,
                m.base_url,
                crate::output::word(&m.provider)
            );
            println!(
                "  responses      {}, tool choice {}",
                crate::output::word(&m.response_mode),
                crate::output::word(&m.tool_choice)
            );
            let r = &m.reasoning;
            println!(
                "  reasoning      history {}, effort {}, thinking {}{}",
                crate::output::word(&r.history),
                r.effort.as_deref().unwrap_or("(server default)"),
                r.thinking
                    .map_or("(server default)".to_string(), |t| crate::output::word(&t)),
                r.thinking_budget
                    .map_or(String::new(), |b| format!(", budget {b} tokens"))
            );
            if let Some(v) = r.verbosity {
                println!("  verbosity      {}", v.as_str());
            }
            println!("  turns          at most {}", settings.limits.max_turns);
            println!(
                "  context        window {} tokens",
                settings.context.window_tokens
            );
            println!(
                "  endings        a text reply: {}; {} replies without a tool call pause",
                crate::output::word(&settings.endings.on_text_reply),
                settings.loop_detection.no_tool_turns
            );
            println!(
                "  shell          timeout {} s",
                settings.limits.shell_timeout_secs
            );
        }
        Err(e) => println!("a run could not start now: {:#}", e.error),
    }
    Ok(exit::FINISHED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_names_the_last_layer_that_set_it_and_those_it_overrode() {
        let layer = |text: &str| -> ConfigLayer { toml::from_str(text).unwrap() };
        let keys = set_keys(&[
            (
                Source("user file".into()),
                layer("model = \"a\"\nmax_turns = 5\n[sandbox]\nmode = \"read-only\"\n"),
            ),
            (
                Source("project file".into()),
                layer(
                    "model = \"b\"\n[prices.\"b\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n",
                ),
            ),
            (Source("environment".into()), ConfigLayer::default()),
            (Source("flag".into()), layer("model = \"c\"\n")),
        ]);
        let (value, source, overrode) = &keys["model"];
        assert_eq!((value, source.0.as_str()), (&Value::from("c"), "flag"));
        assert_eq!(
            overrode,
            &[Source("user file".into()), Source("project file".into())]
        );
        assert_eq!(keys["max_turns"].1.0, "user file");
        assert_eq!(keys["sandbox.mode"].0, Value::from("read-only"));
        assert!(keys.contains_key("prices.\"b\""), "{keys:?}");
        assert_eq!(keys.len(), 4);
    }
}
