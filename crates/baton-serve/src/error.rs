//! The error every handler and check answers with: a status and a JSON body.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use baton_store::StoreError;

/// An API error: a status and a JSON body `{"error": "..."}`.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            message: message.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        tracing::warn!("store error: {e}");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("store error: {e}"),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(serde_json::json!({ "error": self.message })),
        )
            .into_response()
    }
}
