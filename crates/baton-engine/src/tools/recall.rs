//! `recall`: earlier content of the run, exactly, by its handle (`shell#42`), in pages.

use async_trait::async_trait;
use baton_core::handle::{MODEL_KIND, NOTE_KIND, SUMMARY_KIND, parse_handle};
use baton_core::memory::RECALL_TOOL;
use baton_core::{Event, EventRecord, ToolEffect, ToolResult};
use baton_tools::{JournalReader, ToolContext, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;

use super::run_of;

/// Lines per `recall` page unless the model asks otherwise.
const RECALL_PAGE_LINES: usize = 400;
/// Bytes per `recall` page at most, whatever the line count: a page must fit a prompt.
const RECALL_PAGE_BYTES: usize = 64 * 1024;
/// How far back from a tool result `recall` looks for the call that produced it.
const CALL_LOOKBACK: u64 = 64;

pub(crate) struct Recall;

#[async_trait]
impl TypedTool for Recall {
    type Args = RecallArgs;
    const NAME: &'static str = RECALL_TOOL;
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;

    fn description(&self) -> String {
        "Fetch earlier content exactly by its handle, e.g. `shell#42` from a placeholder like \
         `[shell#42 output elided: ...]`. Long content comes in pages of lines; pass `offset` to \
         continue."
            .into()
    }

    async fn run(&self, ctx: &ToolContext<'_>, args: RecallArgs) -> ToolResult {
        match run_of(ctx, RECALL_TOOL) {
            Ok(run) => recall(run.journal, args).await,
            Err(result) => result,
        }
    }
}

/// The arguments the model sends.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecallArgs {
    handle: String,
    /// first line (0-based)
    #[schemars(range(min = 0))]
    offset: Option<usize>,
    /// lines per page (default 400)
    #[schemars(range(min = 1))]
    limit: Option<usize>,
}

async fn recall(journal: &dyn JournalReader, args: RecallArgs) -> ToolResult {
    let offset = args.offset.unwrap_or(0);
    let Some((kind, seq)) = parse_handle(&args.handle) else {
        return ToolResult::error(format!(
            "`{}` is not a handle; handles look like `shell#42` (tool#sequence number)",
            args.handle
        ));
    };
    let event = match journal.read(seq, 1).await {
        Ok(events) => events.into_iter().next(),
        Err(e) => return ToolResult::error(format!("could not read the journal: {e}")),
    };
    let Some(event) = event.filter(|e| e.seq == seq) else {
        return ToolResult::error(format!("no journal event {seq} in this run"));
    };
    let content = match content_of(&event, kind) {
        Ok(Some(content)) => content,
        Ok(None) => {
            // A tool result: check the kind against the call that produced it.
            let from = seq.saturating_sub(CALL_LOOKBACK);
            let earlier = journal.read(from, seq - from).await.unwrap_or_default();
            match tool_output(&event, &earlier) {
                Some((name, content)) if name == kind => content,
                Some((name, _)) => {
                    return ToolResult::error(format!(
                        "event {seq} is the output of `{name}`, not `{kind}`; its handle is {name}#{seq}"
                    ));
                }
                None => {
                    return ToolResult::error(format!(
                        "event {seq} is a `{}` event, which has no recallable content",
                        event.event.kind()
                    ));
                }
            }
        }
        Err(problem) => return ToolResult::error(problem),
    };
    ToolResult::success(page(&args.handle, &content, offset, args.limit))
}

/// Content of the non-tool kinds; `Ok(None)` when the handle names a tool output.
fn content_of(record: &EventRecord, kind: &str) -> Result<Option<String>, String> {
    let expected = match &record.event {
        Event::ModelCallFinished { message, .. } => {
            let mut text = message.content.clone().unwrap_or_default();
            for call in &message.tool_calls {
                text.push_str(&format!("\n→ {}({})", call.name, call.arguments));
            }
            (MODEL_KIND, text)
        }
        Event::NoteAdded { text } => (NOTE_KIND, text.clone()),
        Event::CompactionFinished { summary, .. } => (SUMMARY_KIND, summary.clone()),
        _ => return Ok(None),
    };
    if expected.0 == kind {
        Ok(Some(expected.1))
    } else {
        Err(format!(
            "event {} is a `{}`; its handle is {}#{}",
            record.seq, expected.0, expected.0, record.seq
        ))
    }
}

/// The tool name and output of a `tool_call_finished` event.
fn tool_output(record: &EventRecord, earlier: &[EventRecord]) -> Option<(String, String)> {
    let Event::ToolCallFinished {
        call_id, result, ..
    } = &record.event
    else {
        return None;
    };
    let name = earlier.iter().rev().find_map(|e| match &e.event {
        Event::ToolCallStarted {
            call_id: id, name, ..
        } if id == call_id => Some(name.clone()),
        _ => None,
    })?;
    Some((name, result.content.clone()))
}

/// One page of `content`: a header naming the line range, then the lines exactly.
fn page(handle: &str, content: &str, offset: usize, limit: Option<usize>) -> String {
    let lines: Vec<&str> = content.split_inclusive('\n').collect();
    let total = lines.len();
    if total == 0 {
        return format!("{handle}: (empty output)");
    }
    if offset >= total {
        return format!("{handle} has {total} lines; offset {offset} is past the end");
    }
    let limit = limit.unwrap_or(RECALL_PAGE_LINES).max(1);
    let mut body = String::new();
    let mut end = offset;
    for line in lines.iter().skip(offset).take(limit) {
        if !body.is_empty() && body.len() + line.len() > RECALL_PAGE_BYTES {
            break;
        }
        body.push_str(line);
        end += 1;
    }
    if body.len() > RECALL_PAGE_BYTES {
        let mut cut = RECALL_PAGE_BYTES;
        while !body.is_char_boundary(cut) {
            cut -= 1;
        }
        body.truncate(cut);
        body.push_str("\n[line cut at 64 KiB]");
    }
    let mut out = if offset == 0 && end == total {
        format!("{handle} ({total} lines, exact):\n")
    } else {
        format!("{handle} lines {}-{end} of {total} (exact):\n", offset + 1)
    };
    out.push_str(&body);
    if end < total {
        out.push_str(&format!(
            "\n[{} more lines: recall {{\"handle\": \"{handle}\", \"offset\": {end}}}]",
            total - end
        ));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn whole_content_comes_back_exactly() {
        let content = "line one\nline two\nno newline at end";
        let out = page("shell#4", content, 0, None);
        assert_eq!(out, format!("shell#4 (3 lines, exact):\n{content}"));
    }

    #[test]
    fn pages_cover_everything_once() {
        let content: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let first = page("shell#4", &content, 0, None);
        assert!(first.starts_with("shell#4 lines 1-400 of 1000 (exact):\nline 0\n"));
        assert!(first.ends_with(
            "line 399\n\n[600 more lines: recall {\"handle\": \"shell#4\", \"offset\": 400}]"
        ));
        let mut rebuilt = String::new();
        let mut offset = 0;
        while offset < 1000 {
            let out = page("h#1", &content, offset, Some(333));
            let body_start = out.find('\n').unwrap() + 1;
            let body = match out.find("\n[") {
                Some(i) if i >= body_start => &out[body_start..i],
                _ => &out[body_start..],
            };
            rebuilt.push_str(body);
            offset += 333;
        }
        assert_eq!(rebuilt, content);
        assert!(page("h#1", &content, 5000, None).contains("past the end"));
    }

    #[test]
    fn pages_are_bounded_in_bytes() {
        let content = format!("{}\n", "x".repeat(200_000));
        let out = page("h#1", &content, 0, None);
        assert!(out.len() < RECALL_PAGE_BYTES + 200);
        assert!(out.contains("[line cut at 64 KiB]"));
    }
}
