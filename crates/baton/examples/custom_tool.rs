//! A custom tool added to the standard set: `word_count` counts the words of a workspace file.
//! As a `TypedTool`, its argument struct gives its JSON schema (what the model sees) and the
//! framework parses the model's arguments into it; an unusable argument is an error result.
//!
//! `cargo run -p baton --example custom_tool` — a stand-in model writes a file, counts its
//! words with the new tool and finishes; the example checks the count reached the model.

mod common;

use std::sync::Arc;

use baton::core::{ToolEffect, ToolResult};
use baton::tools::{ToolContext, ToolRegistry, TypedTool};
use baton::{RunOutcome, Runtime};
use serde_json::json;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct WordCountArgs {
    /// The file to count, relative to the workspace.
    path: String,
}

/// Reads a file inside the workspace (the workspace confines the path) and counts its words.
struct WordCount;

#[async_trait::async_trait]
impl TypedTool for WordCount {
    type Args = WordCountArgs;
    const NAME: &'static str = "word_count";
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;

    fn description(&self) -> String {
        "Count the words of a text file in the workspace.".into()
    }

    async fn run(&self, ctx: &ToolContext<'_>, args: WordCountArgs) -> ToolResult {
        let path = match ctx
            .workspace
            .resolve(&args.path, baton::tools::Access::Read)
        {
            Ok(path) => path,
            Err(e) => return ToolResult::error(e.to_string()),
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => ToolResult::success(format!("{} words", text.split_whitespace().count())),
            Err(e) => ToolResult::error(format!("cannot read {}: {e}", args.path)),
        }
    }
}

fn main() -> std::process::ExitCode {
    common::main(run)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let scratch = common::Scratch::new()?;
    let model = Arc::new(common::FnModel::new(
        |request| match common::tool_results(request).len() {
            0 => common::call(
                "write_file",
                json!({"path": "notes.txt", "content": "one two three four\n"}),
            ),
            1 => common::call("word_count", json!({"path": "notes.txt"})),
            _ => {
                let results = common::tool_results(request);
                let counted = results.last().map_or("", String::as_str);
                common::call(
                    "finish",
                    json!({"summary": format!("notes.txt has {counted}")}),
                )
            }
        },
    ));
    let runtime = Runtime::builder()
        .workspace(scratch.workspace())
        .store(scratch.store().await?)
        // Snapshots live in the user's state directory; a scratch workspace needs none.
        .snapshots(baton::Snapshots::Off)
        .provider(model.clone())
        .tools(ToolRegistry::standard().with(Arc::new(WordCount)))
        .build()
        .await?;
    let outcome = runtime.start("count the words of notes.txt").await?;
    println!("{outcome:?}");
    match outcome {
        RunOutcome::Finished { summary, .. } if summary.contains("4 words") => Ok(()),
        other => Err(format!("expected a finish reporting 4 words, got {other:?}").into()),
    }
}
