//! The error of a model call and its classification from what the server said.
//!
//! Classification is pure (status, headers, body text in; [`ModelError`] out) so that retry and
//! pause policy can be tested without a server.

use std::time::{Duration, SystemTime};

use baton_core::ErrorClass;
use reqwest::header::HeaderMap;

use crate::retry_after::retry_after_from_headers;

/// How much of a server's error body ends up in an error message: enough to read the server's
/// explanation, short enough for a journal line.
pub const BODY_EXCERPT_CHARS: usize = 500;

/// A failed model call, classified so callers can decide between retrying, pausing and failing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {message}", class_phrase(.class), status_suffix(.status))]
pub struct ModelError {
    pub class: ErrorClass,
    pub message: String,
    /// HTTP status of the response, when the failure came from one.
    pub status: Option<u16>,
    /// How long the server asked us to wait before trying again.
    pub retry_after: Option<Duration>,
}

impl ModelError {
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        ModelError {
            class,
            message: message.into(),
            status: None,
            retry_after: None,
        }
    }

    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    pub fn with_retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = Some(retry_after);
        self
    }

    pub fn is_retryable(&self) -> bool {
        self.class.is_retryable()
    }
}

fn class_phrase(class: &ErrorClass) -> &'static str {
    match class {
        ErrorClass::RateLimited => "rate limited by the server",
        ErrorClass::Overloaded => "the server is overloaded",
        ErrorClass::Transient => "transient failure",
        ErrorClass::ContextOverflow => "the request does not fit the model's context window",
        ErrorClass::Auth => "authentication failed",
        ErrorClass::InvalidRequest => "the request was rejected as invalid",
        ErrorClass::QuotaExhausted => "the account's quota is exhausted",
        ErrorClass::BadResponse => "the server's response could not be understood",
        ErrorClass::Unreachable => "the server could not be reached",
    }
}

fn status_suffix(status: &Option<u16>) -> String {
    status.map(|s| format!(" (HTTP {s})")).unwrap_or_default()
}

/// Classifies a non-2xx response. `body` is the (possibly truncated) response body as text.
pub fn classify_http_error(status: u16, headers: &HeaderMap, body: &str) -> ModelError {
    classify_http_error_at(status, headers, body, SystemTime::now())
}

/// [`classify_http_error`] with an explicit clock, for `Retry-After` dates.
pub fn classify_http_error_at(
    status: u16,
    headers: &HeaderMap,
    body: &str,
    now: SystemTime,
) -> ModelError {
    let info = ErrorInfo::from_body(body);
    let class = class_for_status(status, &info);
    http_error(status, class, body, hint_for(status, class), || {
        retry_after_from_headers(headers, status, now)
    })
}

/// A non-2xx response's error once a dialect has classified it: the body's excerpt with the
/// dialect's hint, and when to retry — asked only for a retryable class: a wait asked for on a
/// permanent failure means nothing, retrying will not help.
pub(crate) fn http_error(
    status: u16,
    class: ErrorClass,
    body: &str,
    hint: Option<&str>,
    retry_after: impl FnOnce() -> Option<std::time::Duration>,
) -> ModelError {
    let mut message = excerpt(body);
    if let Some(hint) = hint {
        message.push_str(" (hint: ");
        message.push_str(hint);
        message.push(')');
    }
    let retry_after = if class.is_retryable() {
        retry_after()
    } else {
        None
    };
    ModelError {
        class,
        message,
        status: Some(status),
        retry_after,
    }
}

/// Classifies an error object a server sent inside a 2xx response (a whole body or an SSE chunk),
/// e.g. `{"message": "...", "type": "server_error", "code": 502}`. `raw` is the text it came
/// from, for the message.
pub fn classify_error_payload(error: &serde_json::Value, raw: &str) -> ModelError {
    let info = ErrorInfo::from_error_value(error);
    if let Some(status) = info.numeric_code {
        // Servers that relay an upstream failure mid-stream put its HTTP status in `code`.
        return ModelError::new(class_for_status(status, &info), excerpt(raw)).with_status(status);
    }
    let class = if info.is_quota() {
        ErrorClass::QuotaExhausted
    } else if info.mentions_context_overflow() {
        ErrorClass::ContextOverflow
    } else if info.has_kind("rate_limit") {
        ErrorClass::RateLimited
    } else if info.has_kind("overloaded") {
        ErrorClass::Overloaded
    } else if info.has_kind("auth") || info.has_kind("api_key") || info.has_kind("permission") {
        ErrorClass::Auth
    } else if info.has_kind("invalid_request") {
        ErrorClass::InvalidRequest
    } else {
        // An unlabelled failure after the server accepted the request is usually the server's
        // own trouble (an upstream dropped, a worker died), so sending it again may work.
        ErrorClass::Transient
    };
    ModelError::new(class, excerpt(raw))
}

/// Classifies a failure below HTTP: refused or reset connections, timeouts, TLS.
pub fn classify_transport_error(err: &reqwest::Error) -> ModelError {
    // reqwest's own message is generic ("error sending request"); the cause is in the chain.
    let mut message = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    if err.is_builder() {
        // The request could not even be built (a bad URL): sending it again cannot help.
        return ModelError::new(ErrorClass::InvalidRequest, message);
    }
    if err.is_timeout() {
        return ModelError::new(ErrorClass::Transient, format!("timed out: {message}"));
    }
    if err.is_connect() {
        // Refused, unknown host, TLS handshake: nothing answered at all.
        return ModelError::new(
            ErrorClass::Unreachable,
            format!("could not connect: {message}"),
        );
    }
    ModelError::new(
        ErrorClass::Transient,
        format!("connection failed: {message}"),
    )
}

fn class_for_status(status: u16, info: &ErrorInfo) -> ErrorClass {
    match status {
        401 | 403 => ErrorClass::Auth,
        // OpenRouter and others answer 402 when the account has no credit left.
        402 => ErrorClass::QuotaExhausted,
        429 if info.is_quota() => ErrorClass::QuotaExhausted,
        429 => ErrorClass::RateLimited,
        // A 413 is a request too large for the server; the cure is the same as for an explicit
        // context overflow (send less), so it is classified as one even without the wording.
        413 => ErrorClass::ContextOverflow,
        400 | 422 if info.mentions_context_overflow() => ErrorClass::ContextOverflow,
        408 | 409 | 425 => ErrorClass::Transient,
        503 | 529 => ErrorClass::Overloaded,
        500..=599 => ErrorClass::Transient,
        400..=499 => ErrorClass::InvalidRequest,
        // A redirect that was not followed or an informational status: the endpoint is
        // misconfigured, which waiting will not fix.
        _ => ErrorClass::InvalidRequest,
    }
}

fn hint_for(status: u16, class: ErrorClass) -> Option<&'static str> {
    match (status, class) {
        (_, ErrorClass::Auth) => Some("check the API key and that it may use this model"),
        (404, _) => {
            Some("check the base URL (OpenAI-compatible servers usually end in /v1) and the model")
        }
        _ => None,
    }
}

/// The fields of a server's error object that classification looks at, lowercased.
#[derive(Default)]
struct ErrorInfo {
    code: String,
    kind: String,
    message: String,
    numeric_code: Option<u16>,
    /// The whole body, lowercased, for bodies that are not the usual JSON shape.
    text: String,
}

impl ErrorInfo {
    fn from_body(body: &str) -> Self {
        let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
        let mut info = match &parsed {
            // `{"error": {...}}` (OpenAI), `{"error": "text"}` (some proxies) or a bare object.
            Some(value) => match value.get("error") {
                Some(error) => ErrorInfo::from_error_value(error),
                None => ErrorInfo::from_error_value(value),
            },
            None => ErrorInfo::default(),
        };
        info.text = body.to_lowercase();
        info
    }

    fn from_error_value(error: &serde_json::Value) -> Self {
        if let Some(text) = error.as_str() {
            let lower = text.to_lowercase();
            return ErrorInfo {
                message: lower.clone(),
                text: lower,
                ..ErrorInfo::default()
            };
        }
        let field = |name: &str| match error.get(name) {
            Some(serde_json::Value::String(s)) => s.to_lowercase(),
            Some(serde_json::Value::Number(n)) => n.to_string(),
            _ => String::new(),
        };
        let code = field("code");
        let numeric_code = code.parse::<u16>().ok().filter(|c| (100..=599).contains(c));
        ErrorInfo {
            kind: field("type"),
            message: field("message"),
            numeric_code,
            code,
            text: error.to_string().to_lowercase(),
        }
    }

    fn is_quota(&self) -> bool {
        self.code == "insufficient_quota"
            || self.kind == "insufficient_quota"
            || self.message.contains("exceeded your current quota")
    }

    fn has_kind(&self, needle: &str) -> bool {
        self.code.contains(needle) || self.kind.contains(needle)
    }

    fn mentions_context_overflow(&self) -> bool {
        // Wordings of OpenAI, vLLM, llama.cpp, Anthropic-style and other compatible servers.
        const PHRASES: [&str; 9] = [
            "context_length_exceeded",
            "maximum context length",
            "context length",
            "context window",
            "exceed_context_size",
            "context size",
            "too many tokens",
            "prompt is too long",
            "input is too long",
        ];
        PHRASES.iter().any(|p| self.text.contains(p))
    }
}

/// A one-line excerpt of a server body: whitespace collapsed, at most [`BODY_EXCERPT_CHARS`].
pub fn excerpt(body: &str) -> String {
    let mut out = String::new();
    let mut chars = 0;
    for word in body.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
            chars += 1;
        }
        for c in word.chars() {
            if chars >= BODY_EXCERPT_CHARS {
                out.push('…');
                return out;
            }
            out.push(c);
            chars += 1;
        }
    }
    if out.is_empty() {
        out.push_str("(empty body)");
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "error_tests.rs"]
mod tests;
