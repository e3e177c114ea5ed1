//! Sub-words of compound identifiers, indexed in their own column so that a search for
//! `balance` also finds `ledger_balance`, `getBalance` and `LEDGER_BALANCE`, while the
//! identifiers themselves stay whole words of the text (and searching `ledger_balance` finds
//! exactly that identifier).

use std::collections::HashSet;

/// The parts of each distinct compound identifier in `text`, space-separated: `ledger_balance
/// parseHTTPResponse x` gives `ledger balance parse HTTP Response`. Each compound is split once
/// per text, so the column says *whether* a text uses a part, not how often.
pub fn subwords(text: &str) -> String {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut out = String::new();
    for token in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        if token.len() < 3 || !seen.insert(token) {
            continue;
        }
        let parts = split_identifier(token);
        if parts.len() < 2 {
            continue;
        }
        for part in parts {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(part);
        }
    }
    out
}

/// Splits at `_` and at case changes: `parseHTTPResponse` → `parse HTTP Response`.
fn split_identifier(token: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    for piece in token.split('_').filter(|p| !p.is_empty()) {
        let chars: Vec<(usize, char)> = piece.char_indices().collect();
        let mut start = 0;
        for i in 1..chars.len() {
            let (at, c) = chars[i];
            let prev = chars[i - 1].1;
            let next_lower = chars.get(i + 1).is_some_and(|(_, n)| n.is_lowercase());
            // aB → a|B ; ABc → A|Bc
            let boundary = (prev.is_lowercase() && c.is_uppercase())
                || (prev.is_uppercase() && c.is_uppercase() && next_lower);
            if boundary {
                parts.push(&piece[start..at]);
                start = at;
            }
        }
        parts.push(&piece[start..]);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_compounds_once() {
        assert_eq!(
            subwords("ledger_balance parseHTTPResponse x ledger_balance plain"),
            "ledger balance parse HTTP Response"
        );
        assert_eq!(
            subwords("__init__ LEDGER_BALANCE a_b"),
            "LEDGER BALANCE a b"
        );
        assert_eq!(subwords("nothing compound here"), "");
        assert_eq!(subwords("über_straße"), "über straße");
    }
}
