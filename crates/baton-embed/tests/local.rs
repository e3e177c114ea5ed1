//! The in-process MiniLM on the real model from the PyPI package (scripts/embed-model.sh).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use baton_embed::{Embedder, LocalEmbedder, MINILM_DIMENSIONS, MINILM_MODEL_ID, Purpose, dot};

fn load() -> LocalEmbedder {
    let dir = baton_embed::testing::model_dir().unwrap();
    LocalEmbedder::load(&dir).unwrap()
}

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test]
async fn similar_texts_are_near_and_unrelated_ones_far() {
    let model = load();
    assert!(
        model.model_id().starts_with(MINILM_MODEL_ID),
        "{}",
        model.model_id()
    );
    assert_eq!(model.dimensions(), MINILM_DIMENSIONS);
    let out = model
        .embed(
            &texts(&[
                "retry the request after a delay when the server is overloaded",
                "back off and send the call again if the service is busy",
                "the recipe needs two cups of flour and an egg",
            ]),
            Purpose::Document,
        )
        .await
        .unwrap();
    assert_eq!(out.vectors.len(), 3);
    for v in &out.vectors {
        assert_eq!(v.len(), MINILM_DIMENSIONS);
        assert!((dot(v, v) - 1.0).abs() < 1e-4, "unit length");
    }
    let paraphrase = dot(&out.vectors[0], &out.vectors[1]);
    let unrelated = dot(&out.vectors[0], &out.vectors[2]);
    assert!(paraphrase > 0.5, "paraphrase {paraphrase}");
    assert!(unrelated < 0.2, "unrelated {unrelated}");
    assert!(out.input_tokens > 20, "tokens {}", out.input_tokens);
}

#[tokio::test]
async fn a_text_gets_the_same_vector_alone_or_in_a_padded_batch() {
    let model = load();
    let alone = model
        .embed(&texts(&["fn main() {}"]), Purpose::Query)
        .await
        .unwrap();
    let batch = model
        .embed(
            &texts(&[
                "a much longer text that forces the short one to be padded in its batch",
                "fn main() {}",
            ]),
            Purpose::Document,
        )
        .await
        .unwrap();
    let same = dot(&alone.vectors[0], &batch.vectors[1]);
    assert!(same > 0.9999, "padding changed the vector: cosine {same}");
}

#[test]
fn a_directory_without_a_model_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = LocalEmbedder::load(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("config.json") && err.contains(&dir.path().display().to_string()),
        "{err}"
    );
}
