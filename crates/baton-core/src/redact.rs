/// Replaces known secret values (API keys, tokens) with a marker before text reaches the
/// journal, logs or event stream.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

/// Shorter values would redact ordinary words; no real key is this short.
const MIN_SECRET_LEN: usize = 8;

impl Redactor {
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Self {
        let mut secrets: Vec<String> = secrets
            .into_iter()
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
