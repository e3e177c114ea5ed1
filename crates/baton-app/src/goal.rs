//! Where a run's goal comes from: the argument, stdin (`baton run -`, or piped with no goal
//! given), or `--goal-file FILE`; and how a long one reaches the agent process (a file in the
//! state directory, not an argument: one argument is limited to 128 KiB).
//!
//! ```
//! let goal = baton_app::goal::resolve(Some("add a --verbose flag"), None, true, || Ok(Vec::new()))?;
//! assert_eq!(goal, "add a --verbose flag");
//! let piped = baton_app::goal::resolve(None, None, false, || Ok(b"fix the flaky test\n".to_vec()))?;
//! assert_eq!(piped, "fix the flaky test");
//! # Ok::<(), baton::Error>(())
//! ```

use std::io::Read;
use std::path::{Path, PathBuf};

use baton::{Error, Result};

/// Goals longer than this reach a supervised agent process through a file.
pub const PASS_AS_FILE_OVER: usize = 16 * 1024;

/// The goal's text, from the first source given.
pub fn resolve(
    arg: Option<&str>,
    file: Option<&Path>,
    stdin_is_terminal: bool,
    read_stdin: impl FnOnce() -> std::io::Result<Vec<u8>>,
) -> Result<String> {
    let text = match (arg, file) {
        (Some(_), Some(_)) => {
            return Err(Error::usage(
                "give the goal either as an argument or with --goal-file, not both",
            ));
        }
        (Some("-"), None) => from_stdin(read_stdin)?,
        (Some(goal), None) => goal.to_string(),
        (None, Some(path)) => {
            let bytes = std::fs::read(path).map_err(|e| {
                Error::usage(format!("cannot read the goal file {}: {e}", path.display()))
            })?;
            String::from_utf8(bytes).map_err(|_| {
                Error::usage(format!(
                    "the goal file {} is not UTF-8 text",
                    path.display()
                ))
            })?
        }
        (None, None) if !stdin_is_terminal => from_stdin(read_stdin)?,
        (None, None) => {
            return Err(Error::usage(
                "no goal: say what the agent should do — `baton run \"GOAL\"`, \
                 `baton run --goal-file FILE`, or pipe it in (`… | baton run -`)",
            ));
        }
    };
    // What `echo GOAL |` and editors add.
    let text = if arg.is_some_and(|a| a != "-") {
        text
    } else {
        text.trim_end_matches(['\n', '\r']).to_string()
    };
    if text.trim().is_empty() {
        return Err(Error::usage(
            "the goal is empty: say what the agent should do",
        ));
    }
    Ok(text)
}

fn from_stdin(read: impl FnOnce() -> std::io::Result<Vec<u8>>) -> Result<String> {
    let bytes =
        read().map_err(|e| Error::usage(format!("cannot read the goal from stdin: {e}")))?;
    String::from_utf8(bytes).map_err(|_| Error::usage("the goal read from stdin is not UTF-8 text"))
}

/// Reads all of stdin.
pub fn read_all_stdin() -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::io::stdin().lock().read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Refuses a goal that would take more than a quarter of the context window (estimated at 4
/// bytes a token): the run could not hold it with the work it asks for.
pub fn check_size(goal: &str, window_tokens: u64) -> Result<()> {
    let tokens = u64::try_from(goal.len() / 4).unwrap_or(u64::MAX);
    let share = window_tokens / 4;
    if tokens > share {
        return Err(Error::usage(format!(
            "the goal is about {tokens} tokens ({} KiB), more than a quarter of the model's \
             {window_tokens}-token context window ({share} tokens): shorten it, or put the \
             details in a file in the workspace and say in the goal where they are",
            goal.len() / 1024
        )));
    }
    Ok(())
}

/// Where a supervisor leaves a long goal for its agent processes.
pub fn write_for_children(workspace: &Path, run_id: &str, goal: &str) -> Result<PathBuf> {
    let state = baton_state::StateDir::for_workspace(workspace);
    state.prepare().map_err(Error::failed)?;
    let dir = state.root().join("goals");
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::failed(format!("cannot create {}: {e}", dir.display())))?;
    let path = dir.join(format!("{run_id}.md"));
    std::fs::write(&path, goal)
        .map_err(|e| Error::failed(format!("cannot write {}: {e}", path.display())))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdin(text: &'static str) -> impl FnOnce() -> std::io::Result<Vec<u8>> {
        move || Ok(text.as_bytes().to_vec())
    }

    #[test]
    fn each_source_and_its_errors() {
        assert_eq!(
            resolve(Some("fix it"), None, true, stdin("x")).unwrap(),
            "fix it"
        );
        assert_eq!(
            resolve(Some("-"), None, true, stdin("from stdin\n")).unwrap(),
            "from stdin"
        );
        assert_eq!(resolve(None, None, false, stdin("piped")).unwrap(), "piped");
        let none = resolve(None, None, true, stdin("")).unwrap_err();
        assert!(none.to_string().contains("--goal-file"), "{none}");
        let empty = resolve(None, None, false, stdin("  \n")).unwrap_err();
        assert!(empty.to_string().contains("empty"));
        let bad = resolve(Some("-"), None, true, || Ok(vec![0xff, 0xfe])).unwrap_err();
        assert!(bad.to_string().contains("UTF-8"));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("goal.md");
        std::fs::write(&file, "from a file").unwrap();
        assert_eq!(
            resolve(None, Some(&file), true, stdin("")).unwrap(),
            "from a file"
        );
        let missing = resolve(None, Some(&dir.path().join("nope")), true, stdin("")).unwrap_err();
        assert!(missing.to_string().contains("nope"));
        assert!(missing.is_usage(), "{missing:?}");
    }

    #[test]
    fn a_goal_over_a_quarter_of_the_window_is_refused() {
        assert!(check_size(&"x".repeat(4 * 1000), 4000).is_ok());
        let err = check_size(&"x".repeat(4 * 1001), 4000).unwrap_err();
        assert!(err.to_string().contains("1001 tokens"), "{err}");
    }
}
