//! What is embedded for a chunk, and the key its vector is stored under.
//!
//! The two live together because the key names the layout: the index counts and loads vectors
//! by key (`index.rs`, `matrix.rs`) and the embedder's pass writes them (`vectors.rs`), so all of
//! them share one definition here, and a change of the embedded text cannot forget the key.

/// Characters of a chunk that are embedded (models truncate long inputs anyway; MiniLM at 256
/// tokens, OpenAI's at 8,192).
const MAX_EMBED_CHARS: usize = 8_000;

/// How [`embed_input`] builds the text it embeds. Vectors are stored (and shared through a
/// [`crate::VectorCache`]) under the model id *and* this, so that vectors of an older input
/// layout are never mixed with new ones: changing `embed_input` means changing this.
const INPUT_LAYOUT: &str = "path-symbol-code";

/// The key vectors of `model` are stored under: the model id and the input layout.
pub(crate) fn vector_key(model: &str) -> String {
    format!("{model}#{INPUT_LAYOUT}")
}

/// The text embedded for a chunk: its path and symbol (when it has one), then its code. The
/// path says what a chunk belongs to (`requests/sessions.py` for `merge_setting`); measured by
/// `cargo bench -p baton-index --bench retrieval`, it raised MiniLM's recall@5 on the concept
/// queries from 85.7% to 90.5%.
pub(crate) fn embed_input(path: &str, symbol: Option<&str>, text: &str) -> String {
    let body: String = text.chars().take(MAX_EMBED_CHARS).collect();
    match symbol {
        Some(symbol) => format!("{path}: {symbol}\n{body}"),
        None => format!("{path}\n{body}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_text_names_its_file_and_definition() {
        assert_eq!(
            embed_input("src/a.rs", Some("Ledger::transfer"), "fn transfer() {}"),
            "src/a.rs: Ledger::transfer\nfn transfer() {}"
        );
        assert_eq!(embed_input("README.md", None, "# hi"), "README.md\n# hi");
        let long = "x".repeat(MAX_EMBED_CHARS + 10);
        assert_eq!(
            embed_input("a", None, &long).len(),
            "a\n".len() + MAX_EMBED_CHARS
        );
    }

    #[test]
    fn vectors_are_keyed_by_model_and_input_layout() {
        assert_eq!(vector_key("local/m"), format!("local/m#{INPUT_LAYOUT}"));
        assert_ne!(vector_key("local/m"), vector_key("local/n"));
    }
}
