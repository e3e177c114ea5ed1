use baton_core::memory::REMEMBER_TOOL;
use baton_core::*;
use proptest::prelude::*;

use super::*;
use crate::tokens::{Encoding, RunningCount, TokenCounter};
use crate::{SYSTEM_PROMPT, assemble_with_report};

/// What happens next in the generated run.
#[derive(Clone, Debug)]
enum Step {
    /// A turn whose reply calls `read_file` once per output (of that many bytes), and
    /// `remember` too if set; first a compaction replaces this many of the oldest history
    /// entries, if set.
    Turn {
        outputs: Vec<usize>,
        remember: bool,
        compact: Option<usize>,
    },
    /// The user adds a note.
    Note,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (
            prop::collection::vec(0usize..60, 0..3),
            prop::bool::weighted(0.2),
            prop::option::weighted(0.15, 1usize..12),
        )
            .prop_map(|(outputs, remember, compact)| Step::Turn { outputs, remember, compact }),
        1 => Just(Step::Note),
    ]
}

fn settings(masking: Masking) -> RunSettings {
    let mut settings = crate::tests::settings();
    settings.context.masking = masking;
    settings
}

/// Appends events to a run and keeps its state, as the engine's journal does.
struct Run {
    seq: u64,
    turn: u32,
    calls: u32,
    state: RunState,
}

impl Run {
    fn new(masking: Masking) -> Run {
        let mut run = Run {
            seq: 0,
            turn: 0,
            calls: 0,
            state: RunState::default(),
        };
        run.push(Event::RunStarted {
            goal: "Keep the request the same".into(),
            workspace: "/w".into(),
            settings: settings(masking),
            system_prompt: SYSTEM_PROMPT.into(),
            project_instructions: None,
            tools: vec![ToolSpec {
                name: "read_file".into(),
                description: "Read a file".into(),
                parameters: serde_json::json!({"type": "object"}),
                effect: ToolEffect::ReadOnly,
            }],
        });
        run
    }

    fn push(&mut self, event: Event) {
        let record = EventRecord {
            run_id: RunId::from_string("r1"),
            seq: self.seq,
            at: jiff::Timestamp::from_second(1_000 + self.seq as i64).unwrap(),
            event,
        };
        self.state.apply(&record).unwrap();
        self.seq += 1;
    }

    /// Appends the events of `step`, each followed by `after` with the state it leaves.
    fn play(&mut self, step: &Step, after: &mut dyn FnMut(&RunState)) {
        let mut push = |run: &mut Run, events: Vec<Event>| {
            for event in events {
                run.push(event);
                after(&run.state);
            }
        };
        match step {
            Step::Turn {
                outputs,
                remember,
                compact,
            } => {
                self.turn += 1;
                push(self, vec![Event::TurnStarted { turn: self.turn }]);
                // A compaction comes between a turn's start and its model call.
                if let Some(n) = compact {
                    let events = self.compaction(*n);
                    push(self, events);
                }
                let events = self.turn(outputs, *remember);
                push(self, events);
            }
            Step::Note => {
                let text = format!("a note at event {}", self.seq);
                push(self, vec![Event::NoteAdded { text }]);
            }
        }
    }

    fn turn(&mut self, outputs: &[usize], remember: bool) -> Vec<Event> {
        self.calls += 1;
        let (turn, call) = (self.turn, self.calls);
        let mut calls: Vec<(String, String, String)> = outputs
            .iter()
            .enumerate()
            .map(|(i, &len)| {
                let output =
                    format!("line of turn {turn}\n").repeat(len / 14 + 1)[..len].to_string();
                (format!("c{turn}_{i}"), "read_file".to_string(), output)
            })
            .collect();
        if remember {
            let fact = serde_json::json!({ "fact": format!("fact of turn {turn}") });
            calls.push((format!("m{turn}"), REMEMBER_TOOL.into(), fact.to_string()));
        }
        let mut events = vec![
            Event::ModelCallStarted {
                turn,
                call,
                attempt: 1,
                request_sha256: "x".into(),
                context: None,
            },
            Event::ModelCallFinished {
                turn,
                call,
                message: AssistantMessage {
                    content: Some(format!("turn {turn}")),
                    tool_calls: calls
                        .iter()
                        .map(|(id, name, arguments)| ToolCall {
                            id: id.clone(),
                            name: name.clone(),
                            arguments: if name == REMEMBER_TOOL {
                                arguments.clone()
                            } else {
                                "{}".into()
                            },
                        })
                        .collect(),
                    ..Default::default()
                },
                usage: None,
                cost_usd: None,
                finish_reason: Some("tool_calls".into()),
                served_model: None,
                duration_ms: 1,
            },
        ];
        for (id, name, text) in calls {
            let remembers = name == REMEMBER_TOOL;
            events.push(Event::ToolCallStarted {
                turn,
                call_id: id.clone(),
                name,
                arguments: if remembers { text.clone() } else { "{}".into() },
                effect: ToolEffect::ReadOnly,
            });
            events.push(Event::ToolCallFinished {
                turn,
                call_id: id,
                result: ToolResult::success(if remembers { "remembered".into() } else { text }),
                duration_ms: 1,
            });
        }
        events.push(Event::TurnFinished { turn });
        events
    }

    fn compaction(&mut self, n: usize) -> Vec<Event> {
        let history = &self.state.history;
        let replaced = n.min(history.len());
        if replaced == 0 {
            return Vec::new();
        }
        vec![
            Event::CompactionStarted {
                turn: self.turn,
                replaced: replaced as u32,
                trigger: CompactionTrigger::Threshold,
                estimated_prompt_tokens: 1,
            },
            Event::CompactionFinished {
                turn: self.turn,
                summary: format!("summary at event {}", self.seq),
                replaced: replaced as u32,
                first_seq: history[0].seq,
                last_seq: history[replaced - 1].seq,
                left_out: 0,
                usage: None,
                cost_usd: None,
                served_model: None,
                duration_ms: 1,
            },
        ]
    }
}

const MASKING: Masking = Masking::OlderThan {
    keep_turns: 2,
    batch_turns: 3,
    min_bytes: 20,
};

/// What [`compare`] saw: requests compared, with masked outputs, with a working-memory tail,
/// and counted from the previous request's count.
#[derive(Default)]
struct Compared {
    requests: usize,
    masked: usize,
    tails: usize,
    counted_since: usize,
}

/// Plays `steps`; after every event, an assembler that saw every state and one that sees every
/// `stride`-th build the request from scratch would, and their token counts in `encoding` from
/// the previous request's (`count_since`) are the count from scratch.
fn compare(steps: &[Step], masking: Masking, stride: usize, encoding: Encoding) -> Compared {
    let mut run = Run::new(masking);
    let counter = TokenCounter::default();
    let mut every = (Assembler::default(), RunningCount::default());
    let mut some = (Assembler::default(), RunningCount::default());
    let mut seen = Compared::default();
    for step in steps {
        run.play(step, &mut |state| {
            let expected = assemble_with_report(state).unwrap();
            let count = counter.count(encoding, &expected.request);
            let check = |(assembler, running): &mut (Assembler, RunningCount)| {
                let built = assembler.assemble(state).unwrap();
                assert_eq!(
                    built.request, &expected.request,
                    "after event {}",
                    seen.requests
                );
                assert_eq!(built.masked_outputs, expected.masked_outputs);
                let since = counter.count_since(encoding, built.request, built.unchanged, running);
                assert_eq!(since, count, "after event {}", seen.requests);
                built.unchanged > 0
            };
            seen.counted_since += usize::from(check(&mut every));
            if seen.requests % stride == 0 {
                check(&mut some);
            }
            seen.requests += 1;
            seen.masked += usize::from(expected.masked_outputs > 0);
            seen.tails += usize::from(crate::working_memory(state).is_some());
        });
    }
    seen
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the run does — turns, outputs masked in batches, compactions, notes, facts —
    /// the assembler's request is the one built from scratch, whether it saw every state or
    /// skipped some.
    #[test]
    fn reused_requests_equal_fresh_ones(
        steps in prop::collection::vec(step(), 1..60),
        stride in 1usize..7,
    ) {
        compare(&steps, MASKING, stride, Encoding::Bytes);
    }
}

#[test]
fn a_long_run_with_masking_compactions_and_facts_matches_from_scratch() {
    let steps: Vec<Step> = (0..200)
        .map(|i| match i % 23 {
            7 => Step::Note,
            _ => Step::Turn {
                outputs: vec![40, i % 30],
                remember: i % 17 == 0,
                compact: (i % 23 == 22).then_some(15),
            },
        })
        .collect();
    let seen = compare(&steps, MASKING, 5, Encoding::O200k);
    assert!(seen.requests > 1_000, "{}", seen.requests);
    // The run exercised what the assembler reuses: masked outputs, a changing tail, requests
    // counted from the previous one's count.
    assert!(
        seen.masked > seen.requests / 2,
        "{} of {}",
        seen.masked,
        seen.requests
    );
    assert!(
        seen.tails > seen.requests / 2,
        "{} of {}",
        seen.tails,
        seen.requests
    );
    assert!(
        seen.counted_since > seen.requests * 9 / 10,
        "{} of {}",
        seen.counted_since,
        seen.requests
    );
    let seen = compare(&steps, Masking::Off, 3, Encoding::Bytes);
    assert_eq!(seen.masked, 0);
}

#[test]
fn no_settings_no_request() {
    assert!(
        Assembler::default()
            .assemble(&RunState::default())
            .is_none()
    );
}
