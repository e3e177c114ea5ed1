//! `list_dir`: a gitignore-aware, deterministic listing of workspace files.

use crate::args::run_blocking;
use crate::output::group_thousands;
use crate::path::{Access, Workspace};
use crate::{ToolContext, TypedTool};
use async_trait::async_trait;
use baton_core::{ToolEffect, ToolResult};
use globset::{GlobBuilder, GlobMatcher};
use ignore::{DirEntry, WalkBuilder};
use schemars::JsonSchema;
use serde::Deserialize;
use std::ops::ControlFlow;
use std::path::Path;

pub const LIST_DIR: &str = "list_dir";

const DEFAULT_ENTRIES: usize = 500;
const MAX_ENTRIES: usize = 5000;
/// Entries counted (not kept) past the cap, so the "N more" note stays cheap on huge trees.
const COUNT_LIMIT: usize = 100_000;

#[derive(Deserialize, JsonSchema)]
/// The arguments the model sends.
pub struct ListDirArgs {
    /// Directory to list, relative to the workspace root. Defaults to the workspace root.
    path: Option<String>,
    /// Glob that entries must match, relative to `path`, e.g. "src/**/*.rs". `*` does not cross
    /// '/', `**` matches any number of directories. A glob without '/' (e.g. "*.toml") matches
    /// entry names at any depth. Without a pattern every entry is listed.
    pattern: Option<String>,
    /// How many directory levels to descend: 1 lists only the direct children. Defaults to no
    /// limit.
    #[schemars(range(min = 1))]
    max_depth: Option<usize>,
    /// Maximum number of entries to return. Defaults to 500, at most 5000.
    #[schemars(range(min = 1))]
    max_entries: Option<usize>,
}

/// Lists files and directories, honouring .gitignore and .ignore files.
pub struct ListDir;

#[async_trait]
impl TypedTool for ListDir {
    type Args = ListDirArgs;
    const NAME: &'static str = LIST_DIR;
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;

    fn description(&self) -> String {
        "List files and directories recursively, sorted by path, directories ending in '/'. \
             Paths are shown relative to the workspace root. Files ignored by .gitignore or \
             .ignore, and the .git directory, are left out."
            .into()
    }

    async fn run(&self, ctx: &ToolContext<'_>, args: ListDirArgs) -> ToolResult {
        let ws = ctx.workspace.clone();
        run_blocking(move || list_dir(&ws, &args)).await
    }
}

/// Walks the entries strictly under `dir` (a resolved directory inside the workspace) in sorted
/// order, calling `visit` for each until it breaks; returns how many entries could not be read.
///
/// Shared by `list_dir` and `grep`. Hidden files are shown; `.gitignore`/`.ignore` files are
/// honoured even outside a git repository; symlinks are not followed (a link may lead out of the
/// workspace); `.git` and baton's state directory are skipped.
///
/// The walk starts at the workspace root and prunes everything off the way to `dir`, so ignore
/// files between the root and `dir` apply while ignore files above the workspace never do (a
/// `*` in a home-directory .gitignore would otherwise hide every file). If `dir` itself is
/// ignored (the model asked for `target/` explicitly) it is walked on its own instead.
pub(crate) fn walk(
    ws: &Workspace,
    dir: &Path,
    max_depth: Option<usize>,
    mut visit: impl FnMut(&DirEntry) -> ControlFlow<()>,
) -> usize {
    let base = dir
        .strip_prefix(ws.root())
        .map_or(0, |rel| rel.components().count());
    let mut unreadable = 0;
    let mut reached_dir = base == 0;
    let target = dir.to_path_buf();
    let on_the_way = move |entry: &DirEntry| {
        target.starts_with(entry.path()) || entry.path().starts_with(&target)
    };
    for entry in walk_builder(ws, ws.root(), max_depth.map(|d| d + base), on_the_way).build() {
        let Ok(entry) = entry else {
            unreadable += 1;
            continue;
        };
        if entry.path() == dir {
            reached_dir = true;
        } else if entry.path().starts_with(dir) && visit(&entry).is_break() {
            return unreadable;
        }
    }
    if reached_dir {
        return unreadable;
    }
    for entry in walk_builder(ws, dir, max_depth, |_: &DirEntry| true).build() {
        let Ok(entry) = entry else {
            unreadable += 1;
            continue;
        };
        if entry.depth() > 0 && visit(&entry).is_break() {
            break;
        }
    }
    unreadable
}

fn walk_builder(
    ws: &Workspace,
    start: &Path,
    max_depth: Option<usize>,
    keep: impl Fn(&DirEntry) -> bool + Send + Sync + 'static,
) -> WalkBuilder {
    let mut builder = WalkBuilder::new(start);
    builder
        .hidden(false)
        .ignore(true)
        .git_ignore(true)
        .git_exclude(true)
        // The user's global gitignore would make results depend on the machine.
        .git_global(false)
        .require_git(false)
        .parents(false)
        .follow_links(false)
        .max_depth(max_depth)
        .sort_by_file_name(|a, b| a.cmp(b));
    let ws = ws.clone();
    builder.filter_entry(move |entry| {
        entry.file_name() != ".git" && !ws.is_state_path(entry.path()) && keep(entry)
    });
    builder
}

/// Matches a glob against a path relative to the search root; a glob without '/' is matched
/// against the entry name only, as .gitignore does, because models write "*.rs" meaning
/// "Rust files anywhere".
pub(crate) struct PathGlob {
    matcher: GlobMatcher,
    name_only: bool,
}

impl PathGlob {
    pub(crate) fn new(pattern: &str) -> Result<PathGlob, String> {
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("invalid glob '{pattern}': {e}"))?;
        Ok(PathGlob {
            matcher: glob.compile_matcher(),
            name_only: !pattern.contains('/'),
        })
    }

    pub(crate) fn matches(&self, relative: &Path) -> bool {
        if self.name_only {
            relative
                .file_name()
                .is_some_and(|name| self.matcher.is_match(name))
        } else {
            self.matcher.is_match(relative)
        }
    }
}

fn list_dir(ws: &Workspace, args: &ListDirArgs) -> ToolResult {
    let dir = match ws.resolve(args.path.as_deref().unwrap_or("."), Access::Read) {
        Ok(dir) => dir,
        Err(e) => return ToolResult::error(e.to_string()),
    };
    let shown = ws.display_relative(&dir);
    match std::fs::metadata(&dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return ToolResult::error(format!(
                "'{shown}' is a file, not a directory; use read_file"
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return ToolResult::error(format!("directory '{shown}' does not exist"));
        }
        Err(e) => return ToolResult::error(format!("cannot access '{shown}': {e}")),
    }
    let glob = match args.pattern.as_deref().map(PathGlob::new).transpose() {
        Ok(glob) => glob,
        Err(msg) => return ToolResult::error(msg),
    };
    if args.max_depth == Some(0) {
        return ToolResult::error("max_depth must be at least 1 (1 lists the direct children)");
    }
    let cap = args
        .max_entries
        .unwrap_or(DEFAULT_ENTRIES)
        .clamp(1, MAX_ENTRIES);

    let mut lines = Vec::new();
    let mut more = 0usize;
    let unreadable = walk(ws, &dir, args.max_depth, |entry| {
        let Ok(relative) = entry.path().strip_prefix(&dir) else {
            return ControlFlow::Continue(());
        };
        if glob.as_ref().is_some_and(|g| !g.matches(relative)) {
            return ControlFlow::Continue(());
        }
        if lines.len() >= cap {
            more += 1;
            return if more >= COUNT_LIMIT {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            };
        }
        let mut line = ws.display_relative(entry.path());
        if entry.file_type().is_some_and(|t| t.is_dir()) {
            line.push('/');
        }
        lines.push(line);
        ControlFlow::Continue(())
    });

    if lines.is_empty() {
        let what = match &args.pattern {
            Some(p) => format!("No entries under '{shown}' match '{p}'."),
            None => format!("'{shown}' is empty (or every entry in it is ignored)."),
        };
        return ToolResult::success(what);
    }
    let mut out = lines.join("\n");
    out.push('\n');
    if more > 0 {
        let count = if more >= COUNT_LIMIT {
            format!("at least {}", group_thousands(more as u64))
        } else {
            group_thousands(more as u64)
        };
        out.push_str(&format!(
            "[... {count} more entries not shown; narrow the listing with path, pattern or \
             max_depth, or raise max_entries]\n"
        ));
    }
    if unreadable > 0 {
        out.push_str(&format!("[{unreadable} entries could not be read]\n"));
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
    use std::time::Duration;

    fn tree(root: &Path) {
        for dir in ["src/bin", "target/debug", ".git/objects", ".baton", "docs"] {
            fs::create_dir_all(root.join(dir)).unwrap();
        }
        for file in [
            "src/lib.rs",
            "src/bin/main.rs",
            "src/notes.txt",
            "target/debug/app",
            ".git/HEAD",
            ".baton/journal.db",
            ".env.example",
            "Cargo.toml",
            "docs/a.md",
            "debug.log",
        ] {
            fs::write(root.join(file), "x").unwrap();
        }
        fs::write(root.join(".gitignore"), "target/\n*.log\n").unwrap();
    }

    async fn list(ctx: &ToolContext<'_>, args: serde_json::Value) -> ToolResult {
        ListDir.call(ctx, &args.to_string()).await
    }

    #[tokio::test]
    async fn lists_sorted_respecting_gitignore_without_git_repo() {
        let (dir, ctx) = ctx();
        tree(dir.path());
        let r = list(&ctx, serde_json::json!({})).await;
        assert_eq!(r.outcome, ToolOutcome::Success);
        assert_eq!(
            r.content,
            ".env.example\n.gitignore\nCargo.toml\ndocs/\ndocs/a.md\nsrc/\nsrc/bin/\n\
             src/bin/main.rs\nsrc/lib.rs\nsrc/notes.txt\n"
        );
    }

    #[tokio::test]
    async fn subdirectory_depth_and_patterns() {
        let (dir, ctx) = ctx();
        tree(dir.path());
        let r = list(&ctx, serde_json::json!({"path": "src", "max_depth": 1})).await;
        assert_eq!(r.content, "src/bin/\nsrc/lib.rs\nsrc/notes.txt\n");
        let r = list(&ctx, serde_json::json!({"pattern": "src/**/*.rs"})).await;
        assert_eq!(r.content, "src/bin/main.rs\nsrc/lib.rs\n");
        let r = list(&ctx, serde_json::json!({"pattern": "*.rs"})).await;
        assert_eq!(r.content, "src/bin/main.rs\nsrc/lib.rs\n");
        let r = list(
            &ctx,
            serde_json::json!({"path": "src", "pattern": "*/main.rs"}),
        )
        .await;
        assert_eq!(r.content, "src/bin/main.rs\n");
        let r = list(&ctx, serde_json::json!({"pattern": "*.py"})).await;
        assert_eq!(r.outcome, ToolOutcome::Success);
        assert!(r.content.contains("No entries"), "{}", r.content);
    }

    #[tokio::test]
    async fn entries_are_capped_with_a_count() {
        let (dir, ctx) = ctx();
        for i in 0..30 {
            fs::write(dir.path().join(format!("f{i:02}")), "").unwrap();
        }
        let r = list(&ctx, serde_json::json!({"max_entries": 10})).await;
        let lines: Vec<&str> = r.content.lines().collect();
        assert_eq!(lines.len(), 11);
        assert_eq!(lines[0], "f00");
        assert_eq!(lines[9], "f09");
        assert!(
            lines[10].contains("20 more entries not shown"),
            "{}",
            lines[10]
        );
    }

    #[tokio::test]
    async fn errors_are_results() {
        let (dir, ctx) = ctx();
        tree(dir.path());
        for (args, expected) in [
            (serde_json::json!({"path": "../"}), "outside the workspace"),
            (serde_json::json!({"path": ".baton"}), ".baton"),
            (serde_json::json!({"path": "nope"}), "does not exist"),
            (serde_json::json!({"path": "Cargo.toml"}), "is a file"),
            (serde_json::json!({"pattern": "a[b"}), "invalid glob"),
            (serde_json::json!({"max_depth": 0}), "max_depth"),
        ] {
            let r = list(&ctx, args.clone()).await;
            assert_eq!(r.outcome, ToolOutcome::Error, "{args}");
            assert!(r.content.contains(expected), "{args}: {}", r.content);
        }
    }

    #[tokio::test]
    async fn symlinks_are_listed_not_followed() {
        let (dir, ctx) = ctx();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        let r = list(&ctx, serde_json::json!({})).await;
        assert_eq!(r.content, "out\n");
    }

    #[tokio::test]
    async fn ignored_directory_asked_for_explicitly_is_listed() {
        let (dir, ctx) = ctx();
        tree(dir.path());
        let r = list(&ctx, serde_json::json!({"path": "target"})).await;
        assert_eq!(r.content, "target/debug/\ntarget/debug/app\n");
        let r = list(&ctx, serde_json::json!({"path": "target/debug"})).await;
        assert_eq!(r.content, "target/debug/app\n");
    }

    #[tokio::test]
    async fn ignore_files_above_the_workspace_do_not_apply() {
        let outer = tempfile::tempdir().unwrap();
        fs::write(outer.path().join(".gitignore"), "*\n").unwrap();
        fs::create_dir_all(outer.path().join("ws/src")).unwrap();
        fs::write(outer.path().join("ws/src/a.rs"), "").unwrap();
        let ctx = ToolContext {
            workspace: Workspace::new(outer.path().join("ws")).unwrap(),
            shell_timeout: Duration::from_secs(10),
            secret_env_vars: vec![],
            exec: crate::ExecEnv::unconfined(),
            run: None,
        };
        let r = list(&ctx, serde_json::json!({"path": "src"})).await;
        assert_eq!(r.content, "src/a.rs\n");
        let r = list(&ctx, serde_json::json!({})).await;
        assert_eq!(r.content, "src/\nsrc/a.rs\n");
    }

    #[tokio::test]
    async fn nested_ignore_files_apply_to_subdirectory_listings() {
        let (dir, ctx) = ctx();
        fs::create_dir_all(dir.path().join("app/gen")).unwrap();
        fs::write(dir.path().join("app/.ignore"), "gen/\n").unwrap();
        fs::write(dir.path().join("app/gen/x.rs"), "").unwrap();
        fs::write(dir.path().join("app/main.rs"), "").unwrap();
        fs::write(dir.path().join(".gitignore"), "/app/main.rs\n").unwrap();
        fs::write(dir.path().join("app/keep.rs"), "").unwrap();
        let r = list(&ctx, serde_json::json!({"path": "app"})).await;
        assert_eq!(r.content, "app/.ignore\napp/keep.rs\n");
    }
}
