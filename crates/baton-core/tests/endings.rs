#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Property tests of how runs end: for random sequences of model replies (tool calls, `finish`,
//! text, empty) under random ending settings, driven through `next_action` and the reducer as
//! the engine drives them, a run ends or pauses within a bound derived from the settings, never
//! runs to `max_turns` on repeated identical text, never treats an empty reply as an ending, and
//! a run killed at any point resumes to the same decisions.

use baton_core::ending::{EndingPolicy, OnTextReply, OpenItems};
use baton_core::governance::{LoopPattern, LoopPolicy, detect_loop};
use baton_core::*;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Reply {
    /// A tool call; the same `n` gives the same call and result.
    Tool(u8),
    Finish,
    /// An `update_plan` that leaves one item open.
    OpenPlan,
    Text(u8),
    Empty,
}

fn reply_strategy() -> impl Strategy<Value = Reply> {
    prop_oneof![
        3 => (0u8..4).prop_map(Reply::Tool),
        1 => Just(Reply::Finish),
        1 => Just(Reply::OpenPlan),
        3 => (0u8..2).prop_map(Reply::Text),
        2 => Just(Reply::Empty),
    ]
}

#[derive(Clone, Debug)]
struct Setup {
    mode: OnTextReply,
    no_tool_turns: u32,
    forced: bool,
    planning: bool,
    open_items: OpenItems,
}

fn setup_strategy() -> impl Strategy<Value = Setup> {
    (
        prop_oneof![
            Just(OnTextReply::Finish),
            Just(OnTextReply::Nudge),
            Just(OnTextReply::Pause)
        ],
        0u32..6,
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.2),
        prop_oneof![Just(OpenItems::RemindOnce), Just(OpenItems::Ignore)],
    )
        .prop_map(
            |(mode, no_tool_turns, forced, planning, open_items)| Setup {
                mode,
                no_tool_turns,
                forced,
                planning,
                open_items,
            },
        )
}

fn settings(setup: &Setup, max_turns: u32) -> RunSettings {
    RunSettings {
        tasks: TaskSettings {
            planning: if setup.planning {
                Planning::Planner
            } else {
                Planning::None
            },
            ..Default::default()
        },
        model: ModelSettings {
            provider: ProviderKind::OpenAiCompatible,
            base_url: "http://127.0.0.1:1/v1".into(),
            model: "m".into(),
            response_mode: ResponseMode::Whole,
            tool_choice: if setup.forced {
                ToolChoice::Required
            } else {
                ToolChoice::Auto
            },
            reasoning: Default::default(),
            wire_api: Default::default(),
        },
        limits: Limits {
            max_turns,
            shell_timeout_secs: 5,
        },
        context: Default::default(),
        budget: Default::default(),
        loop_detection: LoopPolicy {
            no_tool_turns: setup.no_tool_turns,
            ..LoopPolicy::default()
        },
        endings: EndingPolicy {
            on_text_reply: setup.mode,
            open_items: setup.open_items,
        },
    }
}

struct Driver {
    state: RunState,
    records: Vec<EventRecord>,
    /// Model calls answered (each consumed one reply).
    answered: usize,
}

impl Driver {
    fn push(&mut self, event: Event) {
        let record = EventRecord {
            run_id: RunId::from_string("r"),
            seq: self.state.next_seq,
            at: jiff::Timestamp::from_second(1_700_000_000 + self.records.len() as i64).unwrap(),
            event,
        };
        self.state
            .apply(&record)
            .unwrap_or_else(|e| panic!("the driver produced a rejected event: {e}"));
        self.records.push(record);
    }
}

fn message(reply: &Reply, turn: u32) -> AssistantMessage {
    let call = |name: &str, arguments: String| AssistantMessage {
        content: None,
        tool_calls: vec![ToolCall {
            id: format!("c{turn}"),
            name: name.into(),
            arguments,
        }],
        ..Default::default()
    };
    match reply {
        Reply::Tool(n) => call("read_file", format!(r#"{{"path":"f{n}"}}"#)),
        Reply::Finish => call(FINISH_TOOL, r#"{"summary":"done by tool"}"#.into()),
        Reply::OpenPlan => call(
            memory::UPDATE_PLAN_TOOL,
            r#"{"items":[{"step":"a","status":"done"},{"step":"b","status":"pending"}]}"#.into(),
        ),
        Reply::Text(n) => AssistantMessage {
            content: Some(format!("Done ({n}): the tests pass.")),
            tool_calls: vec![],
            ..Default::default()
        },
        Reply::Empty => AssistantMessage {
            content: Some("  ".into()),
            tool_calls: vec![],
            ..Default::default()
        },
    }
}

/// One step of the engine; `false` once the run stopped. `kill` restarts the process (no
/// pause journaled, then `run_resumed` with the same settings) before the step.
fn step(d: &mut Driver, replies: &dyn Fn(usize) -> Reply, run: &RunSettings, kill: bool) -> bool {
    if kill && d.state.status == RunStatus::Running {
        d.push(Event::SupervisorRestarted {
            attempt: 1,
            cause: "killed by signal 9 (SIGKILL)".into(),
            backoff_ms: 0,
        });
        d.push(Event::RunResumed {
            settings: run.clone(),
        });
    }
    match next_action(&d.state) {
        NextAction::Stop => return false,
        NextAction::StartTurn { turn } => {
            // The engine's governance between turns: the loop detector over calls and replies.
            let policy = run.loop_detection;
            match detect_loop(&d.state.recent_calls, &policy) {
                Some((pattern, detail)) if d.state.loop_nudges == 0 => {
                    d.push(Event::LoopDetected {
                        pattern,
                        detail,
                        response: LoopResponse::Nudge,
                    })
                }
                Some((pattern, detail)) => {
                    d.push(Event::LoopDetected {
                        pattern,
                        detail: detail.clone(),
                        response: LoopResponse::Pause,
                    });
                    d.push(Event::RunPaused {
                        reason: PauseReason::Loop,
                        detail,
                    });
                }
                None => d.push(Event::TurnStarted { turn }),
            }
        }
        NextAction::CallModel {
            turn,
            call,
            attempt,
        } => {
            d.push(Event::ModelCallStarted {
                turn,
                call,
                attempt,
                request_sha256: "h".into(),
                context: None,
            });
            let reply = replies(d.answered);
            d.answered += 1;
            d.push(Event::ModelCallFinished {
                turn,
                call,
                message: message(&reply, turn),
                usage: None,
                cost_usd: None,
                finish_reason: None,
                served_model: None,
                duration_ms: 1,
            });
        }
        NextAction::RunTool { turn, call } => {
            d.push(Event::ToolCallStarted {
                turn,
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
                effect: ToolEffect::ReadOnly,
            });
            // As the engine serves them: `finish` is refused while planning.
            let result = if call.name == FINISH_TOOL && d.state.is_planning() {
                ToolResult::error(ending::FINISH_WHILE_PLANNING)
            } else if call.name == FINISH_TOOL {
                ToolResult::success("done by tool")
            } else {
                ToolResult::success(format!("contents of {}", call.arguments))
            };
            d.push(Event::ToolCallFinished {
                turn,
                call_id: call.id,
                result,
                duration_ms: 1,
            });
        }
        NextAction::RerunTool { .. } | NextAction::ReportInterrupted { .. } => {
            unreachable!("tool calls finish within a step")
        }
        NextAction::Compact { .. } | NextAction::Task(_) => unreachable!("no compaction or plan"),
        NextAction::Note { text } => d.push(Event::NoteAdded { text }),
        NextAction::AcceptTextEnd { turn, summary } => {
            d.push(Event::TextEndAccepted { turn, summary })
        }
        NextAction::PauseEnding { reason, detail } => {
            if reason == PauseReason::Loop {
                d.push(Event::LoopDetected {
                    pattern: LoopPattern::NoToolReplies,
                    detail: detail.clone(),
                    response: LoopResponse::Pause,
                });
            }
            d.push(Event::RunPaused { reason, detail });
        }
        NextAction::FinishTurn { turn } => d.push(Event::TurnFinished { turn }),
        NextAction::Finish {
            summary,
            finished_by,
        } => d.push(Event::RunFinished {
            summary,
            finished_by,
        }),
        NextAction::PauseAtTurnLimit { max_turns } => d.push(Event::RunPaused {
            reason: PauseReason::MaxTurns,
            detail: format!("{max_turns}"),
        }),
    }
    true
}

fn drive(
    setup: &Setup,
    max_turns: u32,
    replies: &dyn Fn(usize) -> Reply,
    kills: &[bool],
) -> Driver {
    let run = settings(setup, max_turns);
    let mut d = Driver {
        state: RunState::default(),
        records: vec![],
        answered: 0,
    };
    d.push(Event::RunStarted {
        goal: "g".into(),
        workspace: "/w".into(),
        settings: run.clone(),
        system_prompt: "s".into(),
        project_instructions: None,
        tools: vec![],
    });
    let mut steps = 0;
    while step(
        &mut d,
        replies,
        &run,
        kills.get(steps).copied().unwrap_or(false),
    ) {
        steps += 1;
        assert!(steps < 10_000, "the run never stopped");
    }
    d
}

/// Replies without a tool call in a row, at most, over the journal.
fn longest_no_tool_streak(records: &[EventRecord]) -> u32 {
    let (mut longest, mut current) = (0, 0);
    for r in records {
        if let Event::ModelCallFinished { message, .. } = &r.event {
            if message.tool_calls.is_empty() {
                current += 1;
                longest = longest.max(current);
            } else {
                current = 0;
            }
        }
    }
    longest
}

/// The effective loop limit: never less than room for the one nudge.
fn bound(setup: &Setup) -> u32 {
    setup.no_tool_turns.max(ending::MIN_NO_TOOL_TURNS)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn runs_end_or_pause_within_the_bound(
        setup in setup_strategy(),
        replies in prop::collection::vec(reply_strategy(), 1..40),
    ) {
        let n = replies.len();
        let last = replies[n - 1].clone();
        // After the script the model repeats its last reply forever.
        let at = |i: usize| replies.get(i).cloned().unwrap_or_else(|| last.clone());
        let d = drive(&setup, 200, &at, &[]);
        let state = &d.state;
        prop_assert!(state.status != RunStatus::Running);
        // Replies without a tool call never go on past the loop limit (plus the one reply that
        // answers the open-items reminder: a claim is accepted, never turned into a loop).
        prop_assert!(longest_no_tool_streak(&d.records) <= bound(&setup) + 1);
        // An empty reply is never an ending; a planning run never finishes without a plan.
        for (i, r) in d.records.iter().enumerate() {
            if let Event::TextEndAccepted { .. } = r.event {
                let reply = d.records[..i].iter().rev().find_map(|r| match &r.event {
                    Event::ModelCallFinished { message, .. } => Some(message.clone()),
                    _ => None,
                });
                let text = reply.and_then(|m| m.content).unwrap_or_default();
                prop_assert!(!text.trim().is_empty());
                prop_assert!(setup.mode == OnTextReply::Finish && !setup.forced && !setup.planning);
            }
        }
        if setup.planning {
            prop_assert_ne!(state.status, RunStatus::Finished);
        }
        // A model repeating a reply without tool calls never reaches the turn limit.
        if !matches!(last, Reply::Tool(_) | Reply::OpenPlan) {
            let paused_at_limit = state.pause.as_ref().is_some_and(|(r, _)| *r == PauseReason::MaxTurns);
            prop_assert!(!paused_at_limit, "{:?}", state.pause);
            prop_assert!(
                d.answered <= n + bound(&setup) as usize + 6,
                "{} replies for a script of {n}", d.answered
            );
        }
        match state.status {
            RunStatus::Finished => {
                prop_assert!(state.finished_by.is_some());
                if state.finished_by == Some(FinishedBy::Text) {
                    prop_assert!(state.finish_summary.as_deref().unwrap().starts_with("Done ("));
                }
            }
            RunStatus::Paused => {}
            other => prop_assert!(false, "unexpected status {other:?}"),
        }
    }

    #[test]
    fn a_run_killed_anywhere_decides_the_same_way(
        setup in setup_strategy(),
        replies in prop::collection::vec(reply_strategy(), 1..30),
        kills in prop::collection::vec(prop::bool::weighted(0.15), 0..200),
    ) {
        let last = replies[replies.len() - 1].clone();
        let at = |i: usize| replies.get(i).cloned().unwrap_or_else(|| last.clone());
        let calm = drive(&setup, 200, &at, &[]);
        let killed = drive(&setup, 200, &at, &kills);
        // The same replies are asked for (none twice) and the run ends the same way.
        prop_assert_eq!(calm.answered, killed.answered);
        prop_assert_eq!(&calm.state.status, &killed.state.status);
        prop_assert_eq!(&calm.state.finish_summary, &killed.state.finish_summary);
        prop_assert_eq!(calm.state.pause.as_ref().map(|p| p.0), killed.state.pause.as_ref().map(|p| p.0));
        let notes = |d: &Driver| d.records.iter().filter(|r| matches!(r.event, Event::NoteAdded { .. })).count();
        prop_assert_eq!(notes(&calm), notes(&killed));
    }
}

#[test]
fn a_text_ending_takes_exactly_one_nudge() {
    let setup = Setup {
        mode: OnTextReply::Finish,
        no_tool_turns: 3,
        forced: false,
        planning: false,
        open_items: OpenItems::RemindOnce,
    };
    let script = [Reply::Tool(0), Reply::Tool(1), Reply::Text(0)];
    let at = |i: usize| script.get(i).cloned().unwrap_or(Reply::Text(0));
    let d = drive(&setup, 200, &at, &[]);
    assert_eq!(d.state.status, RunStatus::Finished);
    assert_eq!(d.state.finished_by, Some(FinishedBy::Text));
    // The script, plus one reply after the nudge.
    assert_eq!(d.answered, script.len() + 1);
    let notes = d
        .records
        .iter()
        .filter(|r| matches!(r.event, Event::NoteAdded { .. }))
        .count();
    assert_eq!(notes, 1);
}

#[test]
fn pause_reason_names_are_the_journal_names() {
    use PauseReason::*;
    for reason in [
        MaxTurns,
        ModelUnavailable,
        ModelAuth,
        ModelRejected,
        ContextOverflow,
        Interrupted,
        Budget,
        Loop,
        NeedsApproval,
        PlanReview,
        TaskFailed,
        Workspace,
        TextReply,
        NoPlan,
    ] {
        assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
    }
}

#[test]
fn runs_journaled_before_endings_existed_keep_their_replay() {
    // A `run_started` settings object of an older baton: no `endings`, no `no_tool_turns`.
    let old = serde_json::json!({
        "model": {"provider": "open_ai_compatible", "base_url": "http://x/v1", "model": "m",
                  "response_mode": "whole"},
        "limits": {"max_turns": 10, "shell_timeout_secs": 5},
        "loop_detection": {"repeats": 4, "alternations": 3, "stalled_turns": 8}
    });
    let settings: RunSettings = serde_json::from_value(old).unwrap();
    assert_eq!(settings.endings, EndingPolicy::journaled_before());
    assert_eq!(settings.loop_detection.no_tool_turns, 3);
    // Such a journal called `finish` with open todo items and went straight to its end: the
    // reducer must not expect the reminder it never journaled.
    let mut state = RunState::default();
    let run = RunId::from_string("old");
    let events = [
        Event::RunStarted {
            goal: "g".into(),
            workspace: "/w".into(),
            settings: settings.clone(),
            system_prompt: "s".into(),
            project_instructions: None,
            tools: vec![],
        },
        Event::TurnStarted { turn: 1 },
        Event::ModelCallStarted {
            turn: 1,
            call: 1,
            attempt: 1,
            request_sha256: "h".into(),
            context: None,
        },
        Event::ModelCallFinished {
            turn: 1,
            call: 1,
            message: AssistantMessage {
                content: None,
                tool_calls: vec![
                    ToolCall {
                        id: "p".into(),
                        name: memory::UPDATE_PLAN_TOOL.into(),
                        arguments: r#"{"items":[{"step":"x","status":"pending"}]}"#.into(),
                    },
                    ToolCall {
                        id: "f".into(),
                        name: FINISH_TOOL.into(),
                        arguments: "{}".into(),
                    },
                ],
                ..Default::default()
            },
            usage: None,
            cost_usd: None,
            finish_reason: None,
            served_model: None,
            duration_ms: 1,
        },
    ];
    let mut seq = 0;
    let mut push = |state: &mut RunState, event: Event| {
        state
            .apply(&EventRecord {
                run_id: run.clone(),
                seq,
                at: jiff::Timestamp::from_second(1_700_000_000).unwrap(),
                event,
            })
            .unwrap();
        seq += 1;
    };
    for event in events {
        push(&mut state, event);
    }
    for (id, name, result) in [
        ("p", memory::UPDATE_PLAN_TOOL, "plan updated"),
        ("f", FINISH_TOOL, "done"),
    ] {
        push(
            &mut state,
            Event::ToolCallStarted {
                turn: 1,
                call_id: id.into(),
                name: name.into(),
                arguments: if id == "p" {
                    r#"{"items":[{"step":"x","status":"pending"}]}"#.into()
                } else {
                    "{}".into()
                },
                effect: ToolEffect::ReadOnly,
            },
        );
        push(
            &mut state,
            Event::ToolCallFinished {
                turn: 1,
                call_id: id.into(),
                result: ToolResult::success(result),
                duration_ms: 1,
            },
        );
    }
    assert_eq!(
        next_action(&state),
        NextAction::Finish {
            summary: "done".into(),
            finished_by: Some(FinishedBy::Tool)
        }
    );
}

#[test]
fn a_ctrl_c_before_a_due_ending_pause_leaves_it_due_for_the_resumed_run() {
    let setup = Setup {
        mode: OnTextReply::Pause,
        no_tool_turns: 3,
        forced: false,
        planning: false,
        open_items: OpenItems::RemindOnce,
    };
    let run = settings(&setup, 50);
    let mut d = Driver {
        state: RunState::default(),
        records: vec![],
        answered: 0,
    };
    d.push(Event::RunStarted {
        goal: "g".into(),
        workspace: "/w".into(),
        settings: run.clone(),
        system_prompt: "s".into(),
        project_instructions: None,
        tools: vec![],
    });
    let text = |_: usize| Reply::Text(0);
    // Text, nudge, text: the pause for a person is due.
    while !matches!(next_action(&d.state), NextAction::PauseEnding { .. }) {
        assert!(step(&mut d, &text, &run, false));
    }
    d.push(Event::RunPaused {
        reason: PauseReason::Interrupted,
        detail: "stopped on request".into(),
    });
    d.push(Event::RunResumed {
        settings: run.clone(),
    });
    assert!(matches!(
        next_action(&d.state),
        NextAction::PauseEnding {
            reason: PauseReason::TextReply,
            ..
        }
    ));
}
