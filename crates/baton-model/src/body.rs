//! Reading response bodies with bounds: a timeout between chunks and a cap on total size, so a
//! stalled or runaway server cannot hang a run or exhaust memory.

use std::time::Duration;

use baton_core::ErrorClass;
use bytes::Bytes;
use futures::{Stream, StreamExt};

use crate::ModelError;

pub(crate) fn stalled(idle: Duration) -> ModelError {
    ModelError::new(
        ErrorClass::Transient,
        format!(
            "stream stalled: the server sent nothing for {} ms",
            idle.as_millis()
        ),
    )
}

fn too_large(cap: usize) -> ModelError {
    // Retryable on purpose: a runaway generation is unlikely to repeat exactly.
    ModelError::new(
        ErrorClass::BadResponse,
        format!("response exceeds the {cap}-byte limit; stopped reading"),
    )
}

/// Wraps a body stream so that waiting longer than `idle` for the next chunk, or receiving more
/// than `cap` bytes in all, ends it with an error.
pub(crate) fn guard_body<S>(
    inner: S,
    idle: Duration,
    cap: usize,
) -> impl Stream<Item = Result<Bytes, ModelError>>
where
    S: Stream<Item = Result<Bytes, ModelError>> + Unpin,
{
    struct State<S> {
        inner: S,
        total: usize,
        ended: bool,
    }
    futures::stream::unfold(
        State {
            inner,
            total: 0,
            ended: false,
        },
        move |mut state| async move {
            if state.ended {
                return None;
            }
            let item = match tokio::time::timeout(idle, state.inner.next()).await {
                Err(_) => Err(stalled(idle)),
                Ok(None) => return None,
                Ok(Some(Err(e))) => Err(e),
                Ok(Some(Ok(bytes))) => {
                    state.total = state.total.saturating_add(bytes.len());
                    if state.total > cap {
                        Err(too_large(cap))
                    } else {
                        Ok(bytes)
                    }
                }
            };
            // After the first error the stream is over: nothing that follows can be trusted.
            state.ended = item.is_err();
            Some((item, state))
        },
    )
}

/// Reads a whole body, failing on a stall, a transport error or more than `cap` bytes.
pub(crate) async fn read_all<S>(inner: S, idle: Duration, cap: usize) -> Result<Vec<u8>, ModelError>
where
    S: Stream<Item = Result<Bytes, ModelError>> + Unpin,
{
    let mut body = Vec::new();
    let mut guarded = std::pin::pin!(guard_body(inner, idle, cap));
    while let Some(chunk) = guarded.next().await {
        body.extend_from_slice(&chunk?);
    }
    Ok(body)
}

/// Reads at most `cap` bytes of a body, best effort: an error body is only there to be quoted,
/// so a failure while reading it keeps what arrived instead of hiding the status.
pub(crate) async fn read_prefix<S>(inner: S, idle: Duration, cap: usize) -> Vec<u8>
where
    S: Stream<Item = Result<Bytes, ModelError>> + Unpin,
{
    let mut body = Vec::new();
    let mut inner = inner;
    while body.len() < cap {
        match tokio::time::timeout(idle, inner.next()).await {
            Ok(Some(Ok(chunk))) => {
                let room = cap - body.len();
                body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            }
            _ => break,
        }
    }
    body
}

/// Reads a server-sent-event body with the bounds of [`guard_body`], handing each event's type
/// and data to `on_event` until it says the answer is complete (`Ok(true)`: what follows is
/// not part of it, so nothing more is awaited) or the body ends. Transport failures and
/// malformed streams are classified errors.
pub(crate) async fn read_sse<S>(
    body: S,
    idle: Duration,
    cap: usize,
    mut on_event: impl FnMut(&str, &str) -> Result<bool, ModelError>,
) -> Result<(), ModelError>
where
    S: Stream<Item = Result<Bytes, ModelError>> + Unpin,
{
    use eventsource_stream::{EventStream, EventStreamError};
    let mut events = std::pin::pin!(EventStream::new(guard_body(body, idle, cap)));
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| match e {
            EventStreamError::Transport(e) => e,
            EventStreamError::Utf8(e) => ModelError::new(
                ErrorClass::BadResponse,
                format!("stream is not valid UTF-8: {e}"),
            ),
            EventStreamError::Parser(e) => ModelError::new(
                ErrorClass::BadResponse,
                format!("malformed event stream: {e}"),
            ),
        })?;
        if on_event(&event.event, &event.data)? {
            break;
        }
    }
    Ok(())
}

/// Whether a response declares a JSON body (as opposed to an event stream).
pub(crate) fn is_json(headers: &reqwest::header::HeaderMap) -> bool {
    headers
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn chunks(parts: &[&'static str]) -> impl Stream<Item = Result<Bytes, ModelError>> + Unpin {
        futures::stream::iter(
            parts
                .iter()
                .map(|p| Ok(Bytes::from_static(p.as_bytes())))
                .collect::<Vec<_>>(),
        )
    }

    #[tokio::test]
    async fn reads_everything_within_bounds() {
        let body = read_all(chunks(&["ab", "cd"]), Duration::from_secs(1), 4)
            .await
            .unwrap();
        assert_eq!(body, b"abcd");
    }

    #[tokio::test]
    async fn cap_is_enforced() {
        let err = read_all(chunks(&["ab", "cde"]), Duration::from_secs(1), 4)
            .await
            .unwrap_err();
        assert_eq!(err.class, ErrorClass::BadResponse);
        assert!(err.message.contains("4-byte limit"));
    }

    #[tokio::test(start_paused = true)]
    async fn stall_between_chunks_is_an_error() {
        let stalling = chunks(&["ab"]).chain(futures::stream::pending());
        let err = read_all(stalling, Duration::from_millis(300), 100)
            .await
            .unwrap_err();
        assert_eq!(err.class, ErrorClass::Transient);
        assert!(err.message.contains("stalled"));
        assert!(err.message.contains("300 ms"));
    }

    #[tokio::test]
    async fn transport_error_ends_the_stream() {
        let failing = chunks(&["ab"])
            .chain(futures::stream::iter(vec![Err(ModelError::new(
                ErrorClass::Transient,
                "reset",
            ))]))
            .chain(chunks(&["never"]));
        let mut guarded = std::pin::pin!(guard_body(failing, Duration::from_secs(1), 100));
        assert!(guarded.next().await.unwrap().is_ok());
        assert_eq!(guarded.next().await.unwrap().unwrap_err().message, "reset");
        assert!(guarded.next().await.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn prefix_keeps_what_arrived() {
        let body = read_prefix(chunks(&["hello ", "world"]), Duration::from_secs(1), 8).await;
        assert_eq!(body, b"hello wo");
        let stalling = chunks(&["partial"]).chain(futures::stream::pending());
        assert_eq!(
            read_prefix(stalling, Duration::from_millis(10), 100).await,
            b"partial"
        );
    }
}
