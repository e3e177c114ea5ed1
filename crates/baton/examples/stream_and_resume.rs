//! An application that starts a run, prints its events as they are journaled, and resumes it
//! after it paused: the run stops at its turn limit, the app raises the limit and resumes, and
//! the journal carries on where it stopped — no model call is made twice.
//!
//! `cargo run -p baton --example stream_and_resume`

mod common;

use std::sync::Arc;

use baton::config::ConfigLayer;
use baton::{RunOutcome, Runtime, SettingsOverride};
use serde_json::json;

fn main() -> std::process::ExitCode {
    common::main(run)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let scratch = common::Scratch::new()?;
    // Three steps: two files, then finish.
    let model = Arc::new(common::FnModel::new(
        |request| match common::tool_results(request).len() {
            0 => common::call("write_file", json!({"path": "a.txt", "content": "a\n"})),
            1 => common::call("write_file", json!({"path": "b.txt", "content": "b\n"})),
            _ => common::call("finish", json!({"summary": "wrote a.txt and b.txt"})),
        },
    ));
    let (observer, mut events) = baton::events::channel();
    let printer = tokio::spawn(async move {
        let mut kinds = Vec::new();
        while let Some(record) = events.recv().await {
            println!("#{:<3} {}", record.seq, record.event.kind());
            kinds.push(record.event.kind().to_string());
        }
        kinds
    });
    let runtime = Runtime::builder()
        .workspace(scratch.workspace())
        .store(scratch.store().await?)
        // Snapshots live in the user's state directory; a scratch workspace needs none.
        .snapshots(baton::Snapshots::Off)
        .provider(model.clone())
        .observer(Arc::new(observer))
        // A limit of one turn: the run pauses after the first file.
        .config(ConfigLayer {
            max_turns: Some(1),
            ..ConfigLayer::default()
        })
        .build()
        .await?;
    let RunOutcome::Paused { run_id, reason, .. } = runtime.start("write a.txt and b.txt").await?
    else {
        return Err("the run should have paused at its turn limit".into());
    };
    println!("paused ({reason:?}); resuming with a higher limit");
    let calls_before = model.calls();
    let more_turns = SettingsOverride::edit(|settings| settings.limits.max_turns = 10);
    let outcome = runtime.resume(&run_id, &more_turns).await?;
    println!("{outcome:?}");
    drop(runtime);
    // The engine (and with it the channel's sender) is gone: the printer sees the end.
    let kinds = tokio::time::timeout(std::time::Duration::from_secs(10), printer).await??;
    if !matches!(outcome, RunOutcome::Finished { .. }) {
        return Err(format!("expected the resumed run to finish, got {outcome:?}").into());
    }
    // One call before the pause, two after it: nothing was asked twice.
    if (calls_before, model.calls()) != (1, 3) {
        return Err(format!("model calls: {calls_before} then {}", model.calls()).into());
    }
    for kind in ["run_started", "run_paused", "run_resumed", "run_finished"] {
        if !kinds.iter().any(|k| k == kind) {
            return Err(format!("no {kind} event streamed: {kinds:?}").into());
        }
    }
    Ok(())
}
