#![allow(clippy::unwrap_used)]

use super::*;
use crate::memory::{PlanItem, PlanStatus};

fn item(step: &str, status: PlanStatus) -> PlanItem {
    PlanItem {
        step: step.into(),
        status,
    }
}

fn decide(
    reply: Reply<'_>,
    mode: OnTextReply,
    choice: &ToolChoice,
    track: &EndingTrack,
    todo: &[PlanItem],
) -> AfterReply {
    after_reply(
        reply,
        &Situation {
            policy: EndingPolicy {
                on_text_reply: mode,
                open_items: OpenItems::RemindOnce,
            },
            tool_choice: choice,
            no_tool_limit: 3,
            planning: false,
            todo,
            track,
        },
    )
}

fn track(no_tool_replies: u32, nudged: bool) -> EndingTrack {
    EndingTrack {
        no_tool_replies,
        nudged,
        ..EndingTrack::default()
    }
}

#[test]
fn a_first_text_reply_is_nudged_and_the_next_one_ends() {
    let auto = ToolChoice::Auto;
    let first = decide(
        Reply::Text("Done"),
        OnTextReply::Finish,
        &auto,
        &track(1, false),
        &[],
    );
    assert_eq!(
        first,
        AfterReply::Nudge {
            kind: NudgeKind::Text
        }
    );
    let second = decide(
        Reply::Text("Done"),
        OnTextReply::Finish,
        &auto,
        &track(2, true),
        &[],
    );
    assert_eq!(
        second,
        AfterReply::Claim {
            summary: "Done".into()
        }
    );
    // A claim is never pre-empted by the loop rule: it ends the streak.
    let late = decide(
        Reply::Text("Done"),
        OnTextReply::Finish,
        &auto,
        &track(9, true),
        &[],
    );
    assert!(matches!(late, AfterReply::Claim { .. }));
}

#[test]
fn empty_replies_are_never_a_claim() {
    let auto = ToolChoice::Auto;
    for mode in [OnTextReply::Finish, OnTextReply::Nudge, OnTextReply::Pause] {
        for nudged in [false, true] {
            assert_eq!(
                decide(Reply::Empty, mode, &auto, &track(1, nudged), &[]),
                AfterReply::Nudge {
                    kind: NudgeKind::Empty
                }
            );
            assert_eq!(
                decide(Reply::Empty, mode, &auto, &track(3, nudged), &[]),
                AfterReply::PauseLoop { replies: 3 }
            );
        }
    }
    assert_eq!(Reply::of(Some("  \n")), Reply::Empty);
    assert_eq!(Reply::of(None), Reply::Empty);
    assert_eq!(Reply::of(Some(" ok ")), Reply::Text("ok"));
}

#[test]
fn nudge_mode_keeps_nudging_until_the_loop_rule_pauses() {
    let auto = ToolChoice::Auto;
    let d = |n, nudged| {
        decide(
            Reply::Text("Done"),
            OnTextReply::Nudge,
            &auto,
            &track(n, nudged),
            &[],
        )
    };
    assert_eq!(
        d(1, false),
        AfterReply::Nudge {
            kind: NudgeKind::UseTools
        }
    );
    assert_eq!(
        d(2, true),
        AfterReply::Nudge {
            kind: NudgeKind::UseTools
        }
    );
    assert_eq!(d(3, true), AfterReply::PauseLoop { replies: 3 });
}

#[test]
fn pause_mode_pauses_the_claim_for_a_person() {
    let auto = ToolChoice::Auto;
    assert_eq!(
        decide(
            Reply::Text("Done"),
            OnTextReply::Pause,
            &auto,
            &track(1, false),
            &[]
        ),
        AfterReply::Nudge {
            kind: NudgeKind::Text
        }
    );
    assert_eq!(
        decide(
            Reply::Text("Done"),
            OnTextReply::Pause,
            &auto,
            &track(2, true),
            &[]
        ),
        AfterReply::PauseForPerson
    );
}

#[test]
fn forced_tool_calls_never_end_by_text_but_stay_bounded() {
    for choice in [ToolChoice::Required, ToolChoice::Function("shell".into())] {
        assert_eq!(
            decide(
                Reply::Text("Done"),
                OnTextReply::Finish,
                &choice,
                &track(2, true),
                &[]
            ),
            AfterReply::Nudge {
                kind: NudgeKind::ToolRequired
            }
        );
        assert_eq!(
            decide(
                Reply::Text("Done"),
                OnTextReply::Finish,
                &choice,
                &track(3, true),
                &[]
            ),
            AfterReply::PauseLoop { replies: 3 }
        );
    }
}

#[test]
fn the_loop_limit_never_falls_below_room_for_one_nudge() {
    let auto = ToolChoice::Auto;
    let s = |limit, t: &EndingTrack| {
        after_reply(
            Reply::Text("Done"),
            &Situation {
                policy: EndingPolicy::default(),
                tool_choice: &auto,
                no_tool_limit: limit,
                planning: false,
                todo: &[],
                track: t,
            },
        )
    };
    // A limit of 0 or 1 would pause before the one nudge could be answered.
    for limit in [0, 1] {
        assert!(matches!(
            s(limit, &track(1, false)),
            AfterReply::Nudge { .. }
        ));
        assert!(matches!(
            s(limit, &track(2, true)),
            AfterReply::Claim { .. }
        ));
    }
}

#[test]
fn open_todo_items_are_named_once_then_the_ending_is_accepted_with_them() {
    let auto = ToolChoice::Auto;
    let todo = [
        item("read the parser", PlanStatus::Done),
        item("fix the bug", PlanStatus::InProgress),
        item("write docs", PlanStatus::Pending),
    ];
    let first = decide(
        Reply::Text("Done"),
        OnTextReply::Finish,
        &auto,
        &track(2, true),
        &todo,
    );
    assert_eq!(
        first,
        AfterReply::RemindOpenItems {
            items: vec![
                "2. [in_progress] fix the bug".into(),
                "3. [pending] write docs".into()
            ]
        }
    );
    let reminded = EndingTrack {
        open_items_reminded: true,
        ..track(3, true)
    };
    let AfterReply::Claim { summary } = decide(
        Reply::Text("Done"),
        OnTextReply::Finish,
        &auto,
        &reminded,
        &todo,
    ) else {
        panic!("a second ending is accepted");
    };
    assert!(summary.starts_with("Done\n\nStill open"), "{summary}");
    assert!(summary.contains("3. [pending] write docs"), "{summary}");
    assert!(!summary.contains("read the parser"), "{summary}");
    // Runs journaled before the reminder existed end at once.
    assert_eq!(
        open_items_due(EndingPolicy::journaled_before(), &todo, &track(0, false)),
        None
    );
    // A plan with everything done has nothing to name.
    let done = [item("all", PlanStatus::Done)];
    assert_eq!(
        open_items_due(EndingPolicy::default(), &done, &track(0, false)),
        None
    );
    assert_eq!(with_open_items("ok", &done), "ok");
}

#[test]
fn a_planning_reply_without_a_plan_gets_one_nudge_then_pauses() {
    let auto = ToolChoice::Auto;
    let s = |t: &EndingTrack, reply| {
        after_reply(
            reply,
            &Situation {
                policy: EndingPolicy::default(),
                tool_choice: &auto,
                no_tool_limit: 3,
                planning: true,
                todo: &[],
                track: t,
            },
        )
    };
    for reply in [Reply::Text("Here is my plan: ..."), Reply::Empty] {
        assert_eq!(
            s(&track(1, false), reply),
            AfterReply::Nudge {
                kind: NudgeKind::Planning
            }
        );
        let nudged = EndingTrack {
            planning_nudged: true,
            ..track(2, true)
        };
        assert_eq!(s(&nudged, reply), AfterReply::PauseNoPlan);
    }
}

#[test]
fn texts_name_what_ends_and_what_to_do() {
    assert!(nudge_text(NudgeKind::Text, false).contains("ends the run"));
    assert!(nudge_text(NudgeKind::Text, true).contains("task's check"));
    assert!(nudge_text(NudgeKind::Planning, false).contains("submit_plan"));
    assert!(open_items_text(&["2. [pending] x".into()]).contains("2. [pending] x"));
    for mode in [OnTextReply::Finish, OnTextReply::Nudge, OnTextReply::Pause] {
        assert_eq!(OnTextReply::parse(mode.as_str()), Some(mode));
    }
    assert_eq!(OnTextReply::parse("stop"), None);
}
