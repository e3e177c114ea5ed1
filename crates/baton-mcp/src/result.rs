//! An MCP tool result as the model reads it: text kept, structured content as JSON, images,
//! audio and resources as a short placeholder (their bytes would only fill the context), capped
//! like shell output, and `isError` results as tool errors.

use baton_core::ToolResult;
use baton_tools::CappedBuffer;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// Bytes of a result kept from its start and from its end, as for shell output.
const HEAD: usize = 32 * 1024;
const TAIL: usize = 32 * 1024;

/// The text of `result` and whether the server said it is an error.
pub fn to_tool_result(result: &CallToolResult) -> ToolResult {
    let mut parts: Vec<String> = result.content.iter().map(block_text).collect();
    // Servers are asked to give structured content as text too, for clients that do not read
    // it (the filesystem server wraps it, the reference server mirrors it): the text is what the
    // model reads; the structured value only when there is no text at all.
    let has_text = result
        .content
        .iter()
        .any(|block| matches!(block, ContentBlock::Text(_)));
    if let (Some(structured), false) = (&result.structured_content, has_text) {
        parts.push(structured.to_string());
    }
    let mut capped = CappedBuffer::new(HEAD, TAIL);
    capped.push(parts.join("\n").as_bytes());
    let text = capped.to_text();
    if result.is_error == Some(true) {
        let text = if text.is_empty() {
            "the tool reported an error without a message".to_owned()
        } else {
            text
        };
        ToolResult::error(text)
    } else {
        ToolResult::success(text)
    }
}

/// Approximate size of base64 data once decoded.
fn decoded_len(base64: &str) -> usize {
    base64.len() / 4 * 3
}

fn block_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::Image(i) => {
            format!("[image: {}, {} bytes]", i.mime_type, decoded_len(&i.data))
        }
        ContentBlock::Audio(a) => {
            format!("[audio: {}, {} bytes]", a.mime_type, decoded_len(&a.data))
        }
        ContentBlock::Resource(r) => match &r.resource {
            ResourceContents::TextResourceContents {
                uri,
                mime_type,
                text,
                ..
            } => format!(
                "[resource: {uri}{}, {} bytes of text]",
                mime_suffix(mime_type.as_deref()),
                text.len()
            ),
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => format!(
                "[resource: {uri}{}, {} bytes]",
                mime_suffix(mime_type.as_deref()),
                decoded_len(blob)
            ),
            // A kind of resource newer than this SDK version knows.
            _ => "[resource]".to_owned(),
        },
        ContentBlock::ResourceLink(link) => format!("[resource link: {}]", link.uri),
        _ => "[content of a kind baton does not show]".to_owned(),
    }
}

fn mime_suffix(mime: Option<&str>) -> String {
    mime.map(|m| format!(" ({m})")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::ToolOutcome;

    fn result(json: serde_json::Value) -> CallToolResult {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn text_is_kept_and_images_are_placeholders() {
        let r = to_tool_result(&result(serde_json::json!({
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "AAAAAAAA", "mimeType": "image/png"},
                {"type": "resource_link", "uri": "file:///a.txt", "name": "a"},
            ]
        })));
        assert_eq!(r.outcome, ToolOutcome::Success);
        assert_eq!(
            r.content,
            "hello\n[image: image/png, 6 bytes]\n[resource link: file:///a.txt]"
        );
    }

    #[test]
    fn structured_content_is_shown_when_there_is_no_text() {
        let alone = to_tool_result(&result(serde_json::json!({
            "content": [], "structuredContent": {"temperature": 22}
        })));
        assert_eq!(alone.content, r#"{"temperature":22}"#);
        let mirrored = to_tool_result(&result(serde_json::json!({
            "content": [{"type": "text", "text": "{\"temperature\": 22}"}],
            "structuredContent": {"temperature": 22}
        })));
        assert_eq!(mirrored.content, "{\"temperature\": 22}");
        let wrapped = to_tool_result(&result(serde_json::json!({
            "content": [{"type": "text", "text": "line\n"}],
            "structuredContent": {"content": "line\n"}
        })));
        assert_eq!(wrapped.content, "line\n");
    }

    #[test]
    fn is_error_results_are_tool_errors() {
        let r = to_tool_result(&result(serde_json::json!({
            "content": [{"type": "text", "text": "no such issue"}], "isError": true
        })));
        assert_eq!(r.outcome, ToolOutcome::Error);
        assert_eq!(r.content, "no such issue");
        let silent = to_tool_result(&result(serde_json::json!({"content": [], "isError": true})));
        assert!(silent.content.contains("without a message"));
    }

    #[test]
    fn huge_results_are_capped() {
        let big = "x".repeat(1_000_000);
        let r = to_tool_result(&result(serde_json::json!({
            "content": [{"type": "text", "text": big}]
        })));
        assert!(r.content.len() < 70_000, "{}", r.content.len());
        assert!(r.content.contains("bytes cut"));
    }
}
