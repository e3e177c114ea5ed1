//! The `Host` and `Origin` checks, against DNS rebinding: a page on `evil.example` whose name
//! the attacker re-points at 127.0.0.1 reaches this server with `Host: evil.example:PORT` and
//! its own origin. Only requests addressed to this server by one of its own names are answered
//! — the bound address, `localhost`, `127.0.0.1`, `[::1]` with the bound port, any IP literal
//! for a bind to every address (a rebinding needs a DNS name), and the names given with
//! `--allow-host` (any port) — and a browser's `Origin`, when it sends one, must be this
//! server's own.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// The names and port a request may address this server by.
#[derive(Clone, Debug)]
pub(crate) struct HostCheck {
    port: u16,
    /// Lower-case, IPv6 without brackets; these need the bound port.
    own: Vec<String>,
    /// `--allow-host` names (e.g. behind a reverse proxy): any port.
    allowed: Vec<String>,
    /// Bound to 0.0.0.0 or `::`: the server answers on every address the machine has.
    any_ip: bool,
}

impl HostCheck {
    pub(crate) fn new(bound: SocketAddr, allowed: &[String]) -> HostCheck {
        let mut own: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).into();
        if !bound.ip().is_unspecified() {
            own.push(bound.ip().to_string());
        }
        HostCheck {
            port: bound.port(),
            own,
            allowed: allowed.iter().map(|h| normalize(h)).collect(),
            any_ip: bound.ip().is_unspecified(),
        }
    }

    /// Whether a `Host` header value (`name[:port]`) addresses this server.
    fn allows(&self, host: &str) -> bool {
        let Ok(authority) = host.parse::<axum::http::uri::Authority>() else {
            return false;
        };
        let name = normalize(authority.host());
        // No port in `Host` means HTTP's default.
        let port_matches = authority.port_u16().unwrap_or(80) == self.port;
        let own = self.own.contains(&name) || (self.any_ip && name.parse::<IpAddr>().is_ok());
        (own && port_matches) || self.allowed.contains(&name)
    }
}

fn normalize(host: &str) -> String {
    host.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

/// Refuses (403) a request whose `Host` is not one of this server's names, or whose `Origin`
/// (sent by browsers on cross-origin requests) is not `http(s)://` + that `Host`.
pub(crate) async fn require_own_host(
    State(check): State<HostCheck>,
    request: Request,
    next: Next,
) -> Response {
    let check = &check;
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(|a| a.to_string()));
    let Some(host) = host.clone().filter(|h| check.allows(h)) else {
        let message = format!(
            "this server answers only requests addressed to it (localhost:{port}, \
             127.0.0.1:{port}, [::1]:{port} or its bound address), not to Host {:?}: a page \
             under another name may be a DNS-rebinding attack. If you reach it under that name \
             (a reverse proxy), start it with --allow-host NAME",
            host.as_deref().unwrap_or(""),
            port = check.port,
        );
        return ApiError::new(StatusCode::FORBIDDEN, message).into_response();
    };
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let same = ["http://", "https://"].iter().any(|scheme| {
            origin
                .strip_prefix(scheme)
                .is_some_and(|rest| rest.eq_ignore_ascii_case(&host))
        });
        if !same {
            let message = format!(
                "a page from {origin:?} may not call this server: only its own dashboard \
                 (http://{host}) may"
            );
            return ApiError::new(StatusCode::FORBIDDEN, message).into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(bound: &str, allowed: &[&str]) -> HostCheck {
        let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
        HostCheck::new(bound.parse().unwrap(), &allowed)
    }

    #[test]
    fn loopback_names_with_the_bound_port_only() {
        let c = check("127.0.0.1:7878", &[]);
        for ok in [
            "127.0.0.1:7878",
            "localhost:7878",
            "LOCALHOST:7878",
            "[::1]:7878",
        ] {
            assert!(c.allows(ok), "{ok}");
        }
        for bad in [
            "evil.example:7878",
            "127.0.0.1:7879",
            "localhost",
            "10.0.0.5:7878",
            "",
            "a b",
        ] {
            assert!(!c.allows(bad), "{bad}");
        }
        assert!(check("127.0.0.1:80", &[]).allows("localhost"));
    }

    #[test]
    fn a_bind_to_every_address_takes_ip_literals_and_allowed_names() {
        let c = check("0.0.0.0:7878", &["Baton.Example.Org"]);
        assert!(c.allows("192.168.1.20:7878"));
        assert!(c.allows("[fe80::1]:7878"));
        assert!(!c.allows("192.168.1.20:80"));
        assert!(c.allows("baton.example.org"));
        assert!(c.allows("baton.example.org:443"));
        assert!(!c.allows("other.example.org:7878"));
        let specific = check("192.168.1.20:7878", &[]);
        assert!(specific.allows("192.168.1.20:7878"));
        assert!(!specific.allows("192.168.1.21:7878"));
    }
}
