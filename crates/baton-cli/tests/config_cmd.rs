#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 16: `baton config` shows each setting with its value and source, in the documented
//! precedence (user file < project file < environment < flag), the real config paths, and
//! what a run started now would use.

mod support;

use support::*;

#[test]
fn config_shows_values_sources_and_precedence() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let xdg = tempfile::tempdir().unwrap();
    let user = xdg.path().join("baton/config.toml");
    std::fs::create_dir_all(user.parent().unwrap()).unwrap();
    std::fs::write(
        &user,
        "model = \"user-model\"\nmax_turns = 9\nno_tool_turns = 5\n",
    )
    .unwrap();
    std::fs::create_dir_all(ws.path().join(".baton")).unwrap();
    std::fs::write(
        ws.path().join(".baton/config.toml"),
        "model = \"project-model\"\nmax_turns = 7\n",
    )
    .unwrap();
    // Project keys that shape a run need `baton trust` (recorded beside the user file).
    let trusted = baton(ws.path(), home.path())
        .env("XDG_CONFIG_HOME", xdg.path())
        .arg("trust")
        .output()
        .unwrap();
    assert!(trusted.status.success());
    let out = baton(ws.path(), home.path())
        .env("XDG_CONFIG_HOME", xdg.path())
        .env("BATON_BASE_URL", "http://127.0.0.1:1/v1")
        .env("BATON_MODEL", "env-model")
        .args(["config", "--model", "flag-model"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let row = |key: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap_or_else(|| panic!("no row {key}: {text}"))
            .to_string()
    };
    assert!(
        text.contains(&user.display().to_string()),
        "the real user file path: {text}"
    );
    let model = row("model");
    assert!(
        model.contains("\"flag-model\"")
            && model.contains("flag (over user file, project file, environment)"),
        "{model}"
    );
    let turns = row("max_turns");
    assert!(
        turns.contains("7") && turns.contains("project file (over user file)"),
        "{turns}"
    );
    assert!(row("no_tool_turns").contains("user file"), "{text}");
    assert!(row("base_url").contains("environment"), "{text}");
    // What a run would use, defaults included.
    assert!(
        text.contains("flag-model at http://127.0.0.1:1/v1"),
        "{text}"
    );
    assert!(
        text.contains("at most 7") && text.contains("window "),
        "{text}"
    );
}
