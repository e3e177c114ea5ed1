#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The runtime builder on a real SQLite journal and a real workspace: what it refuses before
//! anything starts, and that a program's own provider needs no endpoint configured.

use std::sync::Arc;

use baton::config::ConfigLayer;
use baton::core::{AssistantMessage, ModelReply, ToolCall};
use baton::journal_store::{SqliteStore, Store};
use baton::model::ScriptedProvider;
use baton::{Error, RunOutcome, Runtime};

fn finish(summary: &str) -> ModelReply {
    ModelReply {
        message: AssistantMessage {
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "finish".into(),
                arguments: serde_json::json!({ "summary": summary }).to_string(),
            }],
            ..Default::default()
        },
        usage: None,
        finish_reason: Some("tool_calls".into()),
        served_model: None,
    }
}

async fn store(dir: &std::path::Path) -> Arc<dyn Store> {
    Arc::new(SqliteStore::open(&dir.join("baton.db")).await.unwrap())
}

#[tokio::test]
async fn without_a_workspace_or_with_a_file_for_one_it_is_a_usage_error() {
    let missing = Runtime::builder().build().await.err().expect("refused");
    assert!(matches!(missing, Error::Usage(_)), "{missing:?}");
    assert!(missing.to_string().contains("workspace"), "{missing}");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let not_a_dir = Runtime::builder()
        .workspace(&file)
        .build()
        .await
        .err()
        .expect("refused");
    assert!(not_a_dir.is_usage(), "{not_a_dir:?}");
    assert!(
        not_a_dir.to_string().contains("not a directory"),
        "{not_a_dir}"
    );
}

#[tokio::test]
async fn a_bad_value_in_the_given_layer_is_named_before_anything_is_journaled() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let journal = store(dir.path()).await;
    let error = Runtime::builder()
        .workspace(&ws)
        .store(journal.clone())
        .provider(Arc::new(ScriptedProvider::new(vec![])))
        .config(ConfigLayer {
            max_time: Some("soon".into()),
            ..ConfigLayer::default()
        })
        .build()
        .await
        .err()
        .expect("refused");
    assert!(error.is_usage(), "{error:?}");
    assert!(error.to_string().contains("soon"), "{error}");
    assert!(journal.list_runs().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_programs_own_provider_runs_without_an_endpoint_configured() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let provider = Arc::new(ScriptedProvider::new(vec![Ok(finish("nothing to do"))]));
    let runtime = Runtime::builder()
        .workspace(&ws)
        .store(store(dir.path()).await)
        .provider(provider.clone())
        // Snapshots would go to the user's state directory, outside this test's files.
        .snapshots(baton::Snapshots::Off)
        .build()
        .await
        .unwrap();
    let outcome = runtime.start("check that all is well").await.unwrap();
    assert!(
        matches!(&outcome, RunOutcome::Finished { summary, .. } if summary == "nothing to do"),
        "{outcome:?}"
    );
    assert_eq!(provider.remaining(), 0, "the given provider answered");
    let runs = runtime.store().list_runs().await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, baton::RunStatus::Finished);
}
