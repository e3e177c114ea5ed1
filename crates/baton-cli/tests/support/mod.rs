//! Test support: a scripted OpenAI-compatible server (wiremock) that answers by turn, and
//! helpers to run the real `baton` binary.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// One scripted model answer.
#[derive(Clone, Debug, Default)]
pub struct Turn {
    pub text: Option<String>,
    pub calls: Vec<(String, String)>,
    /// Hold the answer back this long (to kill baton while the request is in flight).
    pub delay: Option<Duration>,
}

pub fn turn(calls: &[(&str, Value)]) -> Turn {
    Turn {
        text: None,
        calls: calls
            .iter()
            .map(|(n, a)| (n.to_string(), a.to_string()))
            .collect(),
        delay: None,
    }
}

/// A reply without a tool call: the way most models end their work.
pub fn text_turn(text: &str) -> Turn {
    Turn {
        text: Some(text.to_string()),
        ..Turn::default()
    }
}

/// A raw-arguments call (for malformed JSON).
pub fn raw_turn(calls: &[(&str, &str)]) -> Turn {
    Turn {
        text: None,
        calls: calls
            .iter()
            .map(|(n, a)| (n.to_string(), a.to_string()))
            .collect(),
        delay: None,
    }
}

#[derive(Clone, Debug)]
pub struct Received {
    /// Which answer of the script the request asked for: the number of assistant messages in it.
    pub turn_index: usize,
    pub body: Value,
}

/// A failure the server injects instead of answering.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    ServerError,
    RateLimited,
    Overloaded,
    /// A 200 whose stream stops mid-message.
    CutStream,
    /// A 200 whose stream carries a chunk that is not JSON.
    Malformed,
}

/// What the scripted server answers from.
#[derive(Clone)]
enum Script {
    /// Answer N for a request with N assistant messages.
    Linear(Vec<Turn>),
    /// Like `Linear`, then the last answer again for every later request (a model that keeps
    /// saying the same thing).
    RepeatLast(Vec<Turn>),
    /// Per task-graph context: the key is the task id of the request's brief ("Your current
    /// task is `ID`"), with `#2`, `#3` … appended for later approaches, or `plan` while planning;
    /// answer N for a request with N assistant messages in that context.
    ByTask(Vec<(String, Vec<Turn>)>),
}

/// Which task-graph context a request belongs to (see [`Script::ByTask`]).
pub fn task_key(body: &Value) -> String {
    let text: String = body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "user")
                .filter_map(|m| m["content"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    let marker = "Your current task is `";
    let Some(start) = text.find(marker).map(|i| i + marker.len()) else {
        return "plan".into();
    };
    let id: String = text[start..].chars().take_while(|c| *c != '`').collect();
    let failed = text.matches("- Approach ").count();
    if failed == 0 {
        id
    } else {
        format!("{id}#{}", failed + 1)
    }
}

struct ScriptResponder {
    script: Script,
    received: Arc<Mutex<Vec<Received>>>,
    /// Fault for the N-th request (0-based), if any.
    faults: Arc<dyn Fn(usize) -> Option<Fault> + Send + Sync>,
}

impl Respond for ScriptResponder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = match serde_json::from_slice(&request.body) {
            Ok(v) => v,
            Err(e) => return ResponseTemplate::new(400).set_body_string(format!("bad json: {e}")),
        };
        let turn_index = body["messages"]
            .as_array()
            .map(|m| m.iter().filter(|m| m["role"] == "assistant").count())
            .unwrap_or(0);
        let request_number = {
            let mut received = self.received.lock().unwrap();
            received.push(Received {
                turn_index,
                body: body.clone(),
            });
            received.len() - 1
        };
        if let Some(fault) = (self.faults)(request_number) {
            return fault_response(fault);
        }
        let answer = match &self.script {
            Script::Linear(turns) => turns.get(turn_index),
            Script::RepeatLast(turns) => turns.get(turn_index).or(turns.last()),
            Script::ByTask(tasks) => {
                let key = task_key(&body);
                tasks
                    .iter()
                    .find(|(k, _)| *k == key)
                    .and_then(|(_, turns)| turns.get(turn_index))
            }
        };
        let Some(turn) = answer else {
            return ResponseTemplate::new(400)
                .set_body_string(format!("script has no answer #{turn_index}"));
        };
        let streaming = body["stream"] == true;
        let usage = json!({"prompt_tokens": 100 + turn_index as u64, "completion_tokens": 10 + turn_index as u64,
                           "total_tokens": 110 + 2 * turn_index as u64,
                           "prompt_tokens_details": {"cached_tokens": 50}});
        let mut template = if streaming {
            ResponseTemplate::new(200)
                .set_body_raw(sse_body(turn, turn_index, &usage), "text/event-stream")
        } else {
            ResponseTemplate::new(200).set_body_json(whole_body(turn, turn_index, &usage))
        };
        if let Some(delay) = turn.delay {
            template = template.set_delay(delay);
        }
        template
    }
}

fn fault_response(fault: Fault) -> ResponseTemplate {
    let sse =
        |body: &str| ResponseTemplate::new(200).set_body_raw(body.to_string(), "text/event-stream");
    match fault {
        Fault::ServerError => ResponseTemplate::new(500).set_body_string("internal error"),
        Fault::RateLimited => ResponseTemplate::new(429)
            .insert_header("retry-after", "0")
            .set_body_json(json!({"error": {"type": "rate_limit", "message": "slow down"}})),
        Fault::Overloaded => ResponseTemplate::new(529).set_body_string("overloaded"),
        Fault::CutStream => {
            sse("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"partial ans\"}}]}\n\n")
        }
        Fault::Malformed => sse("data: {\"choices\": [tru\n\n"),
    }
}

fn tool_calls_json(turn: &Turn, turn_index: usize) -> Vec<Value> {
    turn.calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"id": format!("call-{turn_index}-{i}"), "type": "function",
                   "function": {"name": name, "arguments": args}})
        })
        .collect()
}

fn whole_body(turn: &Turn, turn_index: usize, usage: &Value) -> Value {
    let mut message = json!({"role": "assistant", "content": turn.text});
    if !turn.calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls_json(turn, turn_index));
    }
    json!({"id": "x", "object": "chat.completion", "model": "scripted",
           "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(turn)}],
           "usage": usage})
}

/// What OpenAI's Chat Completions API reports: `tool_calls` when the model called tools,
/// `stop` when it ended on its own.
fn finish_reason(turn: &Turn) -> &'static str {
    if turn.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

/// Streams the answer in small pieces: arguments split across chunks, usage in a final chunk.
fn sse_body(turn: &Turn, turn_index: usize, usage: &Value) -> String {
    let mut out = String::new();
    let mut push = |v: Value| out.push_str(&format!("data: {v}\n\n"));
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "x", "object": "chat.completion.chunk", "model": "scripted",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    if let Some(text) = &turn.text {
        push(chunk(
            json!({"role": "assistant", "content": text}),
            Value::Null,
        ));
    }
    for (i, (name, args)) in turn.calls.iter().enumerate() {
        push(chunk(
            json!({"tool_calls": [{"index": i, "id": format!("call-{turn_index}-{i}"), "type": "function",
                                   "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        ));
        let chars: Vec<char> = args.chars().collect();
        for piece in chars.chunks(7) {
            let piece: String = piece.iter().collect();
            push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                Value::Null,
            ));
        }
    }
    push(chunk(json!({}), json!(finish_reason(turn))));
    push(
        json!({"id": "x", "object": "chat.completion.chunk", "model": "scripted", "choices": [], "usage": usage}),
    );
    out.push_str("data: [DONE]\n\n");
    out
}

pub struct ScriptedServer {
    pub server: MockServer,
    received: Arc<Mutex<Vec<Received>>>,
}

impl ScriptedServer {
    pub async fn start(script: Vec<Turn>) -> ScriptedServer {
        Self::start_with_faults(script, |_| None).await
    }

    /// Like `start`, but the N-th request gets `faults(N)` instead of an answer when it is Some.
    /// A server that answers per task-graph context (see `task_key`).
    pub async fn start_by_task(script: &[(&str, Vec<Turn>)]) -> ScriptedServer {
        let script = script
            .iter()
            .map(|(k, turns)| (k.to_string(), turns.clone()))
            .collect();
        Self::start_script(Script::ByTask(script), Arc::new(|_| None)).await
    }

    /// Answers the script, then its last answer forever.
    pub async fn start_repeating_last(script: Vec<Turn>) -> ScriptedServer {
        Self::start_script(Script::RepeatLast(script), Arc::new(|_| None)).await
    }

    pub async fn start_with_faults(
        script: Vec<Turn>,
        faults: impl Fn(usize) -> Option<Fault> + Send + Sync + 'static,
    ) -> ScriptedServer {
        Self::start_script(Script::Linear(script), Arc::new(faults)).await
    }

    async fn start_script(
        script: Script,
        faults: Arc<dyn Fn(usize) -> Option<Fault> + Send + Sync>,
    ) -> ScriptedServer {
        let server = MockServer::start().await;
        let received = Arc::new(Mutex::new(Vec::new()));
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ScriptResponder {
                script,
                received: received.clone(),
                faults,
            })
            .mount(&server)
            .await;
        ScriptedServer { server, received }
    }

    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.uri())
    }

    /// A handle that can be polled from another thread.
    pub fn received_handle(&self) -> Arc<Mutex<Vec<Received>>> {
        self.received.clone()
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// How many requests asked for each answer of the script.
    pub fn requests_per_turn(&self) -> Vec<usize> {
        let received = self.received();
        let max = received
            .iter()
            .map(|r| r.turn_index)
            .max()
            .map_or(0, |m| m + 1);
        (0..max)
            .map(|t| received.iter().filter(|r| r.turn_index == t).count())
            .collect()
    }
}

pub fn baton_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_baton"))
}

/// Where baton keeps the state of `workspace` when run by [`baton`] with `home` as HOME: the
/// documented default, `~/.local/state/baton/workspaces/NAME-HASH` (nothing else is set).
pub fn state_dir(workspace: &Path, home: &Path) -> baton_state::StateDir {
    baton_state::StateDir::under(Some(&home.join(".local/state/baton")), workspace)
}

/// The journal of `workspace` (see [`state_dir`]).
pub fn journal_path(workspace: &Path, home: &Path) -> PathBuf {
    state_dir(workspace, home).journal()
}

/// The store a [`baton`] command with `home` as HOME uses for `workspace`, opened in this
/// process (its state directory made as baton makes it).
pub async fn open_journal(workspace: &Path, home: &Path) -> baton_store::SqliteStore {
    let state = state_dir(workspace, home);
    state.prepare().unwrap();
    baton_store::SqliteStore::open(&state.journal())
        .await
        .unwrap()
}

/// Writes the user's `~/.config/baton/config.toml` (the tests' HOME is a temporary directory).
pub fn write_user_config(home: &Path, toml: &str) {
    let dir = home.join(".config/baton");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), toml).unwrap();
}

/// `baton trust` for `workspace` (its `.baton/config.toml` sets keys that need it, or it has a
/// `.baton/policy.toml`), as the user would after writing them.
pub fn trust_workspace(workspace: &Path, home: &Path) {
    let out = baton(workspace, home).arg("trust").output().unwrap();
    assert!(
        out.status.success(),
        "baton trust: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A `baton` command with a clean, isolated environment (no user config, no real keys).
pub fn baton(workspace: &Path, home: &Path) -> Command {
    let mut cmd = Command::new(baton_bin());
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("RUST_BACKTRACE", "1");
    // CI runs the suite a second time with the bubblewrap-less backend forced.
    if let Ok(backend) = std::env::var("BATON_SANDBOX_BACKEND") {
        cmd.env("BATON_SANDBOX_BACKEND", backend);
    }
    cmd.arg("--workspace").arg(workspace);
    cmd
}

/// Spawns `baton ... --json` and returns the child and a reader of its event lines.
pub fn spawn_json(mut cmd: Command) -> (Child, EventLines) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn baton");
    let stdout = child.stdout.take().expect("stdout");
    (
        child,
        EventLines {
            lines: BufReader::new(stdout).lines(),
        },
    )
}

pub struct EventLines {
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl EventLines {
    /// Reads events until one satisfies `pred`; returns it (None if the stream ended first).
    pub fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        for line in self.lines.by_ref() {
            let line = line.ok()?;
            let event: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("bad JSONL line {line:?}: {e}"));
            if pred(&event) {
                return Some(event);
            }
        }
        None
    }
}

/// The run's journal, through `baton logs --json`.
pub fn journal(workspace: &Path, home: &Path) -> Vec<Value> {
    let out = baton(workspace, home)
        .args(["logs", "--json"])
        .output()
        .expect("run baton logs");
    assert!(
        out.status.success(),
        "baton logs failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// All regular files under `dir` (except `.baton/`) with their contents, sorted.
pub fn snapshot_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .to_string();
            if rel == ".baton" {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Runs `baton run --base-url SERVER --model m ARGS…` off the async runtime (the scripted
/// server lives on it) and returns its output.
pub async fn run_against(
    server: &ScriptedServer,
    workspace: &Path,
    home: &Path,
    args: &[&str],
) -> std::process::Output {
    let mut cmd = baton(workspace, home);
    cmd.args(["run", "--base-url", &server.base_url(), "--model", "m"])
        .args(args);
    tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap()
}

/// Runs `baton ARGS…` in `workspace` off the async runtime (a scripted server may live on it)
/// and returns its output, e.g. `baton_blocking(ws, home, &["resume", "--last"])`.
pub async fn baton_blocking(workspace: &Path, home: &Path, args: &[&str]) -> std::process::Output {
    let mut cmd = baton(workspace, home);
    cmd.args(args);
    tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap()
}

/// Asserts exit code 0, showing stderr otherwise.
pub fn assert_finished(out: &std::process::Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A running `baton serve --port 0` (the port it got is in the URL it prints).
pub struct ServeProcess {
    pub child: Child,
    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub base: String,
}

impl ServeProcess {
    /// Starts `baton serve` on a free loopback port for `workspace`'s store, with `extra`
    /// arguments, and waits for the URL line.
    pub fn start(workspace: &Path, home: &Path, extra: &[&str]) -> ServeProcess {
        let mut cmd = baton(workspace, home);
        cmd.args(["serve", "--port", "0"]).args(extra);
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn baton serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the URL line");
        let start = line
            .find("http://")
            .unwrap_or_else(|| panic!("no URL in {line:?}"));
        let base = line[start..]
            .split(|c: char| c == '/' || c.is_whitespace() || c == ',')
            .take(3)
            .collect::<Vec<_>>()
            .join("/");
        ServeProcess { child, base }
    }

    /// SIGTERM; the server must stop cleanly (exit 0).
    pub fn stop(mut self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        let code = self.child.wait().expect("wait for baton serve");
        assert_eq!(code.code(), Some(0), "baton serve after SIGTERM: {code:?}");
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        // A failed assertion must not leave the server running.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An OpenAI-compatible embeddings server (the wire of OpenAI's API reference) on wiremock: a
/// vector from the words of each input (hashed into 16 dimensions), usage as the server counts
/// it (~4 bytes a token); it remembers every input.
pub struct EmbeddingServer {
    pub inputs: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl wiremock::Respond for EmbeddingServer {
    fn respond(&self, request: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let inputs: Vec<String> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        let data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let mut v = vec![0.0f32; 16];
                for word in text
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                {
                    let h = word
                        .bytes()
                        .fold(7u32, |h, b| h.wrapping_mul(31) ^ u32::from(b));
                    v[h as usize % 16] += 1.0;
                }
                json!({"object": "embedding", "index": i, "embedding": v})
            })
            .collect();
        let tokens: usize = inputs.iter().map(|t| t.len() / 4 + 1).sum();
        self.inputs.lock().unwrap().extend(inputs);
        wiremock::ResponseTemplate::new(200).set_body_json(json!({
            "object": "list", "data": data, "model": "mock-embed",
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}
        }))
    }
}
