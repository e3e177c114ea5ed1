//! Builds journal records for tests and benchmarks: a run's events with consecutive seqs.

#![allow(dead_code)]

use baton_core::{
    AssistantMessage, Event, EventRecord, Limits, ModelSettings, ProviderKind, ResponseMode, RunId,
    RunSettings, ToolCall, ToolEffect, ToolResult,
};

pub struct Journal {
    pub run_id: RunId,
    pub records: Vec<EventRecord>,
}

impl Journal {
    pub fn new() -> Journal {
        Journal {
            run_id: RunId::new(),
            records: Vec::new(),
        }
    }

    /// Appends `event`; returns its seq.
    pub fn push(&mut self, event: Event) -> u64 {
        let seq = self.records.len() as u64;
        self.records.push(EventRecord {
            run_id: self.run_id.clone(),
            seq,
            at: jiff::Timestamp::UNIX_EPOCH,
            event,
        });
        seq
    }

    pub fn start(&mut self, goal: &str) -> u64 {
        self.push(Event::RunStarted {
            goal: goal.into(),
            workspace: "/w".into(),
            settings: RunSettings {
                tasks: Default::default(),
                model: ModelSettings {
                    provider: ProviderKind::OpenAiCompatible,
                    base_url: "http://127.0.0.1:1/v1".into(),
                    model: "m".into(),
                    response_mode: ResponseMode::Streaming,
                    tool_choice: Default::default(),
                    reasoning: Default::default(),
                    wire_api: Default::default(),
                },
                limits: Limits {
                    max_turns: 10,
                    shell_timeout_secs: 5,
                },
                context: Default::default(),
                budget: Default::default(),
                loop_detection: Default::default(),
                endings: Default::default(),
            },
            system_prompt: "You are a coding agent.".into(),
            project_instructions: None,
            tools: Vec::new(),
        })
    }

    /// An assistant message with optional text and one tool call per `(id, name, arguments)`.
    pub fn model(&mut self, text: Option<&str>, calls: &[(&str, &str, &str)]) -> u64 {
        self.push(Event::ModelCallFinished {
            turn: 1,
            call: 1,
            message: AssistantMessage {
                content: text.map(Into::into),
                tool_calls: calls
                    .iter()
                    .map(|(id, name, arguments)| ToolCall {
                        id: (*id).into(),
                        name: (*name).into(),
                        arguments: (*arguments).into(),
                    })
                    .collect(),
                ..Default::default()
            },
            usage: None,
            cost_usd: None,
            finish_reason: None,
            served_model: None,
            duration_ms: 1,
        })
    }

    /// A tool call's start and finish; returns the seq of the finish.
    pub fn tool(&mut self, id: &str, name: &str, arguments: &str, output: &str) -> u64 {
        self.push(Event::ToolCallStarted {
            turn: 1,
            call_id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
            effect: ToolEffect::ReadOnly,
        });
        self.push(Event::ToolCallFinished {
            turn: 1,
            call_id: id.into(),
            result: ToolResult::success(output),
            duration_ms: 1,
        })
    }

    pub fn note(&mut self, text: &str) -> u64 {
        self.push(Event::NoteAdded { text: text.into() })
    }
}
