//! `grep`: regex search over workspace files with ripgrep's engine.

use crate::args::run_blocking;
use crate::list::{PathGlob, walk};
use crate::output::{group_thousands, truncate_at_char};
use crate::path::{Access, Workspace};
use crate::{ToolContext, TypedTool};
use async_trait::async_trait;
use baton_core::{ToolEffect, ToolResult};
use grep::regex::{RegexMatcher, RegexMatcherBuilder};
use grep::searcher::{BinaryDetection, Searcher, SearcherBuilder, sinks::Lossy};
use schemars::JsonSchema;
use serde::Deserialize;
use std::ops::ControlFlow;
use std::path::Path;

pub const GREP: &str = "grep";

const DEFAULT_MATCHES: usize = 100;
const MAX_MATCHES: usize = 1000;
/// Longest matching line shown; minified files put a whole program on one line.
const LINE_CAP: usize = 400;
/// Matches counted (not kept) past the cap, bounding the time spent on a huge result.
const COUNT_LIMIT: u64 = 100_000;

#[derive(Deserialize, JsonSchema)]
/// The arguments the model sends.
pub struct GrepArgs {
    /// Regular expression to search for (ripgrep / Rust regex syntax). Escape special characters
    /// such as ( [ . * + ? to match them literally. Matching is line by line.
    pattern: String,
    /// File or directory to search, relative to the workspace root. Defaults to the whole
    /// workspace.
    path: Option<String>,
    /// Only search files matching this glob, e.g. "*.rs" or "src/**/*.ts". A glob without '/'
    /// matches file names at any depth; one with '/' is matched against the path relative to
    /// `path`.
    glob: Option<String>,
    /// Ignore letter case. Defaults to false.
    case_insensitive: Option<bool>,
    /// Maximum number of matching lines to show. Defaults to 100, at most 1000.
    #[schemars(range(min = 1))]
    max_matches: Option<usize>,
}

/// Searches file contents, honouring .gitignore and .ignore files.
pub struct Grep;

#[async_trait]
impl TypedTool for Grep {
    type Args = GrepArgs;
    const NAME: &'static str = GREP;
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;

    fn description(&self) -> String {
        "Search file contents with a regular expression. Prints one line per match as \
             'path:line: text', sorted by path. Files ignored by .gitignore or .ignore and \
             binary files are skipped."
            .into()
    }

    async fn run(&self, ctx: &ToolContext<'_>, args: GrepArgs) -> ToolResult {
        let ws = ctx.workspace.clone();
        run_blocking(move || grep(&ws, &args)).await
    }
}

struct Collector<'a> {
    ws: &'a Workspace,
    cap: usize,
    lines: Vec<String>,
    /// Matches found past the cap.
    more: u64,
    unreadable: usize,
}

impl Collector<'_> {
    fn full(&self) -> bool {
        self.more >= COUNT_LIMIT
    }

    fn search_file(&mut self, matcher: &RegexMatcher, searcher: &mut Searcher, path: &Path) {
        let shown = self.ws.display_relative(path);
        let result = searcher.search_path(
            matcher,
            path,
            Lossy(|line_number, line| {
                if self.lines.len() >= self.cap {
                    self.more += 1;
                    return Ok(!self.full());
                }
                let line = line.trim_end_matches(['\n', '\r']);
                let kept = truncate_at_char(line, LINE_CAP);
                let ellipsis = if kept.len() < line.len() {
                    " [...]"
                } else {
                    ""
                };
                self.lines
                    .push(format!("{shown}:{line_number}: {kept}{ellipsis}"));
                Ok(true)
            }),
        );
        if result.is_err() {
            self.unreadable += 1;
        }
    }
}

fn grep(ws: &Workspace, args: &GrepArgs) -> ToolResult {
    let root = match ws.resolve(args.path.as_deref().unwrap_or("."), Access::Read) {
        Ok(root) => root,
        Err(e) => return ToolResult::error(e.to_string()),
    };
    let shown = ws.display_relative(&root);
    let meta = match std::fs::metadata(&root) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return ToolResult::error(format!("'{shown}' does not exist"));
        }
        Err(e) => return ToolResult::error(format!("cannot access '{shown}': {e}")),
    };
    if args.pattern.is_empty() {
        return ToolResult::error("pattern is empty; give a regular expression to search for");
    }
    let matcher = match RegexMatcherBuilder::new()
        .case_insensitive(args.case_insensitive.unwrap_or(false))
        .line_terminator(Some(b'\n'))
        .build(&args.pattern)
    {
        Ok(matcher) => matcher,
        Err(e) => {
            return ToolResult::error(format!(
                "invalid regular expression '{}': {e} (grep matches one line at a time; escape \
                 special characters like ( [ . * with a backslash to match them literally)",
                args.pattern
            ));
        }
    };
    let glob = match args.glob.as_deref().map(PathGlob::new).transpose() {
        Ok(glob) => glob,
        Err(msg) => return ToolResult::error(msg),
    };
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        // Binary files would flood the result with noise; a NUL byte marks them, as in ripgrep.
        .binary_detection(BinaryDetection::quit(b'\x00'))
        .build();
    let mut collector = Collector {
        ws,
        cap: args
            .max_matches
            .unwrap_or(DEFAULT_MATCHES)
            .clamp(1, MAX_MATCHES),
        lines: Vec::new(),
        more: 0,
        unreadable: 0,
    };

    if meta.is_file() {
        collector.search_file(&matcher, &mut searcher, &root);
    } else {
        let unreadable = walk(ws, &root, None, |entry| {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return ControlFlow::Continue(());
            }
            let Ok(relative) = entry.path().strip_prefix(&root) else {
                return ControlFlow::Continue(());
            };
            if glob.as_ref().is_some_and(|g| !g.matches(relative)) {
                return ControlFlow::Continue(());
            }
            collector.search_file(&matcher, &mut searcher, entry.path());
            if collector.full() {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        collector.unreadable += unreadable;
    }

    if collector.lines.is_empty() {
        let filter = args
            .glob
            .as_deref()
            .map(|g| format!(" in files matching '{g}'"))
            .unwrap_or_default();
        return ToolResult::success(format!(
            "No matches for /{}/ under '{shown}'{filter}.",
            args.pattern
        ));
    }
    let mut out = collector.lines.join("\n");
    out.push('\n');
    if collector.more > 0 {
        let count = if collector.full() {
            format!("at least {}", group_thousands(collector.more))
        } else {
            group_thousands(collector.more)
        };
        out.push_str(&format!(
            "[... {count} more matches not shown; narrow the search with path, glob or a more \
             specific pattern, or raise max_matches]\n"
        ));
    }
    if collector.unreadable > 0 {
        out.push_str(&format!(
            "[{} files or directories could not be read]\n",
            collector.unreadable
        ));
    }
    ToolResult::success(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::Tool;
    use crate::test_support::ctx;
    use baton_core::ToolOutcome;
    use std::fs;

    fn setup(root: &Path) {
        fs::create_dir_all(root.join("src/deep")).unwrap();
        fs::create_dir_all(root.join("target")).unwrap();
        fs::create_dir_all(root.join(".baton")).unwrap();
        fs::write(
            root.join("src/lib.rs"),
            "pub fn alpha() {}\nfn beta() {}\n// Alpha done\n",
        )
        .unwrap();
        fs::write(root.join("src/deep/z.rs"), "fn alpha_two() {}\n").unwrap();
        fs::write(root.join("notes.md"), "alpha in docs\n").unwrap();
        fs::write(root.join("target/out.rs"), "fn alpha() {}\n").unwrap();
        fs::write(root.join(".baton/journal"), "alpha\n").unwrap();
        fs::write(root.join("blob.bin"), b"alpha\x00\x01\x02").unwrap();
        fs::write(root.join(".gitignore"), "target/\n").unwrap();
    }

    async fn grep(ctx: &ToolContext<'_>, args: serde_json::Value) -> ToolResult {
        Grep.call(ctx, &args.to_string()).await
    }

    #[tokio::test]
    async fn finds_matches_sorted_skipping_ignored_state_and_binary() {
        let (dir, ctx) = ctx();
        setup(dir.path());
        let r = grep(&ctx, serde_json::json!({"pattern": "alpha"})).await;
        assert_eq!(r.outcome, ToolOutcome::Success);
        assert_eq!(
            r.content,
            "notes.md:1: alpha in docs\nsrc/deep/z.rs:1: fn alpha_two() {}\nsrc/lib.rs:1: pub fn alpha() {}\n"
        );
    }

    #[tokio::test]
    async fn glob_path_and_case_options() {
        let (dir, ctx) = ctx();
        setup(dir.path());
        let r = grep(
            &ctx,
            serde_json::json!({"pattern": "ALPHA", "glob": "*.rs", "case_insensitive": true}),
        )
        .await;
        assert_eq!(
            r.content,
            "src/deep/z.rs:1: fn alpha_two() {}\nsrc/lib.rs:1: pub fn alpha() {}\nsrc/lib.rs:3: // Alpha done\n"
        );
        let r = grep(
            &ctx,
            serde_json::json!({"pattern": "fn \\w+\\(", "path": "src/lib.rs"}),
        )
        .await;
        assert_eq!(
            r.content,
            "src/lib.rs:1: pub fn alpha() {}\nsrc/lib.rs:2: fn beta() {}\n"
        );
        let r = grep(
            &ctx,
            serde_json::json!({"pattern": "alpha", "path": "src", "glob": "deep/*.rs"}),
        )
        .await;
        assert_eq!(r.content, "src/deep/z.rs:1: fn alpha_two() {}\n");
        let r = grep(
            &ctx,
            serde_json::json!({"pattern": "alpha", "path": "target"}),
        )
        .await;
        assert_eq!(
            r.content, "target/out.rs:1: fn alpha() {}\n",
            "explicitly asked-for ignored dir"
        );
        let r = grep(&ctx, serde_json::json!({"pattern": "gamma"})).await;
        assert_eq!(r.outcome, ToolOutcome::Success);
        assert!(r.content.starts_with("No matches"), "{}", r.content);
    }

    #[tokio::test]
    async fn matches_are_capped_with_count() {
        let (dir, ctx) = ctx();
        let text: String = (0..250).map(|i| format!("hit {i}\n")).collect();
        fs::write(dir.path().join("many.txt"), text).unwrap();
        fs::write(
            dir.path().join("long.txt"),
            format!("hit {}\n", "y".repeat(5000)),
        )
        .unwrap();
        let r = grep(
            &ctx,
            serde_json::json!({"pattern": "hit", "max_matches": 50}),
        )
        .await;
        let lines: Vec<&str> = r.content.lines().collect();
        assert_eq!(lines.len(), 51);
        assert!(lines[0].starts_with("long.txt:1: hit yyy") && lines[0].ends_with(" [...]"));
        assert!(lines[0].len() < 500);
        assert_eq!(lines[49], "many.txt:49: hit 48");
        assert!(
            lines[50].contains("201 more matches not shown"),
            "{}",
            lines[50]
        );
        let r = grep(&ctx, serde_json::json!({"pattern": "hit"})).await;
        assert!(r.content.contains("151 more matches"), "{}", r.content);
    }

    #[tokio::test]
    async fn errors_are_results() {
        let (dir, ctx) = ctx();
        setup(dir.path());
        for (args, expected) in [
            (
                serde_json::json!({"pattern": "fn ("}),
                "invalid regular expression",
            ),
            (
                serde_json::json!({"pattern": "a\\nb"}),
                "invalid regular expression",
            ),
            (serde_json::json!({"pattern": ""}), "pattern is empty"),
            (
                serde_json::json!({"pattern": "x", "path": "/etc"}),
                "outside the workspace",
            ),
            (
                serde_json::json!({"pattern": "x", "path": ".baton"}),
                ".baton",
            ),
            (
                serde_json::json!({"pattern": "x", "path": "nope"}),
                "does not exist",
            ),
            (
                serde_json::json!({"pattern": "x", "glob": "[z"}),
                "invalid glob",
            ),
            (
                serde_json::json!({"path": "src"}),
                "missing field `pattern`",
            ),
        ] {
            let r = grep(&ctx, args.clone()).await;
            assert_eq!(r.outcome, ToolOutcome::Error, "{args}");
            assert!(r.content.contains(expected), "{args}: {}", r.content);
        }
    }
}
