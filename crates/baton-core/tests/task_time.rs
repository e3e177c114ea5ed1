#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Per-task accounting in the reducer: a task's turns and running time count only while it is
//! the current task, and time before a resume does not count.

use baton_core::task::{PlanSource, TaskSpec};
use baton_core::*;

fn settings() -> RunSettings {
    RunSettings {
        tasks: Default::default(),
        model: ModelSettings {
            provider: ProviderKind::OpenAiCompatible,
            base_url: "http://127.0.0.1:1/v1".into(),
            model: "m".into(),
            response_mode: ResponseMode::Whole,
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

fn task(id: &str) -> TaskSpec {
    TaskSpec {
        id: id.into(),
        title: id.into(),
        instructions: "i".into(),
        deps: vec![],
        check: "true".into(),
        risky: false,
    }
}

#[test]
fn task_turns_and_running_time_count_only_while_the_task_is_current() {
    let run = RunId::from_string("r");
    let mut state = RunState::default();
    let mut seq = 0;
    let mut at = |second: i64, event: Event, state: &mut RunState| {
        let record = EventRecord {
            run_id: run.clone(),
            seq,
            at: jiff::Timestamp::from_second(1_700_000_000 + second).unwrap(),
            event,
        };
        seq += 1;
        state.apply(&record).unwrap();
    };
    at(
        0,
        Event::RunStarted {
            goal: "g".into(),
            workspace: "/w".into(),
            settings: settings(),
            system_prompt: "s".into(),
            project_instructions: None,
            tools: vec![],
        },
        &mut state,
    );
    at(
        10,
        Event::PlanSet {
            source: PlanSource::User,
            tasks: vec![task("a")],
            final_check: None,
        },
        &mut state,
    );
    // 10 s of planning before the task started are not the task's.
    at(
        20,
        Event::TaskStarted {
            task: "a".into(),
            approach: 1,
            attempt: 1,
        },
        &mut state,
    );
    at(25, Event::TurnStarted { turn: 1 }, &mut state);
    at(
        30,
        Event::RunPaused {
            reason: PauseReason::Interrupted,
            detail: "stop".into(),
        },
        &mut state,
    );
    // An hour paused does not count.
    at(
        3630,
        Event::RunResumed {
            settings: settings(),
        },
        &mut state,
    );
    at(
        3634,
        Event::ModelCallStarted {
            turn: 1,
            call: 1,
            attempt: 1,
            request_sha256: "h".into(),
            context: None,
        },
        &mut state,
    );
    let entry = state.board.as_ref().unwrap().entry("a").unwrap().clone();
    assert_eq!(entry.turns, 1);
    assert_eq!(
        entry.running_ms, 14_000,
        "5 + 5 before the pause, 4 after the resume"
    );
    assert_eq!(state.running_ms, 34_000);
}

#[test]
fn a_persons_rollback_cut_short_is_redone_first_then_the_model_is_told() {
    let run = RunId::from_string("r");
    let mut state = RunState::default();
    let mut seq = 0;
    let mut push = |event: Event, state: &mut RunState| {
        let record = EventRecord {
            run_id: run.clone(),
            seq,
            at: jiff::Timestamp::from_second(1_700_000_000 + seq as i64).unwrap(),
            event,
        };
        seq += 1;
        state.apply(&record)
    };
    push(
        Event::RunStarted {
            goal: "g".into(),
            workspace: "/w".into(),
            settings: settings(),
            system_prompt: "s".into(),
            project_instructions: None,
            tools: vec![],
        },
        &mut state,
    )
    .unwrap();
    let snap = "a".repeat(40);
    push(
        Event::RollbackStarted {
            task: None,
            snapshot: snap.clone(),
            reason: "asked".into(),
        },
        &mut state,
    )
    .unwrap();
    let again = EventRecord {
        run_id: RunId::from_string("r"),
        seq: state.next_seq,
        at: jiff::Timestamp::from_second(1_700_000_100).unwrap(),
        event: Event::RollbackStarted {
            task: None,
            snapshot: snap.clone(),
            reason: "again".into(),
        },
    };
    assert!(
        state.clone().apply(&again).is_err(),
        "one rollback at a time"
    );
    assert_eq!(
        next_action(&state),
        NextAction::Task(board::TaskAction::FinishRollback {
            task: None,
            snapshot: snap.clone(),
        })
    );
    push(
        Event::RollbackFinished {
            task: None,
            snapshot: snap,
        },
        &mut state,
    )
    .unwrap();
    assert_eq!(state.user_rollback, None);
    assert_eq!(next_action(&state), NextAction::StartTurn { turn: 1 });
    assert!(matches!(
        &state.history.last().unwrap().message,
        Message::User { content } if content.contains("A person restored the workspace")
    ));
}
