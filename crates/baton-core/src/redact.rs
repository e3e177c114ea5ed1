/// Replaces known secret values (API keys, tokens) with a marker before text reaches the
/// journal, logs or event stream.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

/// Shorter values would redact ordinary words; no real key is this short.
const MIN_SECRET_LEN: usize = 8;

impl Redactor {
    /// Redacts each value and the forms a command can turn it into without knowing it: reversed,
    /// hex (either case), and base64 / base64url at every alignment in the encoded stream.
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .filter(|s| s.len() >= MIN_SECRET_LEN)
            .flat_map(|s| encodings(&s))
            .filter(|s| s.len() >= MIN_SECRET_LEN)
            .collect();
        // Longest first, so a secret containing another is replaced whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Redactor { secrets }
    }

    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), "[REDACTED]");
            }
        }
        out
    }

    /// For text read in pieces (a long line of a command's output): how many bytes at the end
    /// of `text` must wait for the next piece because a secret (in any of its forms) could
    /// continue there. Redacting and showing the rest now cannot leak part of a secret: no
    /// form found in `text` is cut, and none can start in what is shown and end after it.
    pub fn hold_back(&self, text: &str) -> usize {
        let longest = self.secrets.first().map_or(0, String::len);
        let mut cut = text.len().saturating_sub(longest.saturating_sub(1));
        // Moving the cut back to a form's start can cut another one: repeat until none is.
        loop {
            let straddling = self.secrets.iter().find_map(|form| {
                let from = floor_char_boundary(text, cut.saturating_sub(form.len()));
                text[from..]
                    .match_indices(form.as_str())
                    .map(|(at, _)| from + at)
                    .find(|&start| start < cut && start + form.len() > cut)
            });
            match straddling {
                Some(start) => cut = start,
                None => break,
            }
        }
        text.len() - floor_char_boundary(text, cut)
    }
}

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// `secret` and what it becomes when a command encodes it.
///
/// Base64 turns each 3-byte group into 4 characters, so how a secret inside a longer text is
/// encoded depends on its offset modulo 3. For each of the three offsets the characters that
/// encode whole groups of the secret's own bytes are the same in every text; those are what is
/// redacted (the at most two bytes at either end that share a group with their neighbours stay).
fn encodings(secret: &str) -> Vec<String> {
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let bytes = secret.as_bytes();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut forms = vec![
        secret.to_string(),
        secret.chars().rev().collect(),
        hex.to_ascii_uppercase(),
        hex,
    ];
    for shift in 0..3 {
        let Some(rest) = bytes.get(shift..) else {
            continue;
        };
        let whole = &rest[..rest.len() / 3 * 3];
        for engine in [STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
            forms.push(engine.encode(whole));
        }
    }
    forms
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::{STANDARD, URL_SAFE};

    const KEY: &str = "sk-proj-Abc123Def456Ghi789";

    /// Shows `text` in pieces of `size` bytes the way a streamer does: each piece but what
    /// `hold_back` keeps is redacted and shown.
    fn streamed(r: &Redactor, text: &str, size: usize) -> String {
        let (mut shown, mut pending) = (String::new(), String::new());
        let mut rest = text;
        while !rest.is_empty() {
            let take = floor_char_boundary(rest, size.max(1))
                .max(rest.chars().next().map_or(0, char::len_utf8));
            pending.push_str(&rest[..take]);
            rest = &rest[take..];
            let keep = if rest.is_empty() {
                0
            } else {
                r.hold_back(&pending)
            };
            let now = pending.len() - keep;
            shown.push_str(&r.redact(&pending[..now]));
            pending.drain(..now);
        }
        shown + &r.redact(&pending)
    }

    #[test]
    fn a_secret_read_in_pieces_is_redacted_wherever_the_pieces_end() {
        let r = Redactor::new([KEY.to_string(), "another-secret-value".to_string()]);
        let text = format!(
            "{}{KEY}é{}another-secret-value{KEY}",
            "a".repeat(70),
            "b".repeat(33)
        );
        let whole = r.redact(&text);
        assert!(!whole.contains(KEY));
        for size in 1..text.len() + 2 {
            assert_eq!(streamed(&r, &text, size), whole, "pieces of {size}");
        }
        assert_eq!(Redactor::default().hold_back("anything"), 0);
    }

    #[test]
    fn encoded_and_reversed_forms_are_redacted_wherever_they_sit() {
        let r = Redactor::new([KEY.to_string()]);
        // What `echo $KEY | base64` and friends print, with the key at every alignment.
        for prefix in ["", "x", "xy", "xyz", "Authorization: Bearer "] {
            let text = format!("{prefix}{KEY}\n");
            for encoded in [
                STANDARD.encode(&text),
                URL_SAFE.encode(&text),
                text.bytes().map(|b| format!("{b:02x}")).collect::<String>(),
                text.bytes().map(|b| format!("{b:02X}")).collect::<String>(),
                text.chars().rev().collect::<String>(),
            ] {
                let shown = r.redact(&encoded);
                assert!(
                    shown.contains("[REDACTED]"),
                    "{prefix:?}: {encoded} → {shown}"
                );
                // Decoding what is left gives at most a few bytes of the key.
                if let Ok(decoded) = STANDARD.decode(shown.replace("[REDACTED]", "")) {
                    let decoded = String::from_utf8_lossy(&decoded);
                    assert!(!decoded.contains(&KEY[..6]), "{decoded}");
                }
            }
        }
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        let r = Redactor::new([KEY.to_string()]);
        let text = "cargo test: 12 passed; base64 of hello is aGVsbG8=; 68656c6c6f";
        assert_eq!(r.redact(text), text);
    }

    #[test]
    fn replaces_every_occurrence_and_ignores_short_values() {
        let r = Redactor::new(["sk-abcdefgh123".to_string(), "abc".to_string()]);
        assert_eq!(
            r.redact("key=sk-abcdefgh123 again sk-abcdefgh123 abc"),
            "key=[REDACTED] again [REDACTED] abc"
        );
    }

    #[test]
    fn longer_secret_wins_over_its_prefix() {
        let r = Redactor::new([
            "token-12345678".to_string(),
            "token-12345678-extended".to_string(),
        ]);
        assert_eq!(r.redact("x token-12345678-extended y"), "x [REDACTED] y");
    }
}
