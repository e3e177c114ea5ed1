use super::*;
use reqwest::header::HeaderValue;

fn no_headers() -> HeaderMap {
    HeaderMap::new()
}

fn openai_error(kind: &str, code: &str, message: &str) -> String {
    serde_json::json!({"error": {"message": message, "type": kind, "code": code, "param": null}})
        .to_string()
}

#[test]
fn classifies_statuses_and_bodies() {
    use ErrorClass::*;
    let ctx = openai_error(
        "invalid_request_error",
        "context_length_exceeded",
        "This model's maximum context length is 8192 tokens.",
    );
    let quota = openai_error(
        "insufficient_quota",
        "insufficient_quota",
        "You exceeded your current quota, please check your plan and billing details.",
    );
    let rate = openai_error(
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for gpt-4o.",
    );
    let llama_ctx = r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}"#;
    let cases: Vec<(u16, String, ErrorClass)> = vec![
        (429, rate.clone(), RateLimited),
        (429, String::new(), RateLimited),
        (429, "Too Many Requests".into(), RateLimited),
        (429, quota.clone(), QuotaExhausted),
        (429, openai_error("insufficient_quota", "", "no money"), QuotaExhausted),
        (429, openai_error("", "insufficient_quota", "no money"), QuotaExhausted),
        (402, "Payment Required".into(), QuotaExhausted),
        (401, openai_error("invalid_request_error", "invalid_api_key", "Incorrect key"), Auth),
        (403, "forbidden".into(), Auth),
        (400, ctx.clone(), ContextOverflow),
        (400, llama_ctx.into(), ContextOverflow),
        (400, r#"{"error":{"message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#.into(), ContextOverflow),
        (400, "Too many tokens in the prompt".into(), ContextOverflow),
        (400, r#"{"object":"error","message":"This model's maximum context length is 2048 tokens. However, you requested 4000 tokens.","type":"BadRequestError","code":400}"#.into(), ContextOverflow),
        (413, ctx.clone(), ContextOverflow),
        (413, "Request Entity Too Large".into(), ContextOverflow),
        (422, ctx, ContextOverflow),
        (400, openai_error("invalid_request_error", "", "Invalid 'messages[2].role'"), InvalidRequest),
        (400, String::new(), InvalidRequest),
        (404, openai_error("invalid_request_error", "model_not_found", "no such model"), InvalidRequest),
        (405, "Method Not Allowed".into(), InvalidRequest),
        (422, r#"{"detail":[{"msg":"field required"}]}"#.into(), InvalidRequest),
        (408, String::new(), Transient),
        (409, String::new(), Transient),
        (425, String::new(), Transient),
        (500, openai_error("server_error", "", "The server had an error"), Transient),
        (502, "<html>Bad Gateway</html>".into(), Transient),
        (504, "Gateway Timeout".into(), Transient),
        (520, String::new(), Transient),
        (599, String::new(), Transient),
        (503, "Service Unavailable".into(), Overloaded),
        (529, r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#.into(), Overloaded),
        // A 429 whose body mentions context is still a rate limit: the status decides first.
        (429, "too many tokens per minute".into(), RateLimited),
        // A 500 mentioning quota is not a quota problem of ours.
        (500, quota, Transient),
        (302, String::new(), InvalidRequest),
        (101, String::new(), InvalidRequest),
    ];
    for (status, body, expected) in cases {
        let err = classify_http_error(status, &no_headers(), &body);
        assert_eq!(err.class, expected, "status {status} body {body:?}");
        assert_eq!(err.status, Some(status));
    }
}

#[test]
fn retry_after_is_kept_for_retryable_errors_only() {
    let mut headers = HeaderMap::new();
    headers.insert("retry-after", HeaderValue::from_static("7"));
    let now = SystemTime::UNIX_EPOCH;
    let limited = classify_http_error_at(429, &headers, "", now);
    assert_eq!(limited.retry_after, Some(Duration::from_secs(7)));
    let overloaded = classify_http_error_at(503, &headers, "", now);
    assert_eq!(overloaded.retry_after, Some(Duration::from_secs(7)));
    let quota = classify_http_error_at(
        429,
        &headers,
        &openai_error("insufficient_quota", "", ""),
        now,
    );
    assert_eq!(quota.class, ErrorClass::QuotaExhausted);
    assert_eq!(quota.retry_after, None);
    let auth = classify_http_error_at(401, &headers, "", now);
    assert_eq!(auth.retry_after, None);
}

#[test]
fn display_is_readable_and_carries_the_server_excerpt() {
    let err = classify_http_error(
        429,
        &no_headers(),
        "{\"error\": {\n  \"message\": \"slow down\"\n}}",
    );
    assert_eq!(
        err.to_string(),
        "rate limited by the server (HTTP 429): {\"error\": { \"message\": \"slow down\" }}"
    );
    let err = classify_http_error(401, &no_headers(), "");
    assert_eq!(
        err.to_string(),
        "authentication failed (HTTP 401): (empty body) (hint: check the API key and that it may \
         use this model)"
    );
    let err = ModelError::new(ErrorClass::Transient, "stream stalled");
    assert_eq!(err.to_string(), "transient failure: stream stalled");
}

#[test]
fn excerpt_is_capped_on_a_char_boundary() {
    let body = "é".repeat(10_000);
    let err = classify_http_error(500, &no_headers(), &body);
    assert_eq!(err.message.chars().count(), BODY_EXCERPT_CHARS + 1);
    assert!(err.message.ends_with('…'));
    let words = "word ".repeat(1_000);
    let text = excerpt(&words);
    assert!(text.chars().count() <= BODY_EXCERPT_CHARS + 1);
    assert_eq!(excerpt("  short \n\t body "), "short body");
}

#[test]
fn classifies_in_band_error_payloads() {
    use ErrorClass::*;
    let cases: Vec<(serde_json::Value, ErrorClass, Option<u16>)> = vec![
        (
            serde_json::json!({"code": 502, "message": "upstream died"}),
            Transient,
            Some(502),
        ),
        (
            serde_json::json!({"code": "429", "message": "slow"}),
            RateLimited,
            Some(429),
        ),
        (
            serde_json::json!({"code": 529, "message": "busy"}),
            Overloaded,
            Some(529),
        ),
        (
            serde_json::json!({"type": "insufficient_quota", "message": "pay"}),
            QuotaExhausted,
            None,
        ),
        (
            serde_json::json!({"code": "context_length_exceeded", "message": "too long"}),
            ContextOverflow,
            None,
        ),
        (
            serde_json::json!({"type": "rate_limit_error", "message": "slow"}),
            RateLimited,
            None,
        ),
        (
            serde_json::json!({"type": "overloaded_error", "message": "busy"}),
            Overloaded,
            None,
        ),
        (
            serde_json::json!({"type": "authentication_error", "message": "who"}),
            Auth,
            None,
        ),
        (
            serde_json::json!({"type": "invalid_request_error", "message": "bad"}),
            InvalidRequest,
            None,
        ),
        (
            serde_json::json!({"type": "server_error", "message": "oops"}),
            Transient,
            None,
        ),
        (serde_json::json!("something broke"), Transient, None),
        (
            serde_json::json!({"code": 99999, "message": "odd"}),
            Transient,
            None,
        ),
    ];
    for (value, expected, status) in cases {
        let raw = value.to_string();
        let err = classify_error_payload(&value, &raw);
        assert_eq!(err.class, expected, "payload {value}");
        assert_eq!(err.status, status, "payload {value}");
        assert_eq!(err.message, excerpt(&raw));
    }
}

#[test]
fn builder_helpers_and_retryability() {
    let err = ModelError::new(ErrorClass::RateLimited, "x")
        .with_status(429)
        .with_retry_after(Duration::from_secs(3));
    assert_eq!(err.status, Some(429));
    assert_eq!(err.retry_after, Some(Duration::from_secs(3)));
    assert!(err.is_retryable());
    assert!(!ModelError::new(ErrorClass::Auth, "x").is_retryable());
}
