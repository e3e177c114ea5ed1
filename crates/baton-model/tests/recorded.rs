#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Responses recorded from a real llama.cpp server (llama-cpp-python 0.3, SmolLM2-135M,
//! `chatml-function-calling`, a forced `write_file` tool call), replayed byte for byte: the
//! client must read a server we did not write, quirks included (a legacy `function_call` next
//! to `tool_calls`, `null` fields, no usage in streams).

use baton_core::{Message, ModelRequest, ResponseMode, ToolChoice};
use baton_model::openai::{OpenAiConfig, OpenAiProvider};
use baton_model::{ModelProvider, NoObserver};
use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const STREAM: &str = include_str!("fixtures/llamacpp_stream_tool_call.sse");
const WHOLE: &str = include_str!("fixtures/llamacpp_whole_tool_call.json");

fn request(mode: ResponseMode) -> ModelRequest {
    ModelRequest {
        model: "smollm2".into(),
        messages: vec![Message::User {
            content: "Create hello.txt".into(),
        }],
        tools: vec![],
        response_mode: mode,
        tool_choice: ToolChoice::Auto,
        reasoning: Default::default(),
        provider_compaction_at: Default::default(),
    }
}

async fn replay(body: &str, content_type: &str, mode: ResponseMode) -> baton_core::ModelReply {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(body.as_bytes().to_vec(), content_type),
        )
        .mount(&server)
        .await;
    let provider = OpenAiProvider::new(OpenAiConfig::new(format!("{}/v1", server.uri()))).unwrap();
    provider
        .complete(&request(mode), &mut NoObserver)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_recorded_llamacpp_stream_gives_the_tool_call_the_deltas_spell_out() {
    // The reference: the tool call's pieces, concatenated straight from the recording.
    let chunks: Vec<Value> = STREAM
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let pieces = chunks.iter().filter_map(|c| {
        c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str()
    });
    let expected_arguments: String = pieces.collect();
    assert!(
        chunks.len() > 20,
        "the recording streams the arguments in many deltas"
    );

    let reply = replay(STREAM, "text/event-stream", ResponseMode::Streaming).await;
    assert_eq!(reply.message.tool_calls.len(), 1);
    let call = &reply.message.tool_calls[0];
    assert_eq!(call.name, "write_file");
    assert!(call.id.starts_with("call__0_write_file"));
    assert_eq!(call.arguments, expected_arguments);
    assert!(
        serde_json::from_str::<Value>(&call.arguments)
            .unwrap()
            .is_object()
    );
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(reply.served_model.as_deref(), Some("smollm2"));
    assert_eq!(
        reply.usage, None,
        "llama.cpp reports no usage in streams: unknown, not zero"
    );
}

#[tokio::test]
async fn a_recorded_llamacpp_whole_answer_carries_its_usage() {
    let recorded: Value = serde_json::from_str(WHOLE).unwrap();
    let reply = replay(WHOLE, "application/json", ResponseMode::Whole).await;
    let call = &reply.message.tool_calls[0];
    assert_eq!(call.name, "write_file");
    assert_eq!(
        call.arguments,
        recorded["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    );
    let usage = reply.usage.unwrap();
    assert_eq!(
        usage.prompt_tokens,
        recorded["usage"]["prompt_tokens"].as_u64().unwrap()
    );
    assert_eq!(
        usage.completion_tokens,
        recorded["usage"]["completion_tokens"].as_u64().unwrap()
    );
    assert_eq!(usage.cached_prompt_tokens, None);
}
