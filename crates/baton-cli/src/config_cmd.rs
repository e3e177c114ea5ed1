//! `baton config`: every setting a run started now would use, with where it came from (the
//! user file, the project file, the environment, a flag — later ones win, key by key), the
//! real paths of the files, and the defaults of what nothing sets.

use std::path::Path;

use crate::commands::{env_var, flags_layer_checked, resolve_settings};
use crate::config::{self, ConfigLayer, Source, set_keys};
use crate::{CliError, ModelFlags, exit};

/// `println!` that ignores a closed stdout (`baton config | head`) instead of panicking.
macro_rules! println {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
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
        Ok((settings, _)) => print!("{}", crate::output::settings_text(&settings)),
        Err(e) => println!("a run could not start now: {:#}", e.error),
    }
    Ok(exit::FINISHED)
}
