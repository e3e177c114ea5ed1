#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Property tests of the reducer: journals produced by driving `next_action` (as the engine does)
//! are always accepted, survive serialization, and replaying any prefix of them yields the state
//! the live run had at that point.

use baton_core::*;
use proptest::prelude::*;

/// A deterministic stream of choices drawn from proptest's bytes.
struct Choices<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Choices<'_> {
    fn pick(&mut self, n: u8) -> u8 {
        let b = self.bytes.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b % n.max(1)
    }
}

fn settings(max_turns: u32) -> RunSettings {
    RunSettings {
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
            max_turns,
            shell_timeout_secs: 5,
        },
        context: Default::default(),
        budget: Default::default(),
        loop_detection: Default::default(),
        endings: Default::default(),
    }
}

struct Driver {
    run_id: RunId,
    state: RunState,
    records: Vec<EventRecord>,
    /// State after each record, for prefix checks.
    states: Vec<RunState>,
}

impl Driver {
    fn push(&mut self, event: Event) {
        let record = EventRecord {
            run_id: self.run_id.clone(),
            seq: self.state.next_seq,
            at: jiff::Timestamp::from_second(1_700_000_000 + self.records.len() as i64).unwrap(),
            event,
        };
        self.state
            .apply(&record)
            .unwrap_or_else(|e| panic!("driver produced a rejected event: {e}"));
        self.records.push(record);
        self.states.push(self.state.clone());
    }
}

fn drive(bytes: &[u8]) -> Driver {
    let mut c = Choices { bytes, pos: 0 };
    let mut d = Driver {
        run_id: RunId::from_string("run-under-test"),
        state: RunState::default(),
        records: vec![],
        states: vec![],
    };
    let max_turns = 1 + u32::from(c.pick(4));
    // Some runs work on up to 3 independent tasks at once (`--parallel`).
    let parallel = 1 + u32::from(c.pick(3));
    let settings = |max_turns| {
        let mut s = settings(max_turns);
        s.tasks.parallel = parallel;
        s
    };
    d.push(Event::RunStarted {
        goal: "goal".into(),
        workspace: "/w".into(),
        settings: settings(max_turns),
        system_prompt: "sys".into(),
        project_instructions: (c.pick(2) == 0).then(|| "agents".into()),
        tools: vec![],
    });
    // Half the runs work through a random task graph (each task depends only on earlier ones).
    if c.pick(2) == 0 {
        let n = 1 + c.pick(4);
        let tasks = (0..n)
            .map(|i| task::TaskSpec {
                id: format!("t{i}"),
                title: format!("task {i}"),
                instructions: "do it".into(),
                deps: (0..i)
                    .filter(|_| c.pick(3) == 0)
                    .map(|d| format!("t{d}"))
                    .collect(),
                check: "true".into(),
                risky: false,
            })
            .collect();
        d.push(Event::PlanSet {
            source: task::PlanSource::User,
            tasks,
            final_check: (c.pick(2) == 0).then(|| "make test".into()),
        });
    }
    let mut steps = 0;
    while steps < 200 {
        steps += 1;
        // Now and then the process "dies" and comes back: pause + resume at an arbitrary point.
        if c.pick(12) == 0 && d.state.status == RunStatus::Running {
            d.push(Event::RunPaused {
                reason: PauseReason::Interrupted,
                detail: "crash".into(),
            });
            d.push(Event::RunResumed {
                settings: settings(max_turns),
            });
            continue;
        }
        // Or it is killed and its supervisor restarts it: no pause is journaled, only the
        // restart, then the next process's resume — at any point of a step.
        if c.pick(12) == 0 && d.state.status == RunStatus::Running {
            d.push(Event::SupervisorRestarted {
                attempt: 1 + u32::from(c.pick(5)),
                cause: "killed by signal 9 (SIGKILL)".into(),
                backoff_ms: 500,
            });
            d.push(Event::RunResumed {
                settings: settings(max_turns),
            });
            continue;
        }
        match next_action(&d.state) {
            NextAction::Stop => break,
            NextAction::StartTurn { turn } => d.push(Event::TurnStarted { turn }),
            NextAction::CallModel {
                turn,
                call,
                attempt,
            } => {
                // Sometimes the context policy compacts before the call.
                let len = d.state.history.len() as u32;
                if len > 0 && c.pick(5) == 0 {
                    d.push(Event::CompactionStarted {
                        turn,
                        replaced: 1 + u32::from(c.pick(255)) % len,
                        trigger: if c.pick(2) == 0 {
                            CompactionTrigger::Threshold
                        } else {
                            CompactionTrigger::Overflow
                        },
                        estimated_prompt_tokens: 1000,
                    });
                    continue;
                }
                d.push(Event::ModelCallStarted {
                    turn,
                    call,
                    attempt,
                    request_sha256: "h".into(),
                    context: (c.pick(2) == 0).then(|| RequestMetrics {
                        estimated_prompt_tokens: u64::from(c.pick(200)) * 37,
                        counted_prompt_tokens: u64::from(c.pick(200)) * 31,
                        window_tokens: 32_768,
                        prefix_stability: (c.pick(2) == 0).then(|| f64::from(c.pick(100)) / 7.0),
                        masked_outputs: u32::from(c.pick(5)),
                    }),
                });
                match c.pick(4) {
                    0 => d.push(Event::ModelCallFailed {
                        turn,
                        call,
                        attempt,
                        class: ErrorClass::RateLimited,
                        message: "429".into(),
                        retry_in_ms: Some(10),
                    }),
                    1 => {} // crashed with the request in flight
                    _ => {
                        let n = c.pick(4);
                        let tool_calls = (0..n)
                            .map(|i| ToolCall {
                                id: format!("c{turn}-{i}"),
                                name: match c.pick(8) {
                                    0 => FINISH_TOOL.into(),
                                    1 => memory::UPDATE_PLAN_TOOL.into(),
                                    2 => memory::REMEMBER_TOOL.into(),
                                    n => format!("t{n}"),
                                },
                                arguments: match c.pick(4) {
                                    0 => format!(r#"{{"fact":"f{i}","items":[{{"step":"s{i}","status":"done"}}]}}"#),
                                    1 => format!(r#"{{"fact":"fact {turn}-{i}"}}"#),
                                    2 => format!(r#"{{"items":[{{"step":"step {turn}","status":"in_progress"}}]}}"#),
                                    _ => "{}".into(),
                                },
                            })
                            .collect();
                        d.push(Event::ModelCallFinished {
                            turn,
                            call,
                            message: AssistantMessage {
                                content: Some("ok".into()),
                                tool_calls,
                                ..Default::default()
                            },
                            usage: (c.pick(4) != 0).then(|| Usage {
                                prompt_tokens: u64::from(c.pick(100)),
                                completion_tokens: u64::from(c.pick(50)),
                                cached_prompt_tokens: Some(u64::from(c.pick(10))),
                                ..Default::default()
                            }),
                            cost_usd: None,
                            finish_reason: Some("tool_calls".into()),
                            served_model: None,
                            duration_ms: 1,
                        });
                    }
                }
            }
            NextAction::RunTool { turn, call } => {
                let effect = if c.pick(2) == 0 {
                    ToolEffect::ReadOnly
                } else {
                    ToolEffect::Mutating
                };
                d.push(Event::ToolCallStarted {
                    turn,
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    arguments: call.arguments.clone(),
                    effect,
                });
                if c.pick(5) != 0 {
                    let result = if c.pick(3) == 0 {
                        ToolResult::error("bad")
                    } else {
                        ToolResult::success("done")
                    };
                    d.push(Event::ToolCallFinished {
                        turn,
                        call_id: call.id,
                        result,
                        duration_ms: 1,
                    });
                }
            }
            NextAction::Compact { turn, .. } => match c.pick(4) {
                0 => d.push(Event::CompactionFailed {
                    turn,
                    attempt: 1,
                    class: if c.pick(2) == 0 {
                        ErrorClass::ContextOverflow
                    } else {
                        ErrorClass::Overloaded
                    },
                    message: "no".into(),
                    retry_in_ms: Some(0),
                }),
                1 => {} // crashed during the summary call
                _ => {
                    let pending = d.state.compaction.clone().unwrap();
                    let history = &d.state.history;
                    let (first_seq, last_seq) =
                        (history[0].seq, history[pending.replaced as usize - 1].seq);
                    d.push(Event::CompactionFinished {
                        turn,
                        summary: format!("summary at turn {turn}"),
                        replaced: pending.replaced,
                        first_seq,
                        last_seq,
                        left_out: 0,
                        usage: (c.pick(3) != 0).then(|| Usage {
                            prompt_tokens: u64::from(c.pick(100)),
                            completion_tokens: u64::from(c.pick(50)),
                            ..Default::default()
                        }),
                        cost_usd: None,
                        served_model: None,
                        duration_ms: 1,
                    })
                }
            },
            NextAction::RerunTool { turn, call } => d.push(Event::ToolCallFinished {
                turn,
                call_id: call.id,
                result: ToolResult::success("rerun"),
                duration_ms: 1,
            }),
            NextAction::ReportInterrupted { turn, call } => d.push(Event::ToolCallFinished {
                turn,
                call_id: call.id,
                result: ToolResult::interrupted(),
                duration_ms: 0,
            }),
            NextAction::Note { text } => d.push(Event::NoteAdded { text }),
            NextAction::AcceptTextEnd { turn, summary } => {
                d.push(Event::TextEndAccepted { turn, summary })
            }
            NextAction::PauseEnding { reason, detail } => {
                if reason == PauseReason::Loop {
                    d.push(Event::LoopDetected {
                        pattern: governance::LoopPattern::NoToolReplies,
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
            NextAction::PauseAtTurnLimit { max_turns } => {
                d.push(Event::RunPaused {
                    reason: PauseReason::MaxTurns,
                    detail: format!("{max_turns}"),
                });
            }
            NextAction::Task(action) => drive_task(&mut d, &mut c, action),
        }
    }
    d
}

/// What the engine does for a task step, with random outcomes and crashes in between.
fn drive_task(d: &mut Driver, c: &mut Choices, action: board::TaskAction) {
    use board::TaskAction;
    match action {
        TaskAction::ContinueTurns => unreachable!("next_action never returns it"),
        TaskAction::StartTask { task, approach } => {
            if c.pick(2) == 0 {
                d.push(Event::SnapshotTaken {
                    snapshot: format!("snap-{}", d.records.len()),
                    reason: task::SnapshotReason::RunStart,
                    task: None,
                });
            }
            d.push(Event::TaskStarted {
                task,
                approach,
                attempt: 1,
            });
        }
        TaskAction::RunCheck {
            task,
            attempt,
            command,
        } => {
            if d.state.board.as_ref().unwrap().open_check.is_none() {
                d.push(Event::CheckStarted {
                    task: task.clone(),
                    attempt,
                    command,
                });
            }
            if c.pick(4) != 0 {
                let passed = c.pick(3) != 0;
                d.push(Event::CheckFinished {
                    task,
                    attempt,
                    passed,
                    exit_code: Some(if passed { 0 } else { 1 }),
                    output: "out".into(),
                    duration_ms: 1,
                });
            } // else: crashed during the check
        }
        TaskAction::CompleteTask { task, summary } => {
            d.push(Event::TaskFinished {
                task: task.clone(),
                summary,
            });
            d.push(Event::SnapshotTaken {
                snapshot: format!("snap-{}", d.records.len()),
                reason: task::SnapshotReason::TaskVerified,
                task: Some(task),
            });
        }
        TaskAction::Rollback {
            task,
            snapshot,
            reason,
        } => {
            d.push(Event::RollbackStarted {
                task: Some(task.clone()),
                snapshot: snapshot.clone(),
                reason,
            });
            if c.pick(3) != 0 {
                d.push(Event::RollbackFinished {
                    task: Some(task),
                    snapshot,
                });
            } // else: crashed during the restore
        }
        TaskAction::FinishRollback { task, snapshot } => {
            d.push(Event::RollbackFinished { task, snapshot })
        }
        TaskAction::FailTask { task, reason } => d.push(Event::TaskFailed { task, reason }),
        TaskAction::SkipTask { task, reason } => d.push(Event::TaskSkipped { task, reason }),
        TaskAction::AddFixTask { task } => d.push(Event::PlanSet {
            source: task::PlanSource::Baton,
            tasks: vec![task],
            final_check: None,
        }),
        TaskAction::Delegate { tasks } => {
            if c.pick(2) == 0 {
                d.push(Event::SnapshotTaken {
                    snapshot: format!("snap-{}", d.records.len()),
                    reason: task::SnapshotReason::WaveStart,
                    task: None,
                });
            }
            let base = d
                .state
                .snapshots
                .last()
                .map_or("snap-none".to_string(), |s| s.snapshot.clone());
            for task in tasks {
                d.push(Event::TaskDelegated {
                    child_run: format!("child-{task}-{}", d.records.len()),
                    task,
                    base_snapshot: base.clone(),
                });
                if c.pick(6) == 0 {
                    break; // crashed between delegations
                }
            }
        }
        TaskAction::AwaitDelegated { tasks } => {
            for delegated in tasks {
                // A child verified, failed, or still working when this process died.
                let result = match c.pick(4) {
                    0 => continue,
                    1 => DelegatedResult::Failed {
                        reason: "no luck".into(),
                    },
                    _ => DelegatedResult::Verified {
                        summary: format!("{} done", delegated.task),
                        snapshot: format!("theirs-{}", d.records.len()),
                    },
                };
                d.push(Event::TaskReturned {
                    task: delegated.task,
                    child_run: delegated.child_run,
                    result,
                    cost_usd: 0.25,
                    unpriced_calls: 1,
                    prompt_tokens: 10,
                    completion_tokens: 5,
                    turns: 2,
                });
            }
        }
        TaskAction::Merge {
            task,
            base: _,
            theirs: _,
            summary,
        } => {
            if c.pick(3) == 0 {
                let follow_up = d
                    .state
                    .board
                    .as_ref()
                    .unwrap()
                    .unused_id(&format!("{task}-merge"));
                d.push(Event::MergeConflicted {
                    task,
                    conflicts: vec!["a.txt".into()],
                    follow_up: task::TaskSpec {
                        id: follow_up,
                        title: "redo".into(),
                        instructions: "redo it".into(),
                        deps: vec![],
                        check: "true".into(),
                        risky: false,
                    },
                });
            } else {
                d.push(Event::MergeStarted {
                    task: task.clone(),
                    snapshot: format!("merge-{}", d.records.len()),
                });
                if c.pick(3) != 0 {
                    d.push(Event::TaskFinished { task, summary });
                } // else: crashed during the restore
            }
        }
        TaskAction::FinishMerge { task, .. } => d.push(Event::TaskFinished {
            task,
            summary: "merged".into(),
        }),
        TaskAction::PauseForReview => d.push(Event::RunPaused {
            reason: PauseReason::PlanReview,
            detail: "review".into(),
        }),
        TaskAction::End { report, outcome } => match outcome {
            board::BoardOutcome::AllVerified => d.push(Event::RunFinished {
                summary: report,
                finished_by: None,
            }),
            board::BoardOutcome::SomeFailed => d.push(Event::RunFailed { error: report }),
        },
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn replaying_the_stored_journal_yields_the_live_state(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let d = drive(&bytes);
        // What a store keeps is JSON; replay must work from that form, not from live values.
        let stored: Vec<String> = d.records.iter().map(|r| serde_json::to_string(r).unwrap()).collect();
        let loaded: Vec<EventRecord> = stored.iter().map(|s| serde_json::from_str(s).unwrap()).collect();
        let replayed = replay(&loaded).unwrap();
        prop_assert_eq!(&replayed, &d.state);
    }

    #[test]
    fn resuming_from_any_prefix_continues_with_the_same_next_action(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let d = drive(&bytes);
        for (k, live) in d.states.iter().enumerate() {
            let replayed = replay(&d.records[..=k]).unwrap();
            prop_assert_eq!(&replayed, live);
            prop_assert_eq!(next_action(&replayed), next_action(live));
        }
    }

    /// `--parallel N`: never more than N tasks out in worktrees, never one of them also worked
    /// on in the workspace, and a merge only of a verified child's work.
    #[test]
    fn parallel_waves_stay_within_bounds(bytes in proptest::collection::vec(any::<u8>(), 0..800)) {
        let d = drive(&bytes);
        for state in &d.states {
            let (Some(board), Some(settings)) = (&state.board, &state.settings) else { continue };
            let out: Vec<&board::TaskEntry> = board
                .tasks
                .iter()
                .filter(|t| t.status == board::TaskStatus::Running && t.delegation.is_some())
                .collect();
            prop_assert!(out.len() <= settings.tasks.parallel.max(1) as usize);
            if !out.is_empty() {
                prop_assert!(board.current.is_none(), "a wave runs while no task is current");
            }
            if let Some(merge) = &board.open_merge {
                let entry = board.entry(&merge.task).unwrap();
                let verified = matches!(
                    entry.delegation.as_ref().and_then(|d| d.result.as_ref()),
                    Some(DelegatedResult::Verified { .. })
                );
                prop_assert!(verified);
            }
        }
    }

    /// Task graphs always settle consistently: a verified task's dependencies are verified,
    /// a finished run verified every task, and no task is worked on before its dependencies.
    #[test]
    fn task_graphs_respect_dependencies(bytes in proptest::collection::vec(any::<u8>(), 0..800)) {
        let d = drive(&bytes);
        let Some(board) = &d.state.board else { return Ok(()); };
        for entry in &board.tasks {
            if entry.status == board::TaskStatus::Verified || entry.approach > 0 {
                for dep in &entry.spec.deps {
                    prop_assert_eq!(board.entry(dep).unwrap().status, board::TaskStatus::Verified);
                }
            }
            if entry.status == board::TaskStatus::Skipped {
                prop_assert_eq!(entry.approach, 0);
            }
        }
        if d.state.status == RunStatus::Finished {
            prop_assert!(board.tasks.iter().all(|t| t.status == board::TaskStatus::Verified));
        }
    }

    #[test]
    fn usage_totals_are_the_sum_of_finished_calls(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let d = drive(&bytes);
        let (mut p, mut c, mut unreported) = (0, 0, 0);
        for r in &d.records {
            // Parallel tasks' child runs count towards the run's totals.
            if let Event::TaskReturned { prompt_tokens, completion_tokens, .. } = &r.event {
                p += prompt_tokens;
                c += completion_tokens;
            }
            if let Event::ModelCallFinished { usage, .. } | Event::CompactionFinished { usage, .. } = &r.event {
                match usage {
                    Some(usage) => {
                        p += usage.prompt_tokens;
                        c += usage.completion_tokens;
                    }
                    None => unreported += 1,
                }
            }
        }
        prop_assert_eq!(d.state.usage.prompt_tokens, p);
        prop_assert_eq!(d.state.usage.completion_tokens, c);
        prop_assert_eq!(d.state.usage.unreported_calls, unreported);
    }

    #[test]
    fn compaction_keeps_plan_and_facts_and_leaves_a_summary_first(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let d = drive(&bytes);
        for (k, record) in d.records.iter().enumerate().skip(1) {
            let (before, after) = (&d.states[k - 1], &d.states[k]);
            prop_assert!(after.facts.len() >= before.facts.len(), "facts are never dropped");
            if let Event::CompactionFinished { replaced, .. } = &record.event {
                prop_assert_eq!(&after.plan, &before.plan);
                prop_assert_eq!(&after.facts, &before.facts);
                prop_assert_eq!(after.history[0].seq, record.seq);
                prop_assert_eq!(after.history[0].turn, 0);
                prop_assert_eq!(&after.history[1..], &before.history[*replaced as usize..]);
            }
        }
    }

    #[test]
    fn a_tampered_journal_is_rejected_or_accepted_but_never_panics(
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        swap in any::<(usize, usize)>(),
        drop_at in any::<usize>(),
    ) {
        let d = drive(&bytes);
        let mut records = d.records.clone();
        if records.len() > 2 {
            let (a, b) = (swap.0 % records.len(), swap.1 % records.len());
            records.swap(a, b);
            records.remove(drop_at % records.len());
        }
        let _ = replay(&records);
    }
}

#[test]
fn gaps_and_foreign_events_are_named_in_the_error() {
    let d = drive(&[3; 64]);
    assert!(d.records.len() > 3, "driver made a real journal");
    let mut records = d.records.clone();
    records.remove(2);
    let err = replay(&records).unwrap_err();
    assert_eq!(err.seq, 3);
    assert!(
        err.to_string().contains("expected sequence number 2"),
        "{err}"
    );

    let mut foreign = d.records.clone();
    foreign[1].run_id = RunId::from_string("other");
    let err = replay(&foreign).unwrap_err();
    assert!(err.to_string().contains("belongs to run other"), "{err}");
}

#[test]
fn a_result_for_a_call_that_never_started_is_refused() {
    let mut d = drive(&[]);
    // drive(&[]) picks the first option everywhere; build a fresh run by hand instead.
    d.state = RunState::default();
    d.records.clear();
    d.push(Event::RunStarted {
        goal: "g".into(),
        workspace: "/w".into(),
        settings: settings(3),
        system_prompt: "s".into(),
        project_instructions: None,
        tools: vec![],
    });
    d.push(Event::TurnStarted { turn: 1 });
    let bad = EventRecord {
        run_id: d.run_id.clone(),
        seq: d.state.next_seq,
        at: jiff::Timestamp::UNIX_EPOCH,
        event: Event::ToolCallFinished {
            turn: 1,
            call_id: "x".into(),
            result: ToolResult::success(""),
            duration_ms: 0,
        },
    };
    let err = d.state.clone().apply(&bad).unwrap_err();
    assert!(err.problem.contains("no tool call is running"), "{err}");
}

#[test]
fn finish_tool_success_requests_finish_and_the_turn_limit_pauses() {
    let mut d = drive(&[]);
    d.state = RunState::default();
    d.records.clear();
    d.push(Event::RunStarted {
        goal: "g".into(),
        workspace: "/w".into(),
        settings: settings(1),
        system_prompt: "s".into(),
        project_instructions: None,
        tools: vec![],
    });
    assert_eq!(next_action(&d.state), NextAction::StartTurn { turn: 1 });
    d.push(Event::TurnStarted { turn: 1 });
    assert_eq!(
        next_action(&d.state),
        NextAction::CallModel {
            turn: 1,
            call: 1,
            attempt: 1
        }
    );
    d.push(Event::ModelCallStarted {
        turn: 1,
        call: 1,
        attempt: 1,
        request_sha256: "h".into(),
        context: None,
    });
    // Request in flight, no answer: resume sends it again as attempt 2 of the same call.
    assert_eq!(
        next_action(&d.state),
        NextAction::CallModel {
            turn: 1,
            call: 1,
            attempt: 2
        }
    );
    d.push(Event::ModelCallFinished {
        turn: 1,
        call: 1,
        message: AssistantMessage {
            content: None,
            tool_calls: vec![],
            ..Default::default()
        },
        usage: Some(Usage::default()),
        cost_usd: None,
        finish_reason: None,
        served_model: None,
        duration_ms: 0,
    });
    assert!(matches!(next_action(&d.state), NextAction::Note { .. }));
    d.push(Event::NoteAdded {
        text: "use tools".into(),
    });
    assert_eq!(next_action(&d.state), NextAction::FinishTurn { turn: 1 });
    d.push(Event::TurnFinished { turn: 1 });
    assert_eq!(
        next_action(&d.state),
        NextAction::PauseAtTurnLimit { max_turns: 1 }
    );
    d.push(Event::RunPaused {
        reason: PauseReason::MaxTurns,
        detail: String::new(),
    });
    assert_eq!(next_action(&d.state), NextAction::Stop);
    d.push(Event::RunResumed {
        settings: settings(2),
    });
    assert_eq!(next_action(&d.state), NextAction::StartTurn { turn: 2 });
    d.push(Event::TurnStarted { turn: 2 });
    d.push(Event::ModelCallStarted {
        turn: 2,
        call: 2,
        attempt: 1,
        request_sha256: "h".into(),
        context: None,
    });
    let finish = ToolCall {
        id: "f".into(),
        name: FINISH_TOOL.into(),
        arguments: "{}".into(),
    };
    d.push(Event::ModelCallFinished {
        turn: 2,
        call: 2,
        message: AssistantMessage {
            content: None,
            tool_calls: vec![finish.clone()],
            ..Default::default()
        },
        usage: Some(Usage::default()),
        cost_usd: None,
        finish_reason: None,
        served_model: None,
        duration_ms: 0,
    });
    d.push(Event::ToolCallStarted {
        turn: 2,
        call_id: "f".into(),
        name: FINISH_TOOL.into(),
        arguments: "{}".into(),
        effect: ToolEffect::ReadOnly,
    });
    d.push(Event::ToolCallFinished {
        turn: 2,
        call_id: "f".into(),
        result: ToolResult::success("all done"),
        duration_ms: 0,
    });
    assert_eq!(
        next_action(&d.state),
        NextAction::Finish {
            summary: "all done".into(),
            finished_by: Some(FinishedBy::Tool),
        }
    );
    d.push(Event::RunFinished {
        summary: "all done".into(),
        finished_by: Some(FinishedBy::Tool),
    });
    assert_eq!(d.state.status, RunStatus::Finished);
    assert_eq!(next_action(&d.state), NextAction::Stop);
}
