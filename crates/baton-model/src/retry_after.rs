//! How long a server asks us to wait, from its response headers.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

/// Longest wait we take from a header. Larger values are clamped so that arithmetic on them
/// cannot overflow; the retry schedule gives up on anything near this anyway.
pub const MAX_HEADER_WAIT: Duration = Duration::from_secs(24 * 60 * 60);

/// The wait a response asks for, by precedence: `retry-after-ms`, then `Retry-After` (seconds or
/// an HTTP-date, relative to `now`), then — only for a 429 — the `x-ratelimit-reset-*` headers of
/// the exhausted limit(s). Those reset headers are sent on every response by some servers, so on
/// other statuses they describe a limit that was not the problem.
pub fn retry_after_from_headers(
    headers: &HeaderMap,
    status: u16,
    now: SystemTime,
) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };

    if let Some(ms) = text("retry-after-ms").and_then(parse_non_negative) {
        return Some(clamp_secs(ms / 1000.0));
    }
    if let Some(wait) = text("retry-after").and_then(|v| parse_retry_after_value(v, now)) {
        return Some(wait);
    }
    if status != 429 {
        return None;
    }
    // Wait for every limit that is used up; when the server does not say which one is, for all
    // of those it reports a reset for.
    let mut wait: Option<Duration> = None;
    for kind in ["requests", "tokens"] {
        let exhausted = text(&format!("x-ratelimit-remaining-{kind}"))
            .and_then(parse_non_negative)
            .is_none_or(|remaining| remaining <= 0.0);
        let reset = text(&format!("x-ratelimit-reset-{kind}")).and_then(parse_reset_duration);
        if let (true, Some(reset)) = (exhausted, reset) {
            wait = Some(wait.map_or(reset, |w| w.max(reset)));
        }
    }
    wait
}

/// A `Retry-After` value: delay-seconds (a decimal fraction is accepted) or an HTTP-date. A date
/// in the past means "now".
pub fn parse_retry_after_value(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Some(secs) = parse_non_negative(value) {
        return Some(clamp_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    let wait = at.duration_since(now).unwrap_or(Duration::ZERO);
    Some(wait.min(MAX_HEADER_WAIT))
}

/// A Go-style duration as in `x-ratelimit-reset-requests`: `1s`, `6m0s`, `250ms`, `1h2m3.5s`.
/// A bare number is taken as seconds.
pub fn parse_reset_duration(value: &str) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if let Some(secs) = parse_non_negative(value) {
        return Some(clamp_secs(secs));
    }
    // Longer unit names first, so "ms" is not read as "m" followed by garbage.
    const UNITS: [(&str, f64); 7] = [
        ("ns", 1e-9),
        ("us", 1e-6),
        ("µs", 1e-6),
        ("ms", 1e-3),
        ("h", 3600.0),
        ("m", 60.0),
        ("s", 1.0),
    ];
    let mut rest = value;
    let mut total = 0.0_f64;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_len == 0 {
            return None;
        }
        let number = parse_non_negative(&rest[..number_len])?;
        rest = &rest[number_len..];
        let (unit, scale) = UNITS.iter().find(|(unit, _)| rest.starts_with(unit))?;
        rest = &rest[unit.len()..];
        total += number * scale;
    }
    Some(clamp_secs(total))
}

fn parse_non_negative(text: &str) -> Option<f64> {
    // `f64::from_str` also accepts "inf", "NaN" and exponents; a header value is plain digits.
    if text.is_empty() || !text.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    text.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
}

fn clamp_secs(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs)
        .unwrap_or(MAX_HEADER_WAIT)
        .min(MAX_HEADER_WAIT)
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

    #[test]
    fn retry_after_values() {
        // 784111777 is Sun, 06 Nov 1994 08:49:37 GMT.
        let now = at(784_111_777);
        let cases: &[(&str, Option<Duration>)] = &[
            ("7", Some(Duration::from_secs(7))),
            (" 0 ", Some(Duration::ZERO)),
            ("1.5", Some(Duration::from_millis(1500))),
            (
                "Sun, 06 Nov 1994 08:50:07 GMT",
                Some(Duration::from_secs(30)),
            ),
            // RFC 850 and asctime forms are also HTTP-dates.
            (
                "Sunday, 06-Nov-94 08:49:47 GMT",
                Some(Duration::from_secs(10)),
            ),
            ("Sun Nov  6 08:49:39 1994", Some(Duration::from_secs(2))),
            ("Sun, 06 Nov 1994 08:00:00 GMT", Some(Duration::ZERO)),
            ("99999999999", Some(MAX_HEADER_WAIT)),
            ("-3", None),
            ("inf", None),
            ("NaN", None),
            ("1e3", None),
            ("soon", None),
            ("", None),
        ];
        for (value, expected) in cases {
            assert_eq!(
                parse_retry_after_value(value, now),
                *expected,
                "value {value:?}"
            );
        }
    }

    #[test]
    fn reset_durations() {
        let cases: &[(&str, Option<Duration>)] = &[
            ("1s", Some(Duration::from_secs(1))),
            ("6m0s", Some(Duration::from_secs(360))),
            ("250ms", Some(Duration::from_millis(250))),
            ("1h2m3.5s", Some(Duration::from_millis(3_723_500))),
            ("20ms", Some(Duration::from_millis(20))),
            ("1m30s", Some(Duration::from_secs(90))),
            ("500us", Some(Duration::from_micros(500))),
            ("500µs", Some(Duration::from_micros(500))),
            ("10ns", Some(Duration::from_nanos(10))),
            ("0s", Some(Duration::ZERO)),
            ("12", Some(Duration::from_secs(12))),
            ("0.5", Some(Duration::from_millis(500))),
            ("100000h", Some(MAX_HEADER_WAIT)),
            ("", None),
            ("s", None),
            ("5x", None),
            ("5", Some(Duration::from_secs(5))),
            ("1m-2s", None),
            ("1..5s", None),
        ];
        for (value, expected) in cases {
            assert_eq!(parse_reset_duration(value), *expected, "value {value:?}");
        }
    }

    #[test]
    fn header_precedence_and_rate_limit_resets() {
        let now = at(1_000_000);
        type Case<'a> = (&'a [(&'a str, &'a str)], u16, Option<Duration>);
        let cases: &[Case] = &[
            (&[], 429, None),
            (&[("retry-after", "7")], 429, Some(Duration::from_secs(7))),
            (&[("Retry-After", "7")], 503, Some(Duration::from_secs(7))),
            (
                &[("retry-after-ms", "1500"), ("retry-after", "7")],
                429,
                Some(Duration::from_millis(1500)),
            ),
            (
                &[("retry-after-ms", "bogus"), ("retry-after", "7")],
                429,
                Some(Duration::from_secs(7)),
            ),
            (
                &[
                    ("retry-after", "bogus"),
                    ("x-ratelimit-reset-requests", "2s"),
                ],
                429,
                Some(Duration::from_secs(2)),
            ),
            // Without the remaining counts, wait for every limit reported.
            (
                &[
                    ("x-ratelimit-reset-requests", "1s"),
                    ("x-ratelimit-reset-tokens", "6m0s"),
                ],
                429,
                Some(Duration::from_secs(360)),
            ),
            // With them, only for the exhausted one.
            (
                &[
                    ("x-ratelimit-remaining-requests", "0"),
                    ("x-ratelimit-reset-requests", "1s"),
                    ("x-ratelimit-remaining-tokens", "4000"),
                    ("x-ratelimit-reset-tokens", "6m0s"),
                ],
                429,
                Some(Duration::from_secs(1)),
            ),
            (
                &[
                    ("x-ratelimit-remaining-requests", "12"),
                    ("x-ratelimit-reset-requests", "1s"),
                    ("x-ratelimit-remaining-tokens", "0"),
                    ("x-ratelimit-reset-tokens", "250ms"),
                ],
                429,
                Some(Duration::from_millis(250)),
            ),
            // Reset headers on a non-429 describe a limit that was not hit.
            (&[("x-ratelimit-reset-requests", "1s")], 500, None),
            (&[("x-ratelimit-reset-tokens", "garbage")], 429, None),
        ];
        for (pairs, status, expected) in cases {
            assert_eq!(
                retry_after_from_headers(&headers(pairs), *status, now),
                *expected,
                "headers {pairs:?} status {status}"
            );
        }
    }

    #[test]
    fn non_ascii_header_value_is_ignored() {
        let mut map = HeaderMap::new();
        map.insert("retry-after", HeaderValue::from_bytes(b"\xff7").unwrap());
        assert_eq!(retry_after_from_headers(&map, 429, at(0)), None);
    }
}
