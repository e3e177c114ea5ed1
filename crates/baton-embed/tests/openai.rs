//! The OpenAI-compatible client against a scripted server, following OpenAI's API reference
//! for POST /v1/embeddings.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use baton_embed::{
    EmbedError, Embedder, Metered, OpenAiEmbedder, OpenAiEmbedderConfig, Purpose, RetryPolicy,
};
use serde_json::json;
use wiremock::matchers::{body_partial_json, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn client(server: &MockServer) -> OpenAiEmbedder {
    let mut config =
        OpenAiEmbedderConfig::new(format!("{}/v1", server.uri()), "text-embedding-3-small");
    config.api_key = Some("sk-test".into());
    config.dimensions = Some(3);
    config.batch_size = 2;
    OpenAiEmbedder::new(config).unwrap()
}

fn answer(vectors: &[(usize, [f32; 3])], tokens: u64) -> serde_json::Value {
    json!({
        "object": "list",
        "data": vectors.iter().map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v})).collect::<Vec<_>>(),
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens}
    })
}

#[tokio::test]
async fn sends_the_documented_body_and_orders_by_index() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .and(header("authorization", "Bearer sk-test"))
        .and(body_partial_json(json!({
            "model": "text-embedding-3-small",
            "input": ["alpha", "beta"],
            "encoding_format": "float",
            "dimensions": 3
        })))
        // Out of order on purpose: `index` says which input a vector belongs to.
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(answer(&[(1, [0.0, 2.0, 0.0]), (0, [3.0, 0.0, 4.0])], 7)),
        )
        .expect(1)
        .mount(&server)
        .await;
    let out = client(&server)
        .embed(&["alpha".into(), "beta".into()], Purpose::Document)
        .await
        .unwrap();
    assert_eq!(out.vectors[0], [0.6, 0.0, 0.8], "normalised, input 0 first");
    assert_eq!(out.vectors[1], [0.0, 1.0, 0.0]);
    assert_eq!(out.input_tokens, 7);
}

#[tokio::test]
async fn metered_batches_retries_rate_limits_and_counts() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "0")
                .set_body_json(json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}})),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(answer(&[(0, [1.0, 0.0, 0.0]), (1, [0.0, 1.0, 0.0])], 10)),
        )
        .mount(&server)
        .await;
    let metered = Metered::new(Arc::new(client(&server)))
        .with_retry(RetryPolicy {
            base_delay: Duration::from_millis(1),
            ..RetryPolicy::default()
        })
        .with_price_per_mtok(0.02);
    let texts: Vec<String> = ["a", "b", "c", "d"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let vectors = metered.embed_all(&texts, Purpose::Document).await.unwrap();
    assert_eq!(vectors.len(), 4);
    let totals = metered.totals();
    assert_eq!(
        (
            totals.calls,
            totals.inputs,
            totals.input_tokens,
            totals.retries
        ),
        (2, 4, 20, 1)
    );
    assert!((totals.cost_usd - 20.0 * 0.02 / 1e6).abs() < 1e-12);
}

#[tokio::test]
async fn auth_failures_are_permanent_and_bad_answers_are_named() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}})))
        .expect(1)
        .mount(&server)
        .await;
    let metered = Metered::new(Arc::new(client(&server)));
    let err = metered
        .embed_all(&["x".into()], Purpose::Query)
        .await
        .unwrap_err();
    assert!(!err.is_retryable(), "{err}");
    assert!(err.to_string().contains("Incorrect API key"), "{err}");

    let short = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer(&[(0, [1.0, 0.0, 0.0])], 1)))
        .mount(&short)
        .await;
    let err = client(&short)
        .embed(&["x".into(), "y".into()], Purpose::Document)
        .await
        .unwrap_err();
    assert!(
        matches!(err, EmbedError::Server(_))
            && err.to_string().contains("asked for 2 embeddings, got 1"),
        "{err}"
    );
}

/// llama.cpp's Python server answers a model without a pooling layer with one vector per
/// token (seen against llama-cpp-python 0.3.36 and SmolLM2): they are mean-pooled.
#[tokio::test]
async fn per_token_vectors_are_mean_pooled() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list",
            "data": [{"object": "embedding", "index": 0, "embedding": [[1.0, 0.0, 3.0], [3.0, 0.0, 5.0]]}],
            "model": "smollm2",
            "usage": {"prompt_tokens": 2, "total_tokens": 2}
        })))
        .mount(&server)
        .await;
    let out = client(&server)
        .embed(&["hi".into()], Purpose::Document)
        .await
        .unwrap();
    // The mean (2, 0, 4), normalised.
    let norm = (4.0f32 + 16.0).sqrt();
    assert_eq!(out.vectors[0], [2.0 / norm, 0.0, 4.0 / norm]);
}

/// A held embedder sends nothing and says why; `go_on` ends the hold. `embed_prefix` keeps
/// the batches paid for before a failure.
#[tokio::test]
async fn a_hold_starts_no_request_and_a_prefix_keeps_what_was_paid_for() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .and(body_partial_json(json!({"input": ["a", "b"]})))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(answer(&[(0, [1.0, 0.0, 0.0]), (1, [0.0, 1.0, 0.0])], 4)),
        )
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .and(body_partial_json(json!({"input": ["c"]})))
        .respond_with(ResponseTemplate::new(401).set_body_json(
            json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}}),
        ))
        .mount(&server)
        .await;
    let metered = Metered::new(Arc::new(client(&server)));
    let texts: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();

    metered.hold();
    let held = metered.embed_all(&texts, Purpose::Document).await;
    assert!(matches!(held, Err(EmbedError::Held)), "{held:?}");
    assert!(server.received_requests().await.unwrap().is_empty());

    metered.go_on();
    let (vectors, error) = metered.embed_prefix(&texts, Purpose::Document).await;
    assert_eq!(vectors.len(), 2, "the first batch is kept");
    assert!(matches!(error, Some(EmbedError::Server(_))), "{error:?}");
    assert_eq!(metered.totals().inputs, 2);
}
