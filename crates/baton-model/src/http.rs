//! The HTTP exchange every dialect shares: send with a deadline for the response headers,
//! classify a failure status from a capped body, and hand back either the event stream to read
//! or the whole JSON body.

use std::time::Duration;

use baton_core::{ErrorClass, ResponseMode};
use bytes::Bytes;
use futures::{Stream, TryStreamExt};
use reqwest::header::HeaderMap;

use crate::ModelError;
use crate::error::classify_transport_error;

/// Error bodies are read only this far: enough for any real error message.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// What a model server answered.
pub(crate) enum Answer<S> {
    /// An event stream, to be read by the provider's own SSE reader.
    Stream(S),
    /// A whole JSON body, already read (bounded by the idle timeout and the size cap).
    Whole(Vec<u8>),
}

/// Sends `builder`'s request. A streaming request answered with plain JSON (some servers and
/// proxies ignore `stream: true`, or answer an error that way) comes back as [`Answer::Whole`].
pub(crate) async fn exchange(
    builder: reqwest::RequestBuilder,
    mode: ResponseMode,
    request_timeout: Duration,
    idle_timeout: Duration,
    max_response: usize,
    classify_status: impl FnOnce(u16, &HeaderMap, &str) -> ModelError,
) -> Result<Answer<impl Stream<Item = Result<Bytes, ModelError>> + Unpin>, ModelError> {
    let response = tokio::time::timeout(request_timeout, builder.send())
        .await
        .map_err(|_| {
            ModelError::new(
                ErrorClass::Transient,
                format!(
                    "timed out: no response headers within {} s",
                    request_timeout.as_secs_f64()
                ),
            )
        })?
        .map_err(|e| classify_transport_error(&e))?;
    let status = response.status();
    let headers = response.headers().clone();
    let body = response
        .bytes_stream()
        .map_err(|e| classify_transport_error(&e));
    if !status.is_success() {
        let text = crate::body::read_prefix(body, idle_timeout, MAX_ERROR_BODY_BYTES).await;
        tracing::debug!(status = status.as_u16(), "model request failed");
        return Err(classify_status(
            status.as_u16(),
            &headers,
            &String::from_utf8_lossy(&text),
        ));
    }
    if mode == ResponseMode::Streaming && !crate::body::is_json(&headers) {
        return Ok(Answer::Stream(body));
    }
    Ok(Answer::Whole(
        crate::body::read_all(body, idle_timeout, max_response).await?,
    ))
}
