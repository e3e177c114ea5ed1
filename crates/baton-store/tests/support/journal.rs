//! Builds realistic, valid journals (accepted by `baton_core::replay`) for tests and benchmarks:
//! a run start, turns of model call + tool call with outputs of a few hundred bytes, pauses,
//! resumes and a finish.

#![allow(dead_code)] // Each test or bench target uses a different part.

use baton_core::{
    AssistantMessage, Event, EventRecord, Limits, ModelSettings, PauseReason, ProviderKind,
    ResponseMode, RunId, RunSettings, ToolCall, ToolEffect, ToolResult, ToolSpec, Usage,
};
use jiff::{SignedDuration, Timestamp};

pub struct Journal {
    run_id: RunId,
    next_seq: u64,
    turn: u32,
    call: u32,
    at: Timestamp,
    /// Events of the current turn not yet handed out by [`Journal::take`].
    pending: std::collections::VecDeque<EventRecord>,
}

pub fn settings() -> RunSettings {
    RunSettings {
        tasks: Default::default(),
        model: ModelSettings {
            provider: ProviderKind::OpenAiCompatible,
            base_url: "http://127.0.0.1:8080/v1".into(),
            model: "smollm2-135m-instruct".into(),
            response_mode: ResponseMode::Streaming,
            tool_choice: Default::default(),
            reasoning: Default::default(),
            wire_api: Default::default(),
        },
        limits: Limits::default(),
        context: Default::default(),
        budget: Default::default(),
        loop_detection: Default::default(),
        endings: Default::default(),
    }
}

fn tools() -> Vec<ToolSpec> {
    let path_arg = serde_json::json!({
        "type": "object",
        "properties": { "path": { "type": "string", "description": "Path inside the workspace" } },
        "required": ["path"],
    });
    vec![
        ToolSpec {
            name: "read_file".into(),
            description: "Read a file of the workspace.".into(),
            parameters: path_arg,
            effect: ToolEffect::ReadOnly,
        },
        ToolSpec {
            name: "shell".into(),
            description: "Run a shell command in the workspace.".into(),
            parameters: serde_json::json!({
                "type": "object",
                "properties": { "command": { "type": "string" } },
                "required": ["command"],
            }),
            effect: ToolEffect::Mutating,
        },
        ToolSpec {
            name: baton_core::FINISH_TOOL.into(),
            description: "Declare the goal reached.".into(),
            parameters: serde_json::json!({
                "type": "object",
                "properties": { "summary": { "type": "string" } },
            }),
            effect: ToolEffect::ReadOnly,
        },
    ]
}

/// Deterministic text of about `len` bytes that looks like a source file.
fn file_text(turn: u32, len: usize) -> String {
    let mut out = String::with_capacity(len + 64);
    let mut i = 0;
    while out.len() < len {
        out.push_str(&format!(
            "pub fn item_{turn}_{i}(x: u32) -> u32 {{ x.wrapping_mul({i}) + {turn} }}\n"
        ));
        i += 1;
    }
    out
}

impl Journal {
    pub fn new(run_id: RunId) -> Journal {
        Journal {
            run_id,
            next_seq: 0,
            turn: 0,
            call: 0,
            at: Timestamp::now(),
            pending: Default::default(),
        }
    }

    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// Sequence number of the next event handed out.
    pub fn next_seq(&self) -> u64 {
        self.pending.front().map_or(self.next_seq, |r| r.seq)
    }

    /// Whole-turn and run-level events may only come between turns.
    fn between_turns(&self) {
        assert!(
            self.pending.is_empty(),
            "take() the rest of the current turn first"
        );
    }

    fn record(&mut self, event: Event) -> EventRecord {
        self.at = self
            .at
            .checked_add(SignedDuration::from_millis(7))
            .unwrap_or(self.at);
        let record = EventRecord {
            run_id: self.run_id.clone(),
            seq: self.next_seq,
            at: self.at,
            event,
        };
        self.next_seq += 1;
        record
    }

    pub fn started(&mut self, goal: &str) -> EventRecord {
        self.between_turns();
        self.record(Event::RunStarted {
            goal: goal.into(),
            workspace: "/home/dev/project".into(),
            settings: settings(),
            system_prompt: "You are a careful coding agent. Work in small steps, run the checks, \
                            and call finish only when they pass."
                .into(),
            project_instructions: Some("Run `cargo test` before finishing.".into()),
            tools: tools(),
        })
    }

    /// One turn: the model reads a file (output of about `output_len` bytes). Six events.
    pub fn turn(&mut self, output_len: usize) -> Vec<EventRecord> {
        self.between_turns();
        self.turn_calling(
            "read_file",
            &format!("{{\"path\":\"src/mod_{}.rs\"}}", self.turn + 1),
            file_text(self.turn + 1, output_len),
        )
    }

    fn turn_calling(&mut self, tool: &str, arguments: &str, output: String) -> Vec<EventRecord> {
        self.turn += 1;
        self.call += 1;
        let (turn, call) = (self.turn, self.call);
        let call_id = format!("call_{turn:05}");
        let tool_call = ToolCall {
            id: call_id.clone(),
            name: tool.into(),
            arguments: arguments.into(),
        };
        vec![
            self.record(Event::TurnStarted { turn }),
            self.record(Event::ModelCallStarted {
                turn,
                call,
                attempt: 1,
                request_sha256: format!("{:064x}", u128::from(turn) * 0x9e37_79b9_7f4a_7c15),
                context: None,
            }),
            self.record(Event::ModelCallFinished {
                turn,
                call,
                message: AssistantMessage {
                    content: Some(format!(
                        "Turn {turn}: I will look at the next module to see how the handler is \
                         wired before changing the tests."
                    )),
                    tool_calls: vec![tool_call],
                    ..Default::default()
                },
                usage: Some(Usage {
                    prompt_tokens: 1_200 + u64::from(turn) * 150,
                    completion_tokens: 60,
                    cached_prompt_tokens: Some(1_000 + u64::from(turn) * 140),
                    ..Default::default()
                }),
                cost_usd: None,
                finish_reason: Some("tool_calls".into()),
                served_model: Some("smollm2-135m-instruct".into()),
                duration_ms: 850,
            }),
            self.record(Event::ToolCallStarted {
                turn,
                call_id: call_id.clone(),
                name: tool.into(),
                arguments: arguments.into(),
                effect: ToolEffect::ReadOnly,
            }),
            self.record(Event::ToolCallFinished {
                turn,
                call_id,
                result: ToolResult::success(output),
                duration_ms: 3,
            }),
            self.record(Event::TurnFinished { turn }),
        ]
    }

    /// The next `n` events of an endless run of turns with outputs of 200–800 bytes. Events
    /// come one at a time, so a journal can end (and later continue) in the middle of a turn.
    pub fn take(&mut self, n: usize) -> Vec<EventRecord> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            if self.pending.is_empty() {
                let output_len = 200 + (self.turn as usize * 37) % 600;
                let turn = self.turn(output_len);
                self.pending.extend(turn);
            }
            out.extend(self.pending.pop_front());
        }
        out
    }

    pub fn paused(&mut self) -> EventRecord {
        self.between_turns();
        self.record(Event::RunPaused {
            reason: PauseReason::Interrupted,
            detail: "Ctrl-C".into(),
        })
    }

    pub fn resumed(&mut self) -> EventRecord {
        self.between_turns();
        self.record(Event::RunResumed {
            settings: settings(),
        })
    }

    /// The model calls `finish` and the run is recorded as finished. Seven events.
    pub fn finish(&mut self) -> Vec<EventRecord> {
        self.between_turns();
        let mut out = self.turn_calling(
            baton_core::FINISH_TOOL,
            "{\"summary\":\"All tests pass.\"}",
            "All tests pass.".into(),
        );
        out.push(self.record(Event::RunFinished {
            summary: "All tests pass.".into(),
            finished_by: None,
        }));
        out
    }
}
