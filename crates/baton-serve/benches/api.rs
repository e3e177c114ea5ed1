//! The dashboard API over one large run in a real SQLite store (WAL, fsync per append):
//! latency of `/api/runs` (cold: the first request folds the whole journal; warm: cached),
//! run detail, the first events page, and the live tail — one event appended → the SSE client
//! has it. Full size (10,000 events, 50 repetitions) with `cargo bench -p baton-serve --bench
//! api`; a quick smoke run (300 events, 3 repetitions) under `cargo test`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use baton_core::{Event, Usage};
use baton_serve::ServeOptions;
use baton_serve::testing::JournalWriter;
use baton_store::{SqliteStore, Store};
use futures::StreamExt;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn row(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "| {name:<38} | {:>9.2} | {:>9.2} | {:>9.2} | {:>4} |",
        ms(percentile(&samples, 0.5)),
        ms(percentile(&samples, 0.95)),
        ms(*samples.last().unwrap()),
        samples.len()
    );
}

async fn timed<F, T>(reps: usize, mut f: impl FnMut() -> F) -> Vec<Duration>
where
    F: std::future::Future<Output = T>,
{
    let mut out = Vec::with_capacity(reps);
    for _ in 0..reps {
        let start = Instant::now();
        f().await;
        out.push(start.elapsed());
    }
    out
}

#[tokio::main]
async fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (target_events, reps) = if full { (10_000u64, 50) } else { (300, 3) };

    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::for_workspace(dir.path()).await.unwrap());
    let mut writer = JournalWriter::start(store.clone(), "benchmark run", "gpt-4o").await;
    let build = Instant::now();
    let mut turn = 0;
    // Six events per turn (turn, model call started/finished, tool call started/finished, end).
    while writer.next_seq + 6 <= target_events {
        turn += 1;
        let usage = Usage {
            prompt_tokens: 1000 + turn as u64,
            completion_tokens: 50,
            cached_prompt_tokens: Some(800),
            ..Default::default()
        };
        writer.turn(turn, usage, Some(0.001), 40).await;
    }
    while writer.next_seq < target_events {
        writer
            .push(Event::NoteAdded {
                text: "padding".into(),
            })
            .await;
    }
    let events = writer.next_seq;
    let build = build.elapsed();

    let options = ServeOptions::default();
    let poll = options.poll_interval;
    let (base, stop, server) = start_server(store.clone(), options).await;
    let client = reqwest::Client::new();
    let id = writer.run_id.to_string();
    let get = |path: String| {
        let client = client.clone();
        let url = format!("{base}{path}");
        async move {
            let response = client.get(url).send().await.unwrap();
            assert!(response.status().is_success());
            response.bytes().await.unwrap().len()
        }
    };

    let cold = timed(1, || get("/api/runs".into())).await;
    let runs = timed(reps, || get("/api/runs".into())).await;
    let detail_bytes = get(format!("/api/runs/{id}")).await;
    let detail = timed(reps, || get(format!("/api/runs/{id}"))).await;
    let page = timed(reps, || get(format!("/api/runs/{id}/events?limit=100"))).await;

    let tail = live_tail(&client, &base, &mut writer, reps).await;
    // The same with a fast poll: what the tail costs beyond waiting for the next poll.
    let (fast_base, fast_stop, fast_server) = start_server(
        store.clone(),
        ServeOptions {
            poll_interval: Duration::from_millis(20),
            ..ServeOptions::default()
        },
    )
    .await;
    let fast_tail = live_tail(&client, &fast_base, &mut writer, reps).await;
    let _ = fast_stop.send(());
    fast_server.await.unwrap().unwrap();

    println!(
        "\nbaton-serve API, one run of {events} events in SQLite ({} mode; journal written in {:.1} s; run detail {} KB; live tail polls every {} ms)\n",
        if full { "full" } else { "smoke" },
        build.as_secs_f64(),
        detail_bytes / 1024,
        poll.as_millis()
    );
    println!(
        "| {:<38} | {:>9} | {:>9} | {:>9} | {:>4} |",
        "request", "p50 ms", "p95 ms", "max ms", "n"
    );
    println!(
        "|{:-<40}|{:-<11}|{:-<11}|{:-<11}|{:-<6}|",
        "", "", "", "", ""
    );
    row("GET /api/runs (cold: folds journal)", cold);
    row("GET /api/runs (cached aggregate)", runs);
    row("GET /api/runs/{id} (detail)", detail);
    row("GET /api/runs/{id}/events?limit=100", page);
    row(
        &format!("live tail, {} ms poll: append → SSE", poll.as_millis()),
        tail,
    );
    row("live tail, 20 ms poll: append → SSE", fast_tail);

    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

type ServerTask = tokio::task::JoinHandle<std::io::Result<()>>;

async fn start_server(
    store: Arc<dyn Store>,
    options: ServeOptions,
) -> (String, tokio::sync::oneshot::Sender<()>, ServerTask) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(baton_serve::serve(listener, store, options, async {
        let _ = stopped.await;
    }));
    (base, stop, server)
}

/// One stream open from now on; each repetition appends one event and waits until the client
/// has parsed it. Appends land at spread-out points of the poll cycle, as they do for real.
async fn live_tail(
    client: &reqwest::Client,
    base: &str,
    writer: &mut JournalWriter,
    reps: usize,
) -> Vec<Duration> {
    let response = client
        .get(format!("{base}/api/runs/{}/stream", writer.run_id))
        .send()
        .await
        .unwrap();
    let mut stream = eventsource_stream::Eventsource::eventsource(response.bytes_stream());
    let mut samples = Vec::with_capacity(reps);
    for i in 0..reps {
        tokio::time::sleep(Duration::from_millis(fastrand_ms(i))).await;
        let seq = writer.next_seq;
        let start = Instant::now();
        writer
            .push(Event::NoteAdded {
                text: format!("live {i}"),
            })
            .await;
        let event = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("SSE event within 10 s")
            .unwrap()
            .unwrap();
        samples.push(start.elapsed());
        assert_eq!(event.id, seq.to_string());
    }
    samples
}

/// A spread of waits (0–199 ms) without a random number crate: the golden-ratio sequence.
fn fastrand_ms(i: usize) -> u64 {
    (((i + 1) as f64 * 0.618_033_988_75).fract() * 200.0) as u64
}
