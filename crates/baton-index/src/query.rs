//! Turning arbitrary text (as a model sends it) into safe FTS5 query expressions, the way
//! `search_memory` searches: the workspace's text ([`crate::CodeIndex::search_text`]) and, in
//! baton-memory, the run's journal — one rule for both, so a query means the same in each.
//!
//! The text is never passed to FTS5's query syntax as is: operators (`AND`, `OR`, `NOT`,
//! `NEAR`), column filters (`:`), prefixes (`*`), `^`, `-`, parentheses and quotes in it are
//! plain text. It is split on whitespace into *chunks*; each chunk is reduced to its words
//! (maximal runs of letters, digits and `_`, the same characters the index tokenizer keeps
//! together) and becomes one quoted FTS5 phrase, so `std::fs::read` must match the words
//! `std fs read` next to each other, as code writes them. Two expressions come out:
//!
//! - `all`: every chunk's phrase must match (`"a" AND "b c"`), the precise query tried first;
//! - `any`: any single word may match (`"a" OR "b" OR "c"`), the fallback when `all` finds
//!   nothing. `None` when it would be the same query as `all` (a single word).
//!
//! Words are double-quoted with any `"` doubled (they cannot contain one, but the quoting does
//! not rely on that). Control characters are dropped. At most [`MAX_WORDS`] words are used and
//! each is cut to [`MAX_WORD_CHARS`] characters, bounding the cost of a query.

/// Words beyond this many are ignored.
pub const MAX_WORDS: usize = 32;
/// Longer words are cut to this many characters.
pub const MAX_WORD_CHARS: usize = 128;

/// The FTS5 expressions for one query text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FtsQuery {
    pub all: String,
    pub any: Option<String>,
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn quote(word: &str) -> String {
    format!("\"{}\"", word.replace('"', "\"\""))
}

/// The expressions for `text`; `None` when it has no word to search for (empty, whitespace or
/// punctuation only), which a caller reports as the model's mistake, not a failure.
pub fn to_fts(text: &str) -> Option<FtsQuery> {
    let mut phrases: Vec<String> = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut budget = MAX_WORDS;
    for chunk in text.split(|c: char| c.is_whitespace() || c.is_control()) {
        if budget == 0 {
            break;
        }
        let chunk_words: Vec<String> = chunk
            .split(|c: char| !is_word_char(c))
            .filter(|w| !w.is_empty())
            .take(budget)
            .map(|w| w.chars().take(MAX_WORD_CHARS).collect())
            .collect();
        if chunk_words.is_empty() {
            continue;
        }
        budget -= chunk_words.len();
        phrases.push(quote(&chunk_words.join(" ")));
        for word in chunk_words {
            // FTS5 folds case (and, with `remove_diacritics`, accents) itself; this only avoids
            // repeating an identical word in the OR query.
            if !words
                .iter()
                .any(|w| w.to_lowercase() == word.to_lowercase())
            {
                words.push(word);
            }
        }
    }
    if phrases.is_empty() {
        return None;
    }
    let all = phrases.join(" AND ");
    let any = words
        .iter()
        .map(|w| quote(w))
        .collect::<Vec<_>>()
        .join(" OR ");
    let any = (any != all).then_some(any);
    Some(FtsQuery { all, any })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fts(text: &str) -> FtsQuery {
        to_fts(text).unwrap()
    }

    #[test]
    fn empty_and_punctuation_only_queries_are_empty() {
        for text in ["", "   ", "\t\n", "***", "\"\"", "- : ( ) ^ *", "\0\u{1}"] {
            assert!(to_fts(text).is_none(), "{text:?}");
        }
    }

    #[test]
    fn single_word_has_no_fallback() {
        assert_eq!(
            fts("  snake_case_name "),
            FtsQuery {
                all: "\"snake_case_name\"".into(),
                any: None
            }
        );
    }

    #[test]
    fn chunks_become_phrases_and_words_the_fallback() {
        assert_eq!(
            fts("std::fs::read NEAR(x) -y"),
            FtsQuery {
                all: "\"std fs read\" AND \"NEAR x\" AND \"y\"".into(),
                any: Some("\"std\" OR \"fs\" OR \"read\" OR \"NEAR\" OR \"x\" OR \"y\"".into()),
            }
        );
    }

    #[test]
    fn operators_and_quotes_are_plain_words() {
        assert_eq!(
            fts("\"a\" OR b*"),
            FtsQuery {
                all: "\"a\" AND \"OR\" AND \"b\"".into(),
                any: Some("\"a\" OR \"OR\" OR \"b\"".into()),
            }
        );
    }

    #[test]
    fn repeated_words_appear_once_in_the_fallback() {
        assert_eq!(fts("Foo foo").any.as_deref(), Some("\"Foo\""));
    }

    #[test]
    fn word_count_and_length_are_capped() {
        let long = "x".repeat(1000);
        assert_eq!(fts(&long).all.len(), MAX_WORD_CHARS + 2);
        let many: String = (0..100).map(|i| format!("w{i} ")).collect();
        assert_eq!(fts(&many).all.matches(" AND ").count(), MAX_WORDS - 1);
    }
}
