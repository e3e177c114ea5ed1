//! What the examples share: a model that answers with a function of the request (a stand-in
//! for a real server, so the examples run anywhere), reply builders, and a scratch workspace
//! with its own journal.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use baton::core::{AssistantMessage, Message, ModelReply, ModelRequest, ToolCall, Usage};
use baton::journal_store::{SqliteStore, Store};
use baton::model::{ModelError, ModelProvider, StreamObserver};

/// The answer to one request.
pub type Respond = dyn Fn(&ModelRequest) -> ModelReply + Send + Sync;

/// A model whose every answer is `respond(request)`; counts the calls it served.
pub struct FnModel {
    respond: Box<Respond>,
    calls: AtomicUsize,
}

impl FnModel {
    pub fn new(respond: impl Fn(&ModelRequest) -> ModelReply + Send + Sync + 'static) -> Self {
        FnModel {
            respond: Box::new(respond),
            calls: AtomicUsize::new(0),
        }
    }

    /// How many requests it answered.
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl ModelProvider for FnModel {
    fn describe(&self) -> String {
        "example-model".into()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        _observer: &mut dyn StreamObserver,
    ) -> Result<ModelReply, ModelError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok((self.respond)(request))
    }
}

/// A reply that calls tool `name` with `arguments`.
pub fn call(name: &str, arguments: serde_json::Value) -> ModelReply {
    ModelReply {
        message: AssistantMessage {
            tool_calls: vec![ToolCall {
                id: String::new(),
                name: name.into(),
                arguments: arguments.to_string(),
            }],
            ..Default::default()
        },
        usage: Some(Usage {
            prompt_tokens: 200,
            completion_tokens: 20,
            ..Default::default()
        }),
        finish_reason: Some("tool_calls".into()),
        served_model: None,
    }
}

/// The text of the tool results the model has been shown so far, newest last.
pub fn tool_results(request: &ModelRequest) -> Vec<String> {
    request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

/// All the text of a request (system prompt, briefs, tool results).
pub fn prompt_text(request: &ModelRequest) -> String {
    request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::System { content } | Message::User { content } => Some(content.clone()),
            Message::Tool { content, .. } => Some(content.clone()),
            Message::Assistant(_) => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A scratch workspace (removed when dropped) and a journal of its own beside it.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> std::io::Result<Scratch> {
        let dir = tempfile::tempdir()?;
        std::fs::create_dir(dir.path().join("work"))?;
        Ok(Scratch { dir })
    }

    /// The directory the agent works in.
    pub fn workspace(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// A SQLite journal outside the workspace.
    pub async fn store(&self) -> Result<Arc<dyn Store>, baton::journal_store::StoreError> {
        let store = SqliteStore::open(&self.dir.path().join("baton.db")).await?;
        Ok(Arc::new(store))
    }
}

/// An example's `main`: the sandbox trampoline first (commands the agent runs are confined by
/// re-executing this program), then `body` on a Tokio runtime; an error exits 1.
pub fn main<F>(body: impl FnOnce() -> F) -> std::process::ExitCode
where
    F: std::future::Future<Output = Result<(), Box<dyn std::error::Error>>>,
{
    if let Some(code) = baton::sandbox_trampoline() {
        return code;
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("no Tokio runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(body()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("example failed: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
