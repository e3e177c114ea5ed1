//! Handles name journaled content the prompt no longer shows in full (masked tool outputs,
//! compacted messages), so the model can ask for it back with `recall`.
//!
//! A handle is `KIND#SEQ`: `SEQ` is the journal sequence number of the event holding the
//! content, `KIND` says what it is — the tool's name for a tool output (`shell#42`), `model` for
//! an assistant message, `note` for a harness note, `summary` for a compaction summary. The
//! sequence number alone identifies the content; the kind makes handles readable and lets
//! `recall` catch a mistyped one.

/// Kind of an assistant message's handle.
pub const MODEL_KIND: &str = "model";
/// Kind of a harness note's handle.
pub const NOTE_KIND: &str = "note";
/// Kind of a compaction summary's handle.
pub const SUMMARY_KIND: &str = "summary";

pub fn handle(kind: &str, seq: u64) -> String {
    format!("{kind}#{seq}")
}

/// Splits `KIND#SEQ`; `None` if the text is not a handle. Surrounding whitespace and quotes (as
/// a model may copy them from the placeholder) are ignored.
pub fn parse_handle(text: &str) -> Option<(&str, u64)> {
    let text = text
        .trim()
        .trim_matches(|c| c == '"' || c == '\'' || c == '`');
    let (kind, seq) = text.rsplit_once('#')?;
    if kind.is_empty() || seq.is_empty() || !seq.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((kind, seq.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        assert_eq!(parse_handle(&handle("shell", 42)), Some(("shell", 42)));
        assert_eq!(parse_handle(" \"read_file#7\" "), Some(("read_file", 7)));
        // A kind may itself contain '#': the last one separates the sequence number.
        assert_eq!(parse_handle("a#b#3"), Some(("a#b", 3)));
    }

    #[test]
    fn rejects_non_handles() {
        for text in [
            "",
            "shell",
            "shell#",
            "#4",
            "shell#x",
            "shell#-1",
            "shell#99999999999999999999999",
        ] {
            assert_eq!(parse_handle(text), None, "{text}");
        }
    }
}
