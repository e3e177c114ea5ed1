//! `read_file`: numbered, range-addressable, size-capped reading of workspace files.

use crate::args::run_blocking;
use crate::fs_tools::check_existing_file;
use crate::output::{group_thousands, trim_partial_char_end};
use crate::path::{Access, Workspace};
use crate::{ToolContext, TypedTool};
use async_trait::async_trait;
use baton_core::{ToolEffect, ToolResult};
use schemars::JsonSchema;
use serde::Deserialize;
use std::fs::File;
use std::io::{self, BufRead, BufReader};

/// Total size of the text `read_file` returns.
const READ_OUTPUT_CAP: usize = 100 * 1024;
/// Longest single line `read_file` shows; minified files can have multi-megabyte lines.
const READ_LINE_CAP: usize = 8 * 1024;

pub const READ_FILE: &str = "read_file";

#[derive(Deserialize, JsonSchema)]
/// The arguments the model sends.
pub struct ReadFileArgs {
    /// Path of the file, relative to the workspace root (for example "src/main.rs").
    path: String,
    /// First line to show, counting from 1. Defaults to 1.
    #[schemars(range(min = 1))]
    start_line: Option<u64>,
    /// Last line to show, counting from 1, inclusive. Defaults to the end of the file.
    #[schemars(range(min = 1))]
    end_line: Option<u64>,
}

/// Reads a text file with line numbers.
pub struct ReadFile;

#[async_trait]
impl TypedTool for ReadFile {
    type Args = ReadFileArgs;
    const NAME: &'static str = READ_FILE;
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;

    fn description(&self) -> String {
        "Read a file of the workspace. Lines are prefixed with their line number (the number \
             and a tab are not part of the file). Large files are cut at about 100 KB; use \
             start_line/end_line to read a specific range."
            .into()
    }

    async fn run(&self, ctx: &ToolContext<'_>, args: ReadFileArgs) -> ToolResult {
        let ws = ctx.workspace.clone();
        run_blocking(move || read_file(&ws, &args)).await
    }
}

fn read_file(ws: &Workspace, args: &ReadFileArgs) -> ToolResult {
    let path = match ws.resolve(&args.path, Access::Read) {
        Ok(path) => path,
        Err(e) => return ToolResult::error(e.to_string()),
    };
    let shown = ws.display_relative(&path);
    let start = args.start_line.unwrap_or(1);
    if start == 0 {
        return ToolResult::error("start_line counts from 1; use 1 for the first line");
    }
    if let Some(end) = args.end_line
        && end < start
    {
        return ToolResult::error(format!(
            "end_line {end} is before start_line {start}; give a range with start_line <= end_line"
        ));
    }
    if let Err(result) = check_existing_file(&path, &shown) {
        return result;
    }
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(e) => return ToolResult::error(format!("cannot open '{shown}': {e}")),
    };
    match render_lines(
        BufReader::with_capacity(64 * 1024, file),
        start,
        args.end_line,
        &shown,
    ) {
        Ok(result) => result,
        Err(e) => ToolResult::error(format!("cannot read '{shown}': {e}")),
    }
}

/// Streams the file so memory stays bounded even for huge files; the whole file is still read
/// to report its line count.
fn render_lines(
    mut reader: impl BufRead,
    start: u64,
    end: Option<u64>,
    shown: &str,
) -> io::Result<ToolResult> {
    let mut body = String::new();
    let mut line = Vec::new();
    let mut total = 0u64;
    let mut last_shown = None;
    let mut capped_after = None;
    let mut lossy = false;
    let mut long_lines = false;

    while let Some(len) = read_line_capped(&mut reader, &mut line, READ_LINE_CAP)? {
        total += 1;
        let in_range = total >= start && end.is_none_or(|end| total <= end);
        if !in_range || capped_after.is_some() {
            continue;
        }
        let cut = len > line.len() as u64;
        if !cut && line.last() == Some(&b'\r') {
            line.pop();
        }
        let kept = if cut {
            trim_partial_char_end(&line)
        } else {
            &line[..]
        };
        let text = match std::str::from_utf8(kept) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => {
                lossy = true;
                String::from_utf8_lossy(kept)
            }
        };
        let mut rendered = format!("{total:>6}\t{text}");
        if cut {
            long_lines = true;
            rendered.push_str(&format!(
                " [... line cut, {} bytes long]",
                group_thousands(len)
            ));
        }
        if last_shown.is_some() && body.len() + rendered.len() + 1 > READ_OUTPUT_CAP {
            capped_after = last_shown;
            continue;
        }
        body.push_str(&rendered);
        body.push('\n');
        last_shown = Some(total);
    }

    if total == 0 {
        return Ok(ToolResult::success(format!("{shown} is empty (0 lines)")));
    }
    let Some(last) = last_shown else {
        return Ok(ToolResult::error(format!(
            "start_line {start} is past the end of '{shown}', which has {total} lines"
        )));
    };
    let mut out = format!("{shown}: lines {start}-{last} of {total}\n{body}");
    if let Some(after) = capped_after {
        out.push_str(&format!(
            "[output capped at about 100 KB after line {after}; call read_file with start_line={} \
             to read on]\n",
            after + 1
        ));
    }
    if long_lines {
        out.push_str(
            "[some lines were longer than 8 KB and are shown cut; use the shell tool (e.g. cut \
             or fold) to see them whole]\n",
        );
    }
    if lossy {
        out.push_str(
            "[the file is not valid UTF-8 (binary?); invalid bytes are shown as \u{fffd}]\n",
        );
    }
    Ok(ToolResult::success(out))
}

/// Reads one line (without its `\n`) into `buf`, keeping at most `keep` bytes of it. Returns
/// the line's full length without the `\n`, or `None` at end of input.
fn read_line_capped(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    keep: usize,
) -> io::Result<Option<u64>> {
    buf.clear();
    let mut len = 0u64;
    let mut read_any = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(read_any.then_some(len));
        }
        read_any = true;
        let newline = available.iter().position(|&b| b == b'\n');
        let content = &available[..newline.unwrap_or(available.len())];
        let room = keep.saturating_sub(buf.len()).min(content.len());
        buf.extend_from_slice(&content[..room]);
        len += content.len() as u64;
        let consumed = newline.map_or(available.len(), |i| i + 1);
        reader.consume(consumed);
        if newline.is_some() {
            return Ok(Some(len));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::Tool;
    use crate::test_support::{call, ctx};
    use baton_core::ToolOutcome;
    use std::fs;

    #[tokio::test]
    async fn read_whole_file_and_range() {
        let (dir, ctx) = ctx();
        fs::write(dir.path().join("a.txt"), "one\ntwo\r\nthree\nfour").unwrap();
        let r = call(&ReadFile, &ctx, serde_json::json!({"path": "a.txt"})).await;
        assert_eq!(r.outcome, ToolOutcome::Success);
        assert_eq!(
            r.content,
            "a.txt: lines 1-4 of 4\n     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour\n"
        );
        let r = call(
            &ReadFile,
            &ctx,
            serde_json::json!({"path": "a.txt", "start_line": 2, "end_line": 3}),
        )
        .await;
        assert_eq!(
            r.content,
            "a.txt: lines 2-3 of 4\n     2\ttwo\n     3\tthree\n"
        );
        let r = call(
            &ReadFile,
            &ctx,
            serde_json::json!({"path": "a.txt", "start_line": 3, "end_line": 99}),
        )
        .await;
        assert!(
            r.content.starts_with("a.txt: lines 3-4 of 4\n"),
            "{}",
            r.content
        );
    }

    #[tokio::test]
    async fn read_errors_are_explained() {
        let (dir, ctx) = ctx();
        fs::write(dir.path().join("a.txt"), "x\n").unwrap();
        fs::create_dir(dir.path().join("d")).unwrap();
        let cases = [
            (serde_json::json!({"path": "missing.txt"}), "does not exist"),
            (serde_json::json!({"path": "d"}), "is a directory"),
            (serde_json::json!({"path": "../x"}), "outside the workspace"),
            (
                serde_json::json!({"path": "a.txt", "start_line": 5}),
                "past the end",
            ),
            (
                serde_json::json!({"path": "a.txt", "start_line": 0}),
                "counts from 1",
            ),
            (
                serde_json::json!({"path": "a.txt", "start_line": 3, "end_line": 2}),
                "before",
            ),
            (serde_json::json!({"start_line": 1}), "missing field `path`"),
        ];
        for (args, expected) in cases {
            let r = call(&ReadFile, &ctx, args.clone()).await;
            assert_eq!(r.outcome, ToolOutcome::Error, "{args}");
            assert!(r.content.contains(expected), "{args}: {}", r.content);
        }
        let r = ReadFile.call(&ctx, "{\"path\": ").await;
        assert!(r.content.contains("not valid JSON"), "{}", r.content);
    }

    #[tokio::test]
    async fn read_large_file_is_capped_with_continuation_hint() {
        let (dir, ctx) = ctx();
        let text: String = (1..=20_000).map(|i| format!("line number {i}\n")).collect();
        fs::write(dir.path().join("big.txt"), &text).unwrap();
        let r = call(&ReadFile, &ctx, serde_json::json!({"path": "big.txt"})).await;
        assert_eq!(r.outcome, ToolOutcome::Success);
        assert!(r.content.len() < READ_OUTPUT_CAP + 1024);
        assert!(r.content.contains("of 20000\n"), "{}", &r.content[..100]);
        let hint = r.content.lines().last().unwrap();
        let next: u64 = hint
            .split("start_line=")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            r.content
                .contains(&format!("{:>6}\tline number {}\n", next - 1, next - 1))
        );
        let r = call(
            &ReadFile,
            &ctx,
            serde_json::json!({"path": "big.txt", "start_line": next}),
        )
        .await;
        assert!(
            r.content
                .contains(&format!("{next:>6}\tline number {next}\n"))
        );
    }

    #[tokio::test]
    async fn read_binary_and_long_lines() {
        let (dir, ctx) = ctx();
        fs::write(dir.path().join("bin"), b"\xff\xfe ok\n\x00\x01").unwrap();
        let r = call(&ReadFile, &ctx, serde_json::json!({"path": "bin"})).await;
        assert_eq!(r.outcome, ToolOutcome::Success);
        assert!(r.content.contains("\u{fffd}\u{fffd} ok"), "{}", r.content);
        assert!(r.content.contains("not valid UTF-8"), "{}", r.content);

        fs::write(dir.path().join("min.js"), "x".repeat(1_000_000)).unwrap();
        let r = call(&ReadFile, &ctx, serde_json::json!({"path": "min.js"})).await;
        assert!(r.content.len() < 10_000);
        assert!(
            r.content.contains("line cut, 1,000,000 bytes long"),
            "{}",
            &r.content[8000..]
        );

        let fifo = dir.path().join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let r = call(&ReadFile, &ctx, serde_json::json!({"path": "fifo"})).await;
        assert!(r.content.contains("not a regular file"), "{}", r.content);

        fs::write(dir.path().join("empty"), "").unwrap();
        let r = call(&ReadFile, &ctx, serde_json::json!({"path": "empty"})).await;
        assert_eq!(r.content, "empty is empty (0 lines)");
    }
}
