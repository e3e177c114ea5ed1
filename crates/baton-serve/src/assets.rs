//! The dashboard's files, compiled into the binary: hand-written HTML, CSS and JavaScript with
//! no external references (no CDN, no build step), served with a CSP that forbids any.

use axum::extract::Path;
use axum::http::{HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

const INDEX: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const TRANSCRIPT_JS: &str = include_str!("../assets/transcript.js");
const APP_CSS: &str = include_str!("../assets/app.css");

/// Everything comes from this server; nothing inline, nothing from elsewhere.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let headers: [(HeaderName, &'static str); 4] = [
        (header::CONTENT_TYPE, content_type),
        (header::CACHE_CONTROL, "no-cache"),
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
    ];
    (headers, body).into_response()
}

pub(crate) async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

pub(crate) async fn file(Path(file): Path<String>) -> Response {
    match file.as_str() {
        "app.js" => asset("text/javascript; charset=utf-8", APP_JS),
        "transcript.js" => asset("text/javascript; charset=utf-8", TRANSCRIPT_JS),
        "app.css" => asset("text/css; charset=utf-8", APP_CSS),
        _ => ApiError::new(StatusCode::NOT_FOUND, format!("no asset {file}")).into_response(),
    }
}
