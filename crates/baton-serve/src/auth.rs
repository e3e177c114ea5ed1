//! The access token: required on every request, loopback included (other users of the machine
//! reach 127.0.0.1 too). `baton serve` generates one unless given one.
//!
//! Accepted as `Authorization: Bearer TOKEN` (API clients, Prometheus), as the `baton_token`
//! cookie, or as `?token=TOKEN` — a browser opening the printed URL — which sets that cookie
//! (HttpOnly, SameSite=Strict) so later requests, including the SSE stream, carry it.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

pub(crate) const COOKIE: &str = "baton_token";

pub(crate) async fn require_token(
    State(token): State<Option<String>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = token.as_deref() else {
        return next.run(request).await;
    };
    let headers = request.headers();
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| same(t.trim(), token));
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .any(|(name, value)| name == COOKIE && same(&percent_decode(value), token));
    let query = request
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .any(|(name, value)| name == "token" && same(&percent_decode(value), token));
    if !(bearer || cookie || query) {
        let mut response = ApiError::new(
            StatusCode::UNAUTHORIZED,
            "this server needs its access token: send `Authorization: Bearer TOKEN`, or open the \
             dashboard once as /?token=TOKEN. `baton serve` prints the token when it makes it \
             and keeps it in serve.token in baton's state directory \
             (~/.local/state/baton/serve.token unless BATON_STATE_DIR or XDG_STATE_HOME say \
             otherwise)",
        )
        .into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"baton\""),
        );
        return response;
    }
    let mut response = next.run(request).await;
    if query && !cookie {
        let value = format!(
            "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict",
            cookie_safe(token)
        );
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().append(header::SET_COOKIE, value);
        }
    }
    response
}

/// Compares in time independent of where the strings differ (no early exit on a mismatch).
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut diff = a.len() ^ b.len();
    for (i, x) in a.iter().enumerate() {
        diff |= usize::from(x ^ b.get(i % b.len().max(1)).copied().unwrap_or(0));
    }
    diff == 0
}

/// A cookie value may not hold `;`, `,`, spaces or quotes: those bytes (and `%`, `+`) are
/// percent-encoded in the cookie, and decoded again when it comes back.
fn cookie_safe(token: &str) -> String {
    token
        .bytes()
        .map(|b| match b {
            b'!' | b'#' | b'$' | b'&'..=b'*' | b'-'..=b':' | b'<'..=b'[' | b']'..=b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `%XX` and `+` of a query value.
fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                match std::str::from_utf8(&bytes[i + 1..i + 3])
                    .ok()
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("ab", "abc"));
        assert!(!same("abcd", "abc"));
        assert!(!same("", "abc"));
    }

    #[test]
    fn query_values_are_decoded() {
        assert_eq!(percent_decode("a%20b+c%2"), "a b c%2");
        assert_eq!(percent_decode("%41%zz"), "A%zz");
        assert_eq!(cookie_safe("a b;c%+"), "a%20b%3Bc%25%2B");
        assert_eq!(percent_decode(&cookie_safe("x +%;y")), "x +%;y");
    }
}
