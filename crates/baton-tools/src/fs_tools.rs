//! `write_file` and `edit_file`: workspace-confined file changes.

use crate::args::run_blocking;
use crate::output::group_thousands;
use crate::path::{Access, Workspace};
use crate::{ToolContext, TypedTool};
use async_trait::async_trait;
use baton_core::{ToolEffect, ToolResult};
use schemars::JsonSchema;
use serde::Deserialize;
use std::fs;
use std::io;
use std::path::Path;

/// `edit_file` holds the whole file in memory twice.
const EDIT_SIZE_CAP: u64 = 16 * 1024 * 1024;

pub const WRITE_FILE: &str = "write_file";
pub const EDIT_FILE: &str = "edit_file";

#[derive(Deserialize, JsonSchema)]
/// The arguments the model sends.
pub struct WriteFileArgs {
    /// Path of the file, relative to the workspace root. Missing parent directories are created.
    path: String,
    /// The complete new content of the file. It replaces any existing content.
    content: String,
}

#[derive(Deserialize, JsonSchema)]
/// The arguments the model sends.
pub struct EditFileArgs {
    /// Path of the file to edit, relative to the workspace root.
    path: String,
    /// Exact text to replace, including whitespace and indentation. It must occur exactly once
    /// in the file; include enough surrounding lines to make it unique.
    old_string: String,
    /// Text that replaces old_string. May be empty to delete old_string.
    new_string: String,
}

/// Creates or overwrites a file.
pub struct WriteFile;

/// Replaces one exact occurrence of a string in a file.
pub struct EditFile;

#[async_trait]
impl TypedTool for WriteFile {
    type Args = WriteFileArgs;
    const NAME: &'static str = WRITE_FILE;
    const EFFECT: ToolEffect = ToolEffect::Mutating;

    fn description(&self) -> String {
        "Create a file or replace its whole content. Parent directories are created as \
             needed. To change part of an existing file, prefer edit_file."
            .into()
    }

    async fn run(&self, ctx: &ToolContext<'_>, args: WriteFileArgs) -> ToolResult {
        let ws = ctx.workspace.clone();
        run_blocking(move || write_file(&ws, &args)).await
    }
}

#[async_trait]
impl TypedTool for EditFile {
    type Args = EditFileArgs;
    const NAME: &'static str = EDIT_FILE;
    const EFFECT: ToolEffect = ToolEffect::Mutating;

    fn description(&self) -> String {
        "Replace exactly one occurrence of old_string with new_string in a file. old_string \
             must match the file exactly (whitespace and indentation included, without the line \
             number prefixes read_file shows) and must be unique in the file."
            .into()
    }

    async fn run(&self, ctx: &ToolContext<'_>, args: EditFileArgs) -> ToolResult {
        let ws = ctx.workspace.clone();
        run_blocking(move || edit_file(&ws, &args)).await
    }
}

/// Explains why an existing-file operation cannot start, in terms the model can act on.
pub(crate) fn check_existing_file(path: &Path, shown: &str) -> Result<fs::Metadata, ToolResult> {
    match fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(ToolResult::error(format!(
            "'{shown}' is a directory, not a file; use list_dir to see its contents"
        ))),
        // A FIFO or device would block the read or never end.
        Ok(meta) if !meta.is_file() => Err(ToolResult::error(format!(
            "'{shown}' is not a regular file (a pipe, socket or device); it cannot be read or \
             edited"
        ))),
        Ok(meta) => Ok(meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(ToolResult::error(format!(
            "file '{shown}' does not exist; use list_dir or grep to find the right path"
        ))),
        Err(e) => Err(ToolResult::error(format!("cannot access '{shown}': {e}"))),
    }
}

fn write_file(ws: &Workspace, args: &WriteFileArgs) -> ToolResult {
    let path = match ws.resolve(&args.path, Access::Write) {
        Ok(path) => path,
        Err(e) => return ToolResult::error(e.to_string()),
    };
    let shown = ws.display_relative(&path);
    if path.is_dir() {
        return ToolResult::error(format!(
            "'{shown}' is a directory; give the path of a file inside it"
        ));
    }
    // A FIFO or device would block the write forever (or write somewhere unexpected).
    if path.exists() && !path.is_file() {
        return ToolResult::error(format!(
            "'{shown}' is not a regular file; refusing to write to it"
        ));
    }
    let existed = path.exists();
    if let Some(parent) = path.parent()
        && let Err(e) = fs::create_dir_all(parent)
    {
        return ToolResult::error(format!(
            "cannot create the parent directories of '{shown}': {e}"
        ));
    }
    if let Err(e) = write_atomically(&path, args.content.as_bytes()) {
        return ToolResult::error(format!("cannot write '{shown}': {e}"));
    }
    let what = if existed {
        "replaced the existing file"
    } else {
        "created a new file"
    };
    ToolResult::success(format!(
        "Wrote {} bytes to {shown} ({what}).",
        group_thousands(args.content.len() as u64)
    ))
}

fn edit_file(ws: &Workspace, args: &EditFileArgs) -> ToolResult {
    let path = match ws.resolve(&args.path, Access::Write) {
        Ok(path) => path,
        Err(e) => return ToolResult::error(e.to_string()),
    };
    let shown = ws.display_relative(&path);
    if args.old_string.is_empty() {
        return ToolResult::error(
            "old_string is empty; copy the exact text to replace from the file (to create or \
             overwrite a whole file use write_file)",
        );
    }
    if args.old_string == args.new_string {
        return ToolResult::error("old_string and new_string are identical; nothing would change");
    }
    let meta = match check_existing_file(&path, &shown) {
        Ok(meta) => meta,
        Err(result) => return result,
    };
    if meta.len() > EDIT_SIZE_CAP {
        return ToolResult::error(format!(
            "'{shown}' is {} bytes, too large for edit_file (limit {} bytes); use the shell tool",
            group_thousands(meta.len()),
            group_thousands(EDIT_SIZE_CAP)
        ));
    }
    let content = match fs::read(&path).map(String::from_utf8) {
        Ok(Ok(content)) => content,
        Ok(Err(_)) => {
            return ToolResult::error(format!(
                "'{shown}' is not valid UTF-8 text; edit_file cannot change it safely"
            ));
        }
        Err(e) => return ToolResult::error(format!("cannot read '{shown}': {e}")),
    };

    let positions: Vec<usize> = content
        .match_indices(&args.old_string)
        .map(|(i, _)| i)
        .collect();
    let line_of = |offset: usize| content[..offset].matches('\n').count() + 1;
    match positions.as_slice() {
        [] => {
            let mut msg = format!(
                "old_string was not found in '{shown}'. It must match the file exactly, \
                 including whitespace and indentation; read the file again and copy the text."
            );
            if content.contains("\r\n") && !args.old_string.contains('\r') {
                msg.push_str(
                    " Note: the file uses CRLF (\\r\\n) line endings; old_string must include \
                     the \\r before each \\n.",
                );
            }
            ToolResult::error(msg)
        }
        [at] => {
            let updated = format!(
                "{}{}{}",
                &content[..*at],
                args.new_string,
                &content[*at + args.old_string.len()..]
            );
            if let Err(e) = write_atomically(&path, updated.as_bytes()) {
                return ToolResult::error(format!("cannot write '{shown}': {e}"));
            }
            ToolResult::success(format!(
                "Edited {shown}: replaced 1 occurrence at line {} ({} lines replaced by {}).",
                line_of(*at),
                args.old_string.lines().count(),
                args.new_string.lines().count()
            ))
        }
        many => {
            let lines: Vec<String> = many
                .iter()
                .take(20)
                .map(|&at| line_of(at).to_string())
                .collect();
            let more = if many.len() > 20 { ", ..." } else { "" };
            ToolResult::error(format!(
                "old_string occurs {} times in '{shown}' (at lines {}{more}); include more \
                 surrounding lines in old_string so it matches exactly one place",
                many.len(),
                lines.join(", ")
            ))
        }
    }
}

/// Replaces a file's contents all at once: a temporary file beside it is written, synced and
/// renamed over it. A crash (or kill -9) mid-write leaves the old contents or the new, never a
/// truncated mix — so a write interrupted by a crash is one the model can reason about. The
/// existing file's permissions are kept (an executable script stays executable).
fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.baton-{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = fs::File::create(&temp)?;
        file.write_all(bytes)?;
        if let Ok(meta) = fs::metadata(path) {
            file.set_permissions(meta.permissions())?;
        }
        file.sync_all()?;
        fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::test_support::{call, ctx};
    use baton_core::ToolOutcome;

    #[tokio::test]
    async fn writes_replace_files_whole_and_keep_their_permissions() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, ctx) = ctx();
        let script = dir.path().join("run.sh");
        fs::write(&script, "echo old\n").unwrap();
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
        let r = call(
            &WriteFile,
            &ctx,
            serde_json::json!({"path": "run.sh", "content": "echo new\n"}),
        )
        .await;
        assert_eq!(r.outcome, ToolOutcome::Success, "{}", r.content);
        let r = call(
            &EditFile,
            &ctx,
            serde_json::json!({"path": "run.sh", "old_string": "new", "new_string": "newer"}),
        )
        .await;
        assert_eq!(r.outcome, ToolOutcome::Success, "{}", r.content);
        assert_eq!(fs::read_to_string(&script).unwrap(), "echo newer\n");
        assert_eq!(
            fs::metadata(&script).unwrap().permissions().mode() & 0o777,
            0o755
        );
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("run.sh")],
            "no temporary file may be left"
        );
    }

    #[tokio::test]
    async fn write_refuses_a_fifo_instead_of_blocking() {
        let (dir, ctx) = ctx();
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let r = call(
            &WriteFile,
            &ctx,
            serde_json::json!({"path": "pipe", "content": "x"}),
        )
        .await;
        assert_eq!(r.outcome, ToolOutcome::Error);
        assert!(r.content.contains("not a regular file"), "{}", r.content);
    }

    #[tokio::test]
    async fn write_creates_parents_and_reports_bytes() {
        let (dir, ctx) = ctx();
        let r = call(
            &WriteFile,
            &ctx,
            serde_json::json!({"path": "a/b/c.txt", "content": "héllo"}),
        )
        .await;
        assert_eq!(r.outcome, ToolOutcome::Success, "{}", r.content);
        assert_eq!(
            r.content,
            "Wrote 6 bytes to a/b/c.txt (created a new file)."
        );
        assert_eq!(
            fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
            "héllo"
        );
        let r = call(
            &WriteFile,
            &ctx,
            serde_json::json!({"path": "a/b/c.txt", "content": ""}),
        )
        .await;
        assert!(r.content.contains("replaced the existing file"));
        assert_eq!(
            fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
            ""
        );
    }

    #[tokio::test]
    async fn write_refuses_escapes_and_directories() {
        let (dir, ctx) = ctx();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        for path in ["../x.txt", "out/x.txt", ".baton/journal.db", "."] {
            let r = call(
                &WriteFile,
                &ctx,
                serde_json::json!({"path": path, "content": "x"}),
            )
            .await;
            assert_eq!(r.outcome, ToolOutcome::Error, "{path}: {}", r.content);
        }
        assert!(!outside.path().join("x.txt").exists());
        assert!(!dir.path().join(".baton").exists());
        fs::create_dir(dir.path().join("d")).unwrap();
        let r = call(
            &WriteFile,
            &ctx,
            serde_json::json!({"path": "d", "content": "x"}),
        )
        .await;
        assert!(r.content.contains("is a directory"), "{}", r.content);
    }

    #[tokio::test]
    async fn edit_replaces_exactly_one_occurrence() {
        let (dir, ctx) = ctx();
        let file = dir.path().join("m.rs");
        fs::write(&file, "fn a() {}\nfn b() {\n    1\n}\n").unwrap();
        let r = call(
            &EditFile,
            &ctx,
            serde_json::json!({"path": "m.rs", "old_string": "    1\n", "new_string": "    2\n    3\n"}),
        )
        .await;
        assert_eq!(r.outcome, ToolOutcome::Success, "{}", r.content);
        assert_eq!(
            r.content,
            "Edited m.rs: replaced 1 occurrence at line 3 (1 lines replaced by 2)."
        );
        assert_eq!(
            fs::read_to_string(&file).unwrap(),
            "fn a() {}\nfn b() {\n    2\n    3\n}\n"
        );
    }

    #[tokio::test]
    async fn edit_errors_are_explained() {
        let (dir, ctx) = ctx();
        let file = dir.path().join("m.rs");
        let original = "x = 1\ny = 1\nz = 1\n";
        fs::write(&file, original).unwrap();
        let r = call(
            &EditFile,
            &ctx,
            serde_json::json!({"path": "m.rs", "old_string": "= 1", "new_string": "= 2"}),
        )
        .await;
        assert_eq!(r.outcome, ToolOutcome::Error);
        assert!(r.content.contains("occurs 3 times"), "{}", r.content);
        assert!(r.content.contains("lines 1, 2, 3"), "{}", r.content);
        let r = call(
            &EditFile,
            &ctx,
            serde_json::json!({"path": "m.rs", "old_string": "w = 1", "new_string": "w = 2"}),
        )
        .await;
        assert!(r.content.contains("was not found"), "{}", r.content);
        let r = call(
            &EditFile,
            &ctx,
            serde_json::json!({"path": "m.rs", "old_string": "", "new_string": "a"}),
        )
        .await;
        assert!(r.content.contains("old_string is empty"), "{}", r.content);
        let r = call(
            &EditFile,
            &ctx,
            serde_json::json!({"path": "nope.rs", "old_string": "a", "new_string": "b"}),
        )
        .await;
        assert!(r.content.contains("does not exist"), "{}", r.content);
        assert_eq!(fs::read_to_string(&file).unwrap(), original);

        fs::write(dir.path().join("crlf.txt"), "a\r\nb\r\n").unwrap();
        let r = call(
            &EditFile,
            &ctx,
            serde_json::json!({"path": "crlf.txt", "old_string": "a\nb", "new_string": "c"}),
        )
        .await;
        assert!(r.content.contains("CRLF"), "{}", r.content);
    }
}
