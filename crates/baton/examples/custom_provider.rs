//! A custom model provider: any `ModelProvider` can drive a run — an in-process model, a
//! wrapper adding routing or caching in front of an HTTP provider, a test double. This one is
//! a tiny deterministic "model" that solves its goal with tools: it reads `numbers.txt`, sums
//! it, writes `sum.txt` and finishes, deciding each step from the tool results it was shown.
//!
//! `cargo run -p baton --example custom_provider`

mod common;

use std::sync::Arc;

use baton::core::{Message, ModelReply, ModelRequest};
use baton::model::{ModelError, ModelProvider, StreamDelta, StreamObserver};
use baton::{RunOutcome, Runtime};
use serde_json::json;

/// Adds up the numbers of a file, one tool call per turn.
struct Adder;

#[async_trait::async_trait]
impl ModelProvider for Adder {
    fn describe(&self) -> String {
        "adder".into()
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        observer: &mut dyn StreamObserver,
    ) -> Result<ModelReply, ModelError> {
        // What a streaming provider would show while the reply arrives.
        observer.on_delta(&StreamDelta::Text("thinking about numbers".into()));
        let last_result = request.messages.iter().rev().find_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        });
        let turn = common::tool_results(request).len();
        Ok(match (turn, last_result) {
            (0, _) => common::call("read_file", json!({"path": "numbers.txt"})),
            (1, Some(text)) => {
                // read_file numbers its lines ("     1\t20") under a header line.
                let sum: i64 = text
                    .lines()
                    .filter_map(|line| line.split_once('\t')?.1.trim().parse::<i64>().ok())
                    .sum();
                common::call(
                    "write_file",
                    json!({"path": "sum.txt", "content": format!("{sum}\n")}),
                )
            }
            _ => common::call("finish", json!({"summary": "wrote the sum to sum.txt"})),
        })
    }
}

fn main() -> std::process::ExitCode {
    common::main(run)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let scratch = common::Scratch::new()?;
    std::fs::write(scratch.workspace().join("numbers.txt"), "20\n22\n")?;
    let runtime = Runtime::builder()
        .workspace(scratch.workspace())
        .store(scratch.store().await?)
        // Snapshots live in the user's state directory; a scratch workspace needs none.
        .snapshots(baton::Snapshots::Off)
        .provider(Arc::new(Adder))
        .build()
        .await?;
    let outcome = runtime
        .start("sum the numbers in numbers.txt into sum.txt")
        .await?;
    println!("{outcome:?}");
    let sum = std::fs::read_to_string(scratch.workspace().join("sum.txt"))?;
    match outcome {
        RunOutcome::Finished { .. } if sum.trim() == "42" => Ok(()),
        other => {
            Err(format!("expected sum.txt = 42 and a finish, got {sum:?} and {other:?}").into())
        }
    }
}
