//! Drives the standard registry end to end in a real temporary workspace, the way the engine
//! does: tool calls with raw argument text in, results out.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use baton_core::{FINISH_TOOL, ToolCall, ToolOutcome, ToolResult};
use baton_tools::{ToolContext, ToolRegistry, Workspace};
use std::path::Path;
use std::time::Duration;

fn context(root: &Path) -> ToolContext<'static> {
    ToolContext {
        workspace: Workspace::new(root).unwrap(),
        shell_timeout: Duration::from_secs(30),
        secret_env_vars: vec![],
        exec: baton_tools::ExecEnv::unconfined(),
        run: None,
    }
}

async fn call(
    registry: &ToolRegistry,
    ctx: &ToolContext<'_>,
    name: &str,
    args: &str,
) -> ToolResult {
    let call = ToolCall {
        id: "call-1".into(),
        name: name.into(),
        arguments: args.into(),
    };
    registry.execute(ctx, &call).await
}

#[tokio::test]
async fn write_read_edit_grep_list_shell_finish() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let tools = ToolRegistry::standard();

    let r = call(
        &tools,
        &ctx,
        "write_file",
        r##"{"path": "src/greet.sh", "content": "#!/bin/sh\necho \"hello $1\"\n"}"##,
    )
    .await;
    assert_eq!(r.outcome, ToolOutcome::Success, "{}", r.content);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/greet.sh")).unwrap(),
        "#!/bin/sh\necho \"hello $1\"\n"
    );

    let r = call(&tools, &ctx, "read_file", r#"{"path": "src/greet.sh"}"#).await;
    assert_eq!(
        r.content,
        "src/greet.sh: lines 1-2 of 2\n     1\t#!/bin/sh\n     2\techo \"hello $1\"\n"
    );

    let r = call(
        &tools,
        &ctx,
        "edit_file",
        r#"{"path": "src/greet.sh", "old_string": "hello", "new_string": "goodbye", "reason": "junk field"}"#,
    )
    .await;
    assert_eq!(r.outcome, ToolOutcome::Success, "{}", r.content);

    let r = call(&tools, &ctx, "grep", r#"{"pattern": "good\\w+"}"#).await;
    assert_eq!(r.content, "src/greet.sh:2: echo \"goodbye $1\"\n");

    let r = call(&tools, &ctx, "list_dir", "").await;
    assert_eq!(r.content, "src/\nsrc/greet.sh\n");

    let r = call(
        &tools,
        &ctx,
        "shell",
        r#"{"command": "sh src/greet.sh world > out.txt && cat out.txt"}"#,
    )
    .await;
    assert_eq!(r.outcome, ToolOutcome::Success, "{}", r.content);
    assert_eq!(r.exit_code, Some(0));
    assert_eq!(r.content, "exit code: 0\n--- stdout ---\ngoodbye world\n");
    assert!(dir.path().join("out.txt").exists());

    let r = call(
        &tools,
        &ctx,
        FINISH_TOOL,
        r#"{"summary": "greet.sh says goodbye"}"#,
    )
    .await;
    assert_eq!(r, ToolResult::success("greet.sh says goodbye"));
}

#[tokio::test]
async fn malformed_arguments_and_unknown_tools_are_error_results() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let tools = ToolRegistry::standard();

    let r = call(&tools, &ctx, "read_file", r#"{"path": "a.txt""#).await;
    assert_eq!(r.outcome, ToolOutcome::Error);
    assert!(
        r.content.starts_with("arguments are not valid JSON: "),
        "{}",
        r.content
    );
    assert!(
        r.content.contains("send a JSON object matching the schema"),
        "{}",
        r.content
    );

    let r = call(&tools, &ctx, "read_file", r#""a.txt""#).await;
    assert!(r.content.contains("must be a JSON object"), "{}", r.content);

    let r = call(&tools, &ctx, "write_file", r#"{"path": "a.txt"}"#).await;
    assert!(
        r.content.contains("missing field `content`"),
        "{}",
        r.content
    );

    let r = call(&tools, &ctx, "read_file", r#"{"path": 42}"#).await;
    assert!(r.content.contains("invalid type"), "{}", r.content);

    let r = call(&tools, &ctx, "delete_everything", "{}").await;
    assert_eq!(r.outcome, ToolOutcome::Error);
    assert_eq!(
        r.content,
        "unknown tool 'delete_everything'; the available tools are: read_file, write_file, \
         edit_file, list_dir, grep, shell, finish"
    );

    let r = call(
        &tools,
        &ctx,
        "write_file",
        r#"{"path": "../escape.txt", "content": "x"}"#,
    )
    .await;
    assert_eq!(r.outcome, ToolOutcome::Error);
    assert!(r.content.contains("outside the workspace"), "{}", r.content);
    assert!(!dir.path().parent().unwrap().join("escape.txt").exists());
}
