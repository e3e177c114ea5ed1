//! The HTTP server: routes, the per-run aggregate cache, the JSON API and the SSE tail.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use baton_core::{EventRecord, RunId};
use baton_store::{RunSummary, Store, StoreError};
use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, watch};

use crate::aggregate::RunAggregate;
use crate::error::ApiError;
use crate::hosts::HostCheck;
use crate::view::{RunDetail, RunView, status_word};
use crate::{assets, auth, hosts, metrics};

/// Default page size of `/api/runs/{id}/events`, and the largest a client may ask for.
pub const DEFAULT_PAGE: u64 = 100;
pub const MAX_PAGE: u64 = 1000;
/// Events read from the store at once when catching an aggregate up.
const FOLD_BATCH: u64 = 2000;

/// How the server behaves.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// When set, every request must carry it (`Authorization: Bearer`, the `baton_token`
    /// cookie, or `?token=` once, which sets the cookie). `baton serve` always sets one.
    pub token: Option<String>,
    /// Host names besides the bound address, `localhost`, `127.0.0.1` and `[::1]` that
    /// requests may address the server by (any port): e.g. a reverse proxy's. Every other
    /// `Host` is refused (403), as a possible DNS-rebinding attack.
    pub allowed_hosts: Vec<String>,
    /// How often a live tail looks for new events: runs are written by other processes, so
    /// the store is polled.
    pub poll_interval: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            token: None,
            allowed_hosts: Vec::new(),
            poll_interval: Duration::from_millis(200),
        }
    }
}

#[derive(Clone)]
pub(crate) struct AppState {
    store: Arc<dyn Store>,
    options: ServeOptions,
    cache: Arc<Mutex<HashMap<RunId, Arc<RunAggregate>>>>,
    closing: watch::Receiver<bool>,
}

/// The application: API, metrics and dashboard, for a server bound to `bound` (the `Host`
/// check needs its address and port). `closing` turning true ends live tails (so a graceful
/// shutdown does not wait for them forever).
pub fn router(
    store: Arc<dyn Store>,
    options: ServeOptions,
    bound: std::net::SocketAddr,
    closing: watch::Receiver<bool>,
) -> Router {
    // The two checks get only what they read, not the whole state.
    let hosts = HostCheck::new(bound, &options.allowed_hosts);
    let token = options.token.clone();
    let state = AppState {
        store,
        options,
        cache: Arc::default(),
        closing,
    };
    Router::new()
        .route("/", get(assets::index))
        .route("/assets/{file}", get(assets::file))
        .route("/api/runs", get(list_runs))
        .route("/api/runs/{id}", get(run_detail))
        .route("/api/runs/{id}/events", get(events))
        .route("/api/runs/{id}/stream", get(stream))
        .route("/metrics", get(metrics_text))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(
            token,
            auth::require_token,
        ))
        // Outermost: a request addressed by another name is refused before anything else.
        .layer(axum::middleware::from_fn_with_state(
            hosts,
            hosts::require_own_host,
        ))
        .with_state(state)
}

/// Serves on `listener` until `shutdown` completes; open live tails are ended then.
pub async fn serve(
    listener: tokio::net::TcpListener,
    store: Arc<dyn Store>,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (closing_tx, closing) = watch::channel(false);
    let app = router(store, options, listener.local_addr()?, closing);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            let _ = closing_tx.send(true);
        })
        .await
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such endpoint")
}

impl AppState {
    /// The run's aggregate, caught up with its journal: only events appended since the last
    /// look are read (the cache is keyed by run and knows how many events it has folded).
    async fn aggregate(&self, run: &RunSummary) -> Result<Arc<RunAggregate>, StoreError> {
        let mut cache = self.cache.lock().await;
        let entry = cache.entry(run.id.clone()).or_default();
        while entry.events < run.event_count {
            let batch = self
                .store
                .read_events(&run.id, entry.events, FOLD_BATCH)
                .await?;
            if batch.is_empty() {
                break;
            }
            let agg = Arc::make_mut(entry);
            for record in &batch {
                agg.apply(record);
            }
        }
        Ok(entry.clone())
    }

    /// The run a path segment names: a full id or a unique prefix, like the CLI.
    async fn resolve(&self, prefix: &str) -> Result<RunSummary, ApiError> {
        if let Some(run) = self.store.get_run(&RunId::from_string(prefix)).await? {
            return Ok(run);
        }
        let mut matches: Vec<RunSummary> = self
            .store
            .list_runs()
            .await?
            .into_iter()
            .filter(|r| r.id.as_str().starts_with(prefix))
            .collect();
        match matches.len() {
            1 => Ok(matches.remove(0)),
            0 => Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!("no run with id {prefix}"),
            )),
            n => Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("{n} runs start with {prefix}; give more characters"),
            )),
        }
    }
}

#[derive(Serialize)]
struct RunsBody {
    runs: Vec<RunView>,
}

async fn list_runs(State(state): State<AppState>) -> Result<Json<RunsBody>, ApiError> {
    let runs = state.store.list_runs().await?;
    let mut views = Vec::with_capacity(runs.len());
    for run in &runs {
        views.push(RunView::new(run, &*state.aggregate(run).await?));
    }
    Ok(Json(RunsBody {
        runs: crate::view::group_families(views),
    }))
}

async fn run_detail(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<RunDetail>, ApiError> {
    let run = state.resolve(&id).await?;
    let agg = state.aggregate(&run).await?;
    Ok(Json(RunDetail::new(&run, &agg)))
}

/// Query parameters taken as text so that a bad one gets a message naming it.
#[derive(Deserialize)]
struct PageQuery {
    after: Option<String>,
    limit: Option<String>,
}

fn parse_param(name: &str, value: Option<&str>) -> Result<Option<u64>, ApiError> {
    value
        .map(|v| {
            v.parse::<u64>().map_err(|_| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!("`{name}` must be a non-negative integer, not {v:?}"),
                )
            })
        })
        .transpose()
}

#[derive(Serialize)]
struct EventsBody {
    events: Vec<EventRecord>,
    /// Pass as `after` for the next page; absent when this page is empty.
    next_after: Option<u64>,
    has_more: bool,
}

async fn events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<PageQuery>,
) -> Result<Json<EventsBody>, ApiError> {
    let after = parse_param("after", query.after.as_deref())?;
    let limit = parse_param("limit", query.limit.as_deref())?.unwrap_or(DEFAULT_PAGE);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            format!("`limit` must be between 1 and {MAX_PAGE}"),
        ));
    }
    let run = state.resolve(&id).await?;
    let from = after.map_or(0, |a| a.saturating_add(1));
    // One more than asked tells whether another page follows.
    let mut events = state.store.read_events(&run.id, from, limit + 1).await?;
    let has_more = events.len() as u64 > limit;
    events.truncate(limit as usize);
    Ok(Json(EventsBody {
        next_after: events.last().map(|e| e.seq),
        events,
        has_more,
    }))
}

#[derive(Deserialize)]
struct StreamQuery {
    after: Option<String>,
}

/// State of one live tail.
struct Tail {
    state: AppState,
    run: RunId,
    next: u64,
    buffer: VecDeque<EventRecord>,
    ended: bool,
    closing: watch::Receiver<bool>,
}

/// Live tail: every event after `Last-Event-ID` (a reconnecting browser sends it) or `?after=`,
/// else from now on; each SSE `id:` is the event's seq, `data:` its JSON. When the run has
/// ended and everything is sent, an `end` event closes the stream.
async fn stream(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(query): Query<StreamQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let last_id = headers
        .get("last-event-id")
        .map(|v| {
            v.to_str()
                .map_err(|_| ApiError::new(StatusCode::BAD_REQUEST, "Last-Event-ID is not text"))
        })
        .transpose()?;
    let after = match last_id {
        Some(v) => parse_param("Last-Event-ID", Some(v))?,
        None => parse_param("after", query.after.as_deref())?,
    };
    let run = state.resolve(&id).await?;
    let next = after.map_or(run.event_count, |a| a.saturating_add(1));
    let closing = state.closing.clone();
    let tail = Tail {
        state,
        run: run.id,
        next,
        buffer: VecDeque::new(),
        ended: false,
        closing,
    };
    let events = futures::stream::unfold(tail, |mut tail| async move {
        let item = tail.next_event().await?;
        Some((item, tail))
    });
    Ok(Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

impl Tail {
    async fn next_event(&mut self) -> Option<Result<SseEvent, std::convert::Infallible>> {
        loop {
            if let Some(record) = self.buffer.pop_front() {
                let data = serde_json::to_string(&record).unwrap_or_else(|e| {
                    serde_json::json!({"seq": record.seq, "error": e.to_string()}).to_string()
                });
                return Some(Ok(SseEvent::default()
                    .id(record.seq.to_string())
                    .data(data)));
            }
            if self.ended || *self.closing.borrow() {
                return None;
            }
            match self.poll().await {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => {
                    self.ended = true;
                    return Some(Ok(SseEvent::default()
                        .event("error")
                        .data(format!("store error: {e}"))));
                }
            }
            // Caught up: a run that has ended sends nothing more.
            match self.state.store.get_run(&self.run).await {
                Ok(Some(run)) if run.status.is_terminal() && run.event_count <= self.next => {
                    self.ended = true;
                    return Some(Ok(SseEvent::default()
                        .event("end")
                        .data(run.status.as_str())));
                }
                Ok(None) => return None,
                _ => {}
            }
            let mut closing = self.closing.clone();
            tokio::select! {
                _ = tokio::time::sleep(self.state.options.poll_interval) => {}
                _ = closing.changed() => {}
            }
        }
    }

    /// Reads what was appended since; true when something came.
    async fn poll(&mut self) -> Result<bool, StoreError> {
        let batch = self
            .state
            .store
            .read_events(&self.run, self.next, 500)
            .await?;
        if let Some(last) = batch.last() {
            self.next = last.seq + 1;
        }
        let got = !batch.is_empty();
        self.buffer.extend(batch);
        Ok(got)
    }
}

async fn metrics_text(State(state): State<AppState>) -> Result<Response, ApiError> {
    let runs = state.store.list_runs().await?;
    let mut aggregates = Vec::with_capacity(runs.len());
    for run in &runs {
        aggregates.push((status_word(run), state.aggregate(run).await?));
    }
    let text = metrics::render(aggregates.iter().map(|(s, a)| (*s, &**a)));
    Ok(([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response())
}
