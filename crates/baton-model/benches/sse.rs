//! Benchmarks of the OpenAI-compatible client, printed as plain numbers:
//!
//! (a) SSE parse throughput of the streaming readers of all three wires (Chat Completions,
//!     Anthropic Messages, Responses) over large in-memory bodies;
//! (b) per-call overhead of `OpenAiProvider::complete` (whole responses) against bare `reqwest`
//!     POSTs of the same body, both to a minimal HTTP server on 127.0.0.1 started here.
//!
//! Run with `cargo bench -p baton-model --bench sse`. Without the `--bench` argument (as under
//! `cargo test --all-targets`, which runs this in a debug build) it does a tiny smoke run that
//! only checks that everything works.

use std::error::Error;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use baton_core::{
    AssistantMessage, Message, ModelRequest, ResponseMode, ToolCall, ToolChoice, ToolEffect,
    ToolSpec,
};
use baton_model::openai::{OpenAiConfig, OpenAiProvider, read_stream, request_body};
use baton_model::{ModelError, ModelProvider, NoObserver};
use bytes::Bytes;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

#[path = "sse_wires.rs"]
mod wires;

type BenchResult<T> = Result<T, Box<dyn Error>>;

/// Sizes of one run: the real ones, or the smoke run's.
struct Plan {
    sse_bytes: usize,
    sse_runs: usize,
    calls: usize,
    warmup: usize,
}

const FULL: Plan = Plan {
    sse_bytes: 20 << 20,
    sse_runs: 7,
    calls: 500,
    warmup: 50,
};

const SMOKE: Plan = Plan {
    sse_bytes: 64 << 10,
    sse_runs: 1,
    calls: 5,
    warmup: 1,
};

fn main() -> BenchResult<()> {
    let full = std::env::args().any(|arg| arg == "--bench");
    let plan = if full { FULL } else { SMOKE };
    if !full {
        println!("smoke run (pass --bench, as `cargo bench` does, for real numbers)");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        sse_throughput(&plan).await?;
        call_overhead(&plan).await
    })
}

// ---------------------------------------------------------------------------------------------
// (a) SSE parse throughput

fn chunk(delta: serde_json::Value) -> String {
    let chunk = json!({
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion.chunk",
        "created": 1_741_569_952,
        "model": "gpt-4o-2024-08-06",
        "system_fingerprint": "fp_eb9dce56a8",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}],
        "usage": null,
    });
    format!("data: {chunk}\n\n")
}

/// A streamed reply of about `target` bytes shaped like a real one: mostly short text deltas,
/// and tool calls whose arguments arrive a few characters at a time. Returns the body, the
/// number of events and the text the reader must reassemble.
fn sse_body(target: usize) -> (Bytes, usize, String) {
    let words = "Let |me |look |at |the |failing |test |first|. |The |error |says |`expected \
                 |3, |got |4`| — |an |off-by-one |✓\n"
        .split('|');
    let args =
        r#"{"path":"crates/baton-model/src/openai/stream.rs","start_line":120,"end_line":260}"#;
    let mut body = String::with_capacity(target + 4096);
    let mut text = String::new();
    let mut events = 0;
    let mut call = 0u32;
    body.push_str(&chunk(json!({"role": "assistant", "content": ""})));
    while body.len() < target {
        for word in words.clone() {
            body.push_str(&chunk(json!({"content": word})));
            text.push_str(word);
            events += 1;
        }
        body.push_str(&chunk(
            json!({"tool_calls": [{"index": call, "id": format!("call_{call}"),
            "type": "function", "function": {"name": "read_file", "arguments": ""}}]}),
        ));
        events += 1;
        let chars: Vec<char> = args.chars().collect();
        for piece in chars.chunks(4) {
            let piece: String = piece.iter().collect();
            body.push_str(&chunk(
                json!({"tool_calls": [{"index": call, "function": {"arguments": piece}}]}),
            ));
            events += 1;
        }
        call += 1;
    }
    let finish = json!({"id": "chatcmpl-x", "object": "chat.completion.chunk", "model": "gpt-4o",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
    let usage = json!({"id": "chatcmpl-x", "object": "chat.completion.chunk", "model": "gpt-4o",
        "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 100,
        "prompt_tokens_details": {"cached_tokens": 0}}});
    body.push_str(&format!(
        "data: {finish}\n\ndata: {usage}\n\ndata: [DONE]\n\n"
    ));
    (Bytes::from(body), events + 3, text)
}

/// The body in the 16 KiB pieces a socket read typically yields, without copying.
fn pieces(body: &Bytes) -> Vec<Result<Bytes, ModelError>> {
    (0..body.len())
        .step_by(16 << 10)
        .map(|start| Ok(body.slice(start..(start + (16 << 10)).min(body.len()))))
        .collect()
}

#[derive(Clone, Copy)]
enum Wire {
    Chat,
    Anthropic,
    Responses,
}

async fn sse_throughput(plan: &Plan) -> BenchResult<()> {
    for wire in [Wire::Chat, Wire::Anthropic, Wire::Responses] {
        wire_throughput(plan, wire).await?;
    }
    Ok(())
}

async fn wire_throughput(plan: &Plan, wire: Wire) -> BenchResult<()> {
    let (body, events, text) = match wire {
        Wire::Chat => sse_body(plan.sse_bytes),
        Wire::Anthropic => wires::anthropic_body(plan.sse_bytes),
        Wire::Responses => wires::responses_body(plan.sse_bytes),
    };
    let name = match wire {
        Wire::Chat => "chat completions",
        Wire::Anthropic => "anthropic messages",
        Wire::Responses => "responses",
    };
    let mut rates = Vec::new();
    for _ in 0..plan.sse_runs {
        let input = futures::stream::iter(pieces(&body));
        let idle = Duration::from_secs(60);
        let started = Instant::now();
        let reply = match wire {
            Wire::Chat => read_stream(input, idle, body.len(), &mut NoObserver).await?,
            Wire::Anthropic => {
                baton_model::anthropic::read_stream(input, idle, body.len(), &mut NoObserver)
                    .await?
            }
            Wire::Responses => {
                baton_model::responses::read_stream(input, idle, body.len(), &mut NoObserver)
                    .await?
            }
        };
        let elapsed = started.elapsed();
        // Measure only a parse that is right.
        if reply.message.content.as_deref() != Some(text.as_str()) {
            return Err("the streamed text was not reassembled exactly".into());
        }
        rates.push(body.len() as f64 / 1e6 / elapsed.as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    println!(
        "sse parse ({name}): {:.1} MB body, {events} events, 16 KiB reads: median \
         {median:.1} MB/s ({:.0} events/s) over {} runs [min {:.1}, max {:.1}]",
        body.len() as f64 / 1e6,
        median * 1e6 / (body.len() as f64 / events as f64),
        rates.len(),
        rates[0],
        rates[rates.len() - 1],
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// (b) per-call overhead against a loopback server

/// A Chat Completions answer with text, one tool call and usage, as OpenAI sends it.
fn completion_json() -> String {
    json!({
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": 1_741_570_283,
        "model": "gpt-4o-2024-08-06",
        "choices": [{
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "The test fails because the loop bound is inclusive. Let me read the file.",
                "tool_calls": [{"id": "call_Vq0AOR3Ba4yK", "type": "function", "function": {
                    "name": "read_file",
                    "arguments": "{\"path\":\"src/lib.rs\",\"start_line\":1,\"end_line\":120}"}}],
                "refusal": null
            },
            "logprobs": null,
            "finish_reason": "tool_calls"
        }],
        "usage": {"prompt_tokens": 4211, "completion_tokens": 58, "total_tokens": 4269,
            "prompt_tokens_details": {"cached_tokens": 3968, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}},
        "service_tier": "default",
        "system_fingerprint": "fp_f9f4fb6dbf"
    })
    .to_string()
}

/// Answers every request on one keep-alive connection with `response`, until the client closes.
async fn serve_connection(stream: TcpStream, response: &[u8]) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let mut line = String::new();
    let mut body = Vec::new();
    loop {
        let mut content_length = 0usize;
        loop {
            line.clear();
            if read.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                content_length = value.trim().parse().unwrap_or(0);
            }
        }
        body.resize(content_length, 0);
        read.read_exact(&mut body).await?;
        write.write_all(response).await?;
    }
}

async fn start_server() -> BenchResult<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let json = completion_json();
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{json}",
        json.len()
    );
    let response: &'static [u8] = Box::leak(response.into_bytes().into_boxed_slice());
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let _ = serve_connection(stream, response).await;
            });
        }
    });
    Ok((addr, server))
}

/// A mid-run agent request: system prompt, goal, a tool round trip, and seven tool specs.
fn agent_request() -> ModelRequest {
    let system = "You are a careful coding agent working in a Rust workspace. ".repeat(40);
    let file =
        "fn main() {\n    for i in 0..=items.len() {\n        process(&items[i]);\n    }\n}\n"
            .repeat(30);
    let tool = |name: &str, effect| ToolSpec {
        name: name.into(),
        description: format!("The {name} tool: does what its name says, within the workspace."),
        parameters: json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "Path relative to the workspace root"},
            "content": {"type": "string"}}, "required": ["path"]}),
        effect,
    };
    ModelRequest {
        model: "gpt-4o".into(),
        messages: vec![
            Message::System { content: system },
            Message::User {
                content: "Fix the failing test in src/main.rs and run the test suite.".into(),
            },
            Message::Assistant(AssistantMessage {
                content: Some("Let me read the file.".into()),
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"src/main.rs"}"#.into(),
                }],
                ..Default::default()
            }),
            Message::Tool {
                call_id: "call_1".into(),
                name: "read_file".into(),
                content: file,
            },
        ],
        tools: [
            ("read_file", ToolEffect::ReadOnly),
            ("write_file", ToolEffect::Mutating),
            ("edit_file", ToolEffect::Mutating),
            ("list_dir", ToolEffect::ReadOnly),
            ("grep", ToolEffect::ReadOnly),
            ("shell", ToolEffect::Mutating),
            ("finish", ToolEffect::ReadOnly),
        ]
        .into_iter()
        .map(|(name, effect)| tool(name, effect))
        .collect(),
        response_mode: ResponseMode::Whole,
        tool_choice: ToolChoice::Auto,
        reasoning: Default::default(),
        provider_compaction_at: Default::default(),
    }
}

struct Stats {
    p50: Duration,
    p90: Duration,
    mean: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    let total: Duration = samples.iter().sum();
    let count = u32::try_from(samples.len()).unwrap_or(u32::MAX).max(1);
    Stats {
        p50: samples[samples.len() / 2],
        p90: samples[samples.len() * 9 / 10],
        mean: total / count,
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

async fn call_overhead(plan: &Plan) -> BenchResult<()> {
    let (addr, server) = start_server().await?;
    let base = format!("http://{addr}/v1");
    let provider = OpenAiProvider::new(OpenAiConfig::new(&base).with_api_key("sk-bench-key"))?;
    let endpoint = provider.endpoint().to_string();
    let request = agent_request();
    let body = Bytes::from(request_body(&request)?);
    let bare = reqwest::Client::builder().build()?;

    let provider_call = || async {
        let started = Instant::now();
        let reply = provider.complete(&request, &mut NoObserver).await?;
        let elapsed = started.elapsed();
        if reply.message.tool_calls.len() != 1 {
            return Err::<Duration, Box<dyn Error>>("the provider misread the answer".into());
        }
        Ok(elapsed)
    };
    let bare_call = || async {
        let started = Instant::now();
        let response = bare
            .post(&endpoint)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .header("authorization", "Bearer sk-bench-key")
            .body(body.clone())
            .send()
            .await?;
        let bytes = response.bytes().await?;
        let elapsed = started.elapsed();
        if bytes.is_empty() {
            return Err::<Duration, Box<dyn Error>>("empty answer".into());
        }
        Ok(elapsed)
    };

    for _ in 0..plan.warmup {
        provider_call().await?;
        bare_call().await?;
    }
    // Alternating the two keeps drift in machine load from favouring either.
    let mut with_provider = Vec::with_capacity(plan.calls);
    let mut with_bare = Vec::with_capacity(plan.calls);
    for _ in 0..plan.calls {
        with_provider.push(provider_call().await?);
        with_bare.push(bare_call().await?);
    }
    server.abort();

    let (p, b) = (stats(with_provider), stats(with_bare));
    println!(
        "per call, loopback HTTP/1.1, N={} sequential, request {:.1} kB, answer {:.1} kB:",
        plan.calls,
        body.len() as f64 / 1e3,
        completion_json().len() as f64 / 1e3
    );
    println!(
        "  OpenAiProvider::complete (whole)  p50 {:7.1} µs  p90 {:7.1} µs  mean {:7.1} µs",
        micros(p.p50),
        micros(p.p90),
        micros(p.mean)
    );
    println!(
        "  bare reqwest POST                 p50 {:7.1} µs  p90 {:7.1} µs  mean {:7.1} µs",
        micros(b.p50),
        micros(b.p90),
        micros(b.mean)
    );
    println!(
        "  client overhead                   p50 {:+7.1} µs                 mean {:+7.1} µs",
        micros(p.p50) - micros(b.p50),
        micros(p.mean) - micros(b.mean)
    );
    Ok(())
}
