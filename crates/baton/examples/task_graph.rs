//! A task graph built in code: two tasks, the second depending on the first, each with an
//! acceptance check (a shell command, run sandboxed), and a final check over both. The engine
//! starts each task in a fresh context, runs its check when the model says it is done, and
//! feeds a failed check's output back; the example's model gets the first try wrong on purpose.
//!
//! `cargo run -p baton --example task_graph`

mod common;

use std::sync::Arc;

use baton::core::Event;
use baton::core::task::{PlanFile, PlanFileTask};
use baton::{RunOutcome, Runtime};
use serde_json::json;

fn main() -> std::process::ExitCode {
    common::main(run)
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let scratch = common::Scratch::new()?;
    let plan = PlanFile {
        check: Some("test \"$(cat greeting.txt)\" = 'hello, world'".into()),
        tasks: vec![
            PlanFileTask {
                id: Some("name".into()),
                title: Some("Write the name".into()),
                instructions: Some("Write `world` to name.txt.".into()),
                check: Some("grep -qx world name.txt".into()),
                ..PlanFileTask::default()
            },
            PlanFileTask {
                id: Some("greet".into()),
                title: Some("Write the greeting".into()),
                instructions: Some(
                    "Write `hello, NAME` to greeting.txt, NAME from name.txt.".into(),
                ),
                deps: vec!["name".into()],
                check: Some("grep -qx 'hello, world' greeting.txt".into()),
                ..PlanFileTask::default()
            },
        ],
    }
    .validate()?;
    let workspace = scratch.workspace();
    let model = Arc::new(common::FnModel::new(move |request| {
        let prompt = common::prompt_text(request);
        let results = common::tool_results(request).len();
        if prompt.contains("Write `world` to name.txt") {
            // First try: a typo; after the check's failure is in the prompt, the fix.
            match (results, workspace.join("name.txt").exists()) {
                (0, _) => common::call(
                    "write_file",
                    json!({"path": "name.txt", "content": "wrold\n"}),
                ),
                (_, true) if prompt.contains("failed") && results < 3 => common::call(
                    "write_file",
                    json!({"path": "name.txt", "content": "world\n"}),
                ),
                _ => common::call("finish", json!({"summary": "name.txt written"})),
            }
        } else if results == 0 {
            common::call(
                "write_file",
                json!({"path": "greeting.txt", "content": "hello, world\n"}),
            )
        } else {
            common::call("finish", json!({"summary": "greeting.txt written"}))
        }
    }));
    let (observer, mut events) = baton::events::channel();
    let runtime = Runtime::builder()
        .workspace(scratch.workspace())
        .store(scratch.store().await?)
        // Snapshots live in the user's state directory; a scratch workspace needs none.
        .snapshots(baton::Snapshots::Off)
        .provider(model)
        .observer(Arc::new(observer))
        .build()
        .await?;
    let outcome = runtime
        .start_with_plan("write a greeting for the name", plan)
        .await?;
    println!("{outcome:?}");
    let mut checks = Vec::new();
    while let Ok(record) = events.try_recv() {
        if let Event::CheckFinished { passed, .. } = record.event {
            checks.push(passed);
        }
    }
    println!("checks: {checks:?}");
    match outcome {
        // name: fails, then passes; greet: passes; the final check: passes.
        RunOutcome::Finished { .. } if checks == [false, true, true, true] => Ok(()),
        other => Err(format!("expected a finish after checks [false, true, true, true], got {other:?} with {checks:?}").into()),
    }
}
