//! Classifying Anthropic's failures: HTTP error responses, `error` events inside a stream, and
//! the `anthropic-ratelimit-*-reset` headers that say when a rate limit refills.
//!
//! The crate's generic classifier decides by status first; Anthropic also names the failure in
//! `error.type`, which is more precise than the status (it answers 400 for a missing credit
//! balance, and its stream errors carry no status at all), so a known type wins.

use std::time::{Duration, SystemTime};

use baton_core::ErrorClass;
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::error::{
    classify_error_payload, classify_http_error_at as classify_by_status, excerpt, http_error,
};
use crate::{MAX_HEADER_WAIT, ModelError, retry_after_from_headers};

/// The limits Anthropic reports on every response, each with `-remaining` and `-reset` headers.
const LIMITS: [&str; 4] = ["requests", "tokens", "input-tokens", "output-tokens"];

/// Classifies a non-2xx response of the Messages API. `now` is the clock for `Retry-After` dates
/// and the RFC 3339 reset timestamps.
pub fn classify_http_error_at(
    status: u16,
    headers: &HeaderMap,
    body: &str,
    now: SystemTime,
) -> ModelError {
    let by_status = classify_by_status(status, headers, body, now).class;
    let class = anthropic_error(body)
        .and_then(|error| class_for_type(&error, body))
        .unwrap_or(by_status);
    // Anthropic also says when its rate limits reset, which serves as a wait.
    http_error(status, class, body, hint_for(status, class), || {
        retry_after_from_headers(headers, status, now)
            .or_else(|| rate_limit_reset_wait(headers, status, now))
    })
}

/// Classifies the `error` object of an `error` stream event (or of an error body that arrived
/// with a 2xx status), e.g. `{"type": "overloaded_error", "message": "Overloaded"}`. `raw` is the
/// text it came from, for the message.
pub fn classify_error_event(error: &Value, raw: &str) -> ModelError {
    match class_for_type(error, raw) {
        Some(class) => ModelError::new(class, excerpt(raw)),
        None => classify_error_payload(error, raw),
    }
}

/// The `error` object of an Anthropic error body `{"type": "error", "error": {...}}`.
fn anthropic_error(body: &str) -> Option<Value> {
    let mut value: Value = serde_json::from_str(body).ok()?;
    let error = value.get_mut("error")?.take();
    error.is_object().then_some(error)
}

/// The class Anthropic's `error.type` stands for, when it is one we know.
fn class_for_type(error: &Value, raw: &str) -> Option<ErrorClass> {
    let kind = error.get("type").and_then(Value::as_str)?;
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_lowercase();
    Some(match kind {
        "overloaded_error" => ErrorClass::Overloaded,
        "rate_limit_error" => ErrorClass::RateLimited,
        "api_error" | "timeout_error" => ErrorClass::Transient,
        "authentication_error" | "permission_error" => ErrorClass::Auth,
        "billing_error" => ErrorClass::QuotaExhausted,
        // The request is over 32 MB: the cure is sending less, as for a context overflow.
        "request_too_large" => ErrorClass::ContextOverflow,
        "not_found_error" => ErrorClass::InvalidRequest,
        // An empty account is reported as an invalid request ("Your credit balance is too low").
        "invalid_request_error" if message.contains("credit balance") => ErrorClass::QuotaExhausted,
        // The generic classifier knows the context-overflow wordings ("prompt is too long").
        "invalid_request_error" => match classify_error_payload(error, raw).class {
            ErrorClass::ContextOverflow => ErrorClass::ContextOverflow,
            _ => ErrorClass::InvalidRequest,
        },
        _ => return None,
    })
}

fn hint_for(status: u16, class: ErrorClass) -> Option<&'static str> {
    match (status, class) {
        (_, ErrorClass::Auth) => Some("check the API key and that it may use this model"),
        (_, ErrorClass::QuotaExhausted) => Some("check the account's credit balance and plan"),
        (404, _) => Some("check the base URL (e.g. https://api.anthropic.com) and the model name"),
        _ => None,
    }
}

/// For a 429: how long until every exhausted limit refills, from the
/// `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset` headers (RFC 3339
/// timestamps). Anthropic sends these on every response, so only the limits whose `-remaining`
/// is 0 (or not reported) count; on other statuses they describe limits that were not the problem.
pub fn rate_limit_reset_wait(
    headers: &HeaderMap,
    status: u16,
    now: SystemTime,
) -> Option<Duration> {
    if status != 429 {
        return None;
    }
    let text = |name: String| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    let mut wait: Option<Duration> = None;
    for kind in LIMITS {
        let exhausted = text(format!("anthropic-ratelimit-{kind}-remaining"))
            .and_then(|v| v.parse::<u64>().ok())
            .is_none_or(|remaining| remaining == 0);
        let reset = text(format!("anthropic-ratelimit-{kind}-reset"))
            .and_then(parse_rfc3339)
            .map(|at| {
                at.duration_since(now)
                    .unwrap_or(Duration::ZERO)
                    .min(MAX_HEADER_WAIT)
            });
        if let (true, Some(reset)) = (exhausted, reset) {
            wait = Some(wait.map_or(reset, |w| w.max(reset)));
        }
    }
    wait
}

/// An RFC 3339 timestamp such as `2025-08-21T12:40:59Z` or `2025-08-21T14:40:59.5+02:00`.
/// Times before 1970 are rejected: no server means them.
pub fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let t = text.trim().as_bytes();
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = t.get(range)?;
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(digits).ok()?.parse().ok()
    };
    let at = |i: usize, allowed: &[u8]| t.get(i).is_some_and(|c| allowed.contains(c));
    if !(at(4, b"-") && at(7, b"-") && at(10, b"Tt ") && at(13, b":") && at(16, b":")) {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &t[19..];
    let mut nanos: u32 = 0;
    if let Some(fraction) = rest.strip_prefix(b".") {
        let len = fraction.iter().take_while(|c| c.is_ascii_digit()).count();
        if len == 0 {
            return None;
        }
        // Digits beyond nanoseconds are dropped, not rounded: a reset is never that precise.
        for (i, digit) in fraction[..len.min(9)].iter().enumerate() {
            nanos += u32::from(digit - b'0') * 10u32.pow(8 - i as u32);
        }
        rest = &fraction[len..];
    }
    let offset_secs = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digits = [*h1, *h2, *m1, *m2];
            if !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let value = |a: u8, b: u8| i64::from(a - b'0') * 10 + i64::from(b - b'0');
            let (hours, minutes) = (value(*h1, *h2), value(*m1, *m2));
            if hours > 23 || minutes > 59 {
                return None;
            }
            let secs = hours * 3600 + minutes * 60;
            if *sign == b'+' { secs } else { -secs }
        }
        _ => return None,
    };
    // A leap second is read as the last second of its minute.
    let second = second.min(59);
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
        - offset_secs;
    let secs = u64::try_from(secs).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::new(secs, nanos))
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
/// `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderName, HeaderValue};

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
            map.insert(name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn body(kind: &str, message: &str) -> String {
        serde_json::json!({"type": "error", "error": {"type": kind, "message": message},
                           "request_id": "req_011"})
        .to_string()
    }

    #[test]
    fn rfc3339_timestamps() {
        // Expected values from `date -u -d <text> +%s`.
        let cases: &[(&str, Option<SystemTime>)] = &[
            ("1970-01-01T00:00:00Z", Some(at(0))),
            ("2025-08-21T12:40:59Z", Some(at(1_755_780_059))),
            ("2025-08-21t12:40:59z", Some(at(1_755_780_059))),
            ("2025-08-21 12:40:59Z", Some(at(1_755_780_059))),
            ("2025-08-21T14:40:59+02:00", Some(at(1_755_780_059))),
            ("2024-12-31T23:00:00-01:30", Some(at(1_735_691_400))),
            ("2000-02-29T23:59:59Z", Some(at(951_868_799))),
            (
                "2025-08-21T12:40:59.25Z",
                Some(at(1_755_780_059) + Duration::from_millis(250)),
            ),
            (
                "2025-08-21T12:40:59.1234567891Z",
                Some(at(1_755_780_059) + Duration::from_nanos(123_456_789)),
            ),
            (" 2025-08-21T12:40:59Z ", Some(at(1_755_780_059))),
            ("2025-06-30T23:59:60Z", Some(at(1_751_327_999))),
            ("2001-02-29T00:00:00Z", None),
            ("2025-13-01T00:00:00Z", None),
            ("2025-04-31T00:00:00Z", None),
            ("2025-08-21T24:00:00Z", None),
            ("2025-08-21T12:40:59", None),
            ("2025-08-21T12:40:59.Z", None),
            ("2025-08-21T12:40:59+0200", None),
            ("2025-08-21T12:40:59+24:00", None),
            ("2025-08-21", None),
            ("1969-12-31T23:59:59Z", None),
            ("Thu, 21 Aug 2025 12:40:59 GMT", None),
            ("", None),
            ("2025-08-2é:40:59Z", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_rfc3339(text), *expected, "{text:?}");
        }
    }

    #[test]
    fn reset_headers_wait_for_the_exhausted_limits() {
        let now = at(1_755_780_000);
        type Case<'a> = (&'a [(&'a str, &'a str)], u16, Option<Duration>);
        let cases: &[Case] = &[
            (&[], 429, None),
            // Without remaining counts, every reported limit counts.
            (
                &[
                    ("anthropic-ratelimit-requests-reset", "2025-08-21T12:40:10Z"),
                    ("anthropic-ratelimit-tokens-reset", "2025-08-21T12:40:59Z"),
                ],
                429,
                Some(Duration::from_secs(59)),
            ),
            // With them, only the exhausted ones.
            (
                &[
                    ("anthropic-ratelimit-requests-remaining", "12"),
                    ("anthropic-ratelimit-requests-reset", "2025-08-21T12:40:59Z"),
                    ("anthropic-ratelimit-input-tokens-remaining", "0"),
                    (
                        "anthropic-ratelimit-input-tokens-reset",
                        "2025-08-21T12:40:20Z",
                    ),
                    ("anthropic-ratelimit-output-tokens-remaining", "16000"),
                    (
                        "anthropic-ratelimit-output-tokens-reset",
                        "2025-08-21T12:41:00Z",
                    ),
                ],
                429,
                Some(Duration::from_secs(20)),
            ),
            (
                &[
                    ("anthropic-ratelimit-output-tokens-remaining", "0"),
                    (
                        "anthropic-ratelimit-output-tokens-reset",
                        "2025-08-21T12:40:03.5Z",
                    ),
                ],
                429,
                Some(Duration::from_millis(3500)),
            ),
            // A reset already past means "now".
            (
                &[("anthropic-ratelimit-tokens-reset", "2025-08-21T12:00:00Z")],
                429,
                Some(Duration::ZERO),
            ),
            // Far future is clamped like every header wait.
            (
                &[("anthropic-ratelimit-tokens-reset", "2125-08-21T12:00:00Z")],
                429,
                Some(MAX_HEADER_WAIT),
            ),
            (
                &[("anthropic-ratelimit-tokens-reset", "in a minute")],
                429,
                None,
            ),
            // Sent on every response: on another status they describe a limit that was not hit.
            (
                &[("anthropic-ratelimit-tokens-reset", "2025-08-21T12:40:59Z")],
                529,
                None,
            ),
        ];
        for (pairs, status, expected) in cases {
            assert_eq!(
                rate_limit_reset_wait(&headers(pairs), *status, now),
                *expected,
                "headers {pairs:?} status {status}"
            );
        }
    }

    #[test]
    fn retry_after_takes_precedence_over_reset_headers() {
        let now = at(1_755_780_000);
        let both = headers(&[
            ("retry-after", "7"),
            ("anthropic-ratelimit-tokens-reset", "2025-08-21T12:40:59Z"),
        ]);
        let err = classify_http_error_at(429, &both, &body("rate_limit_error", "slow"), now);
        assert_eq!(err.retry_after, Some(Duration::from_secs(7)));
        let resets_only = headers(&[("anthropic-ratelimit-tokens-reset", "2025-08-21T12:40:59Z")]);
        let err = classify_http_error_at(429, &resets_only, "", now);
        assert_eq!(err.class, ErrorClass::RateLimited);
        assert_eq!(err.retry_after, Some(Duration::from_secs(59)));
        // Permanent failures keep no wait.
        let err = classify_http_error_at(401, &both, &body("authentication_error", "no"), now);
        assert_eq!(err.retry_after, None);
    }

    #[test]
    fn classifies_anthropic_error_bodies() {
        use ErrorClass::*;
        let cases: Vec<(u16, String, ErrorClass)> = vec![
            (
                400,
                body("invalid_request_error", "max_tokens: Field required"),
                InvalidRequest,
            ),
            (
                400,
                body(
                    "invalid_request_error",
                    "prompt is too long: 210000 tokens > 200000 maximum",
                ),
                ContextOverflow,
            ),
            (
                400,
                body(
                    "invalid_request_error",
                    "Your credit balance is too low to access the Anthropic API.",
                ),
                QuotaExhausted,
            ),
            (401, body("authentication_error", "invalid x-api-key"), Auth),
            (
                402,
                body("billing_error", "payment required"),
                QuotaExhausted,
            ),
            (403, body("permission_error", "not allowed"), Auth),
            (
                404,
                body("not_found_error", "model: claude-nope"),
                InvalidRequest,
            ),
            (
                413,
                body("request_too_large", "Request exceeds the maximum size"),
                ContextOverflow,
            ),
            (
                429,
                body(
                    "rate_limit_error",
                    "Number of request tokens has exceeded your per-minute rate limit",
                ),
                RateLimited,
            ),
            (500, body("api_error", "Internal server error"), Transient),
            (504, body("timeout_error", "Request timed out"), Transient),
            (529, body("overloaded_error", "Overloaded"), Overloaded),
            // The type is more precise than the status.
            (500, body("overloaded_error", "Overloaded"), Overloaded),
            // Unknown types and other bodies fall back to the status.
            (400, body("brand_new_error", "?"), InvalidRequest),
            (503, body("brand_new_error", "?"), Overloaded),
            (502, "<html>Bad Gateway</html>".into(), Transient),
            (413, "Request Entity Too Large".into(), ContextOverflow),
            (529, String::new(), Overloaded),
        ];
        for (status, text, expected) in cases {
            let err = classify_http_error_at(status, &HeaderMap::new(), &text, at(0));
            assert_eq!(err.class, expected, "status {status} body {text}");
            assert_eq!(err.status, Some(status));
            assert!(err.message.starts_with(&excerpt(&text)), "{err}");
        }
    }

    #[test]
    fn hints_name_anthropic_not_openai() {
        let err = classify_http_error_at(404, &HeaderMap::new(), "", at(0));
        assert!(err.message.contains("https://api.anthropic.com"), "{err}");
        assert!(!err.message.contains("/v1"), "{err}");
        let err = classify_http_error_at(401, &HeaderMap::new(), "", at(0));
        assert!(err.message.contains("check the API key"), "{err}");
    }

    #[test]
    fn classifies_stream_error_events() {
        use ErrorClass::*;
        let cases = [
            (
                serde_json::json!({"type": "overloaded_error", "message": "Overloaded"}),
                Overloaded,
            ),
            (
                serde_json::json!({"type": "rate_limit_error", "message": "slow"}),
                RateLimited,
            ),
            (
                serde_json::json!({"type": "api_error", "message": "oops"}),
                Transient,
            ),
            (
                serde_json::json!({"type": "invalid_request_error", "message": "prompt is too long"}),
                ContextOverflow,
            ),
            (
                serde_json::json!({"type": "not_found_error", "message": "?"}),
                InvalidRequest,
            ),
            (
                serde_json::json!({"type": "something_new", "message": "?"}),
                Transient,
            ),
            (serde_json::json!("plain text"), Transient),
        ];
        for (error, expected) in cases {
            let raw = error.to_string();
            let err = classify_error_event(&error, &raw);
            assert_eq!(err.class, expected, "{error}");
            assert_eq!(err.status, None);
            assert_eq!(err.message, excerpt(&raw));
        }
    }
}
