//! Run governance: budgets that pause a run before it overspends, and loop detection that
//! notices an agent going in circles. Both are pure functions of the run state (plus "now"
//! for wall time), so the decision is testable without a model or a clock.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// Ceilings after which the run pauses (status `paused: budget`, resumable with a raised one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Budget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    /// Prompt plus completion tokens, as the servers reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// Time the run spent running (pauses and downtime between processes do not count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_time_secs: Option<u64>,
}

impl Budget {
    pub fn is_unlimited(&self) -> bool {
        *self == Budget::default()
    }

    /// This budget over `below`: each ceiling set here replaces the one there (a resume's
    /// `--budget-usd` raises the cost ceiling and keeps the recorded token ceiling).
    pub fn over(self, below: Budget) -> Budget {
        Budget {
            usd: self.usd.or(below.usd),
            tokens: self.tokens.or(below.tokens),
            wall_time_secs: self.wall_time_secs.or(below.wall_time_secs),
        }
    }
}

/// Share of a budget at which the run warns once.
pub const WARN_AT: f64 = 0.8;

/// Completion tokens assumed for a call's worst case: requests set no output limit, so the
/// pre-call check needs a bound; 4,096 covers a long answer with tool calls.
pub const WORST_CASE_COMPLETION_TOKENS: u64 = 4_096;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BudgetResource {
    Usd,
    Tokens,
    WallTime,
}

impl BudgetResource {
    pub fn flag(self) -> &'static str {
        match self {
            BudgetResource::Usd => "--budget-usd",
            BudgetResource::Tokens => "--budget-tokens",
            BudgetResource::WallTime => "--max-time",
        }
    }

    /// `used / limit` in the resource's unit, for messages.
    pub fn describe(self, used: f64, limit: f64) -> String {
        match self {
            BudgetResource::Usd => format!("${used:.4} of ${limit:.2}"),
            BudgetResource::Tokens => format!("{used:.0} of {limit:.0} tokens"),
            BudgetResource::WallTime => format!("{used:.0} s of {limit:.0} s running"),
        }
    }
}

/// One budget's use.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BudgetUse {
    pub resource: BudgetResource,
    pub used: f64,
    pub limit: f64,
}

impl BudgetUse {
    pub fn exceeded(&self) -> bool {
        self.used >= self.limit
    }

    pub fn describe(&self) -> String {
        self.resource.describe(self.used, self.limit)
    }
}

/// Use of every set budget, given the run's totals.
pub fn budget_uses(budget: &Budget, usd: f64, tokens: u64, running_secs: f64) -> Vec<BudgetUse> {
    let mut uses = vec![];
    if let Some(limit) = budget.usd {
        uses.push(BudgetUse {
            resource: BudgetResource::Usd,
            used: usd,
            limit,
        });
    }
    if let Some(limit) = budget.tokens {
        uses.push(BudgetUse {
            resource: BudgetResource::Tokens,
            used: tokens as f64,
            limit: limit as f64,
        });
    }
    if let Some(limit) = budget.wall_time_secs {
        uses.push(BudgetUse {
            resource: BudgetResource::WallTime,
            used: running_secs,
            limit: limit as f64,
        });
    }
    uses
}

/// When the loop detector speaks up. Counts are of consecutive tool calls / turns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopPolicy {
    /// The same call with the same result this many times in a row.
    pub repeats: u32,
    /// A, B, A, B, … this many full cycles.
    pub alternations: u32,
    /// This many turns whose tool results were all seen before (no new information).
    pub stalled_turns: u32,
    /// This many model replies in a row without a tool call pause the run, whatever
    /// `on_text_reply` says (runs journaled before this rule read as 3).
    #[serde(default = "default_no_tool_turns")]
    pub no_tool_turns: u32,
}

fn default_no_tool_turns() -> u32 {
    3
}

impl Default for LoopPolicy {
    fn default() -> Self {
        LoopPolicy {
            repeats: 4,
            alternations: 3,
            stalled_turns: 8,
            no_tool_turns: default_no_tool_turns(),
        }
    }
}

/// A tool call reduced to what loop detection compares: stable hashes of the call and of its
/// result, and whether the result was new within the remembered window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallFingerprint {
    pub turn: u32,
    pub call: u64,
    pub result: u64,
    pub novel: bool,
}

/// Calls remembered for loop detection.
pub const LOOP_WINDOW: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopPattern {
    Repeat,
    Alternation,
    Stall,
    /// Model replies in a row without a tool call.
    NoToolReplies,
}

/// Remembers `fingerprint` (marking whether its result is new) in a bounded window.
pub fn remember_call(window: &mut VecDeque<CallFingerprint>, turn: u32, call: u64, result: u64) {
    let novel = !window.iter().any(|f| f.result == result);
    window.push_back(CallFingerprint {
        turn,
        call,
        result,
        novel,
    });
    while window.len() > LOOP_WINDOW {
        window.pop_front();
    }
}

/// The loop the recent calls show, if any, described for the model and the person.
pub fn detect_loop(
    window: &VecDeque<CallFingerprint>,
    policy: &LoopPolicy,
) -> Option<(LoopPattern, String)> {
    let calls: Vec<&CallFingerprint> = window.iter().collect();
    let n = policy.repeats.max(2) as usize;
    if calls.len() >= n {
        let tail = &calls[calls.len() - n..];
        if tail
            .iter()
            .all(|f| f.call == tail[0].call && f.result == tail[0].result)
        {
            return Some((
                LoopPattern::Repeat,
                format!("the same tool call returned the same result {n} times in a row"),
            ));
        }
    }
    let cycle = 2 * policy.alternations.max(2) as usize;
    if calls.len() >= cycle {
        let tail = &calls[calls.len() - cycle..];
        let (a, b) = (tail[0], tail[1]);
        let same =
            |x: &CallFingerprint, y: &CallFingerprint| x.call == y.call && x.result == y.result;
        if !same(a, b)
            && tail
                .iter()
                .enumerate()
                .all(|(i, f)| same(f, if i % 2 == 0 { a } else { b }))
        {
            return Some((
                LoopPattern::Alternation,
                format!(
                    "two tool calls alternated {} times with the same results",
                    policy.alternations.max(2)
                ),
            ));
        }
    }
    let stall = policy.stalled_turns.max(2);
    let mut turns_without_news = 0;
    let mut current = None;
    for f in calls.iter().rev() {
        if f.novel {
            break;
        }
        if current != Some(f.turn) {
            current = Some(f.turn);
            turns_without_news += 1;
        }
    }
    if turns_without_news >= stall {
        return Some((
            LoopPattern::Stall,
            format!("{stall} turns in a row produced no tool result that was not seen before"),
        ));
    }
    None
}

/// A 64-bit FNV-1a hash: stable across processes and versions, so replay agrees.
pub fn stable_hash(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain([0xff]) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(calls: &[(u32, &str, &str)]) -> VecDeque<CallFingerprint> {
        let mut w = VecDeque::new();
        for (turn, call, result) in calls {
            remember_call(&mut w, *turn, stable_hash(&[call]), stable_hash(&[result]));
        }
        w
    }

    #[test]
    fn repeats_are_found() {
        let policy = LoopPolicy::default();
        let w = window(&[(1, "ls", "a"), (2, "ls", "a"), (3, "ls", "a")]);
        assert_eq!(detect_loop(&w, &policy), None);
        let w = window(&[
            (1, "ls", "a"),
            (2, "ls", "a"),
            (3, "ls", "a"),
            (4, "ls", "a"),
        ]);
        assert_eq!(detect_loop(&w, &policy).unwrap().0, LoopPattern::Repeat);
        // Same call, different results: not a repeat (the state is changing).
        let w = window(&[
            (1, "ls", "a"),
            (2, "ls", "b"),
            (3, "ls", "c"),
            (4, "ls", "d"),
        ]);
        assert_eq!(detect_loop(&w, &policy), None);
    }

    #[test]
    fn alternations_are_found() {
        let policy = LoopPolicy::default();
        let abab: Vec<(u32, &str, &str)> = (0..6)
            .map(|i| {
                if i % 2 == 0 {
                    (i, "edit x", "ok")
                } else {
                    (i, "undo x", "ok2")
                }
            })
            .collect();
        assert_eq!(
            detect_loop(&window(&abab), &policy).unwrap().0,
            LoopPattern::Alternation
        );
        assert_eq!(detect_loop(&window(&abab[..5]), &policy), None);
    }

    #[test]
    fn stalls_count_turns_without_new_results() {
        let policy = LoopPolicy {
            stalled_turns: 3,
            ..LoopPolicy::default()
        };
        // Results cycle among three seen values across different calls.
        let mut calls = vec![(1, "a", "r1"), (2, "b", "r2"), (3, "c", "r3")];
        calls.extend([(4, "d", "r1"), (5, "e", "r2")]);
        assert_eq!(detect_loop(&window(&calls), &policy), None);
        calls.push((6, "f", "r3"));
        assert_eq!(
            detect_loop(&window(&calls), &policy).unwrap().0,
            LoopPattern::Stall
        );
    }

    #[test]
    fn polling_with_growing_output_is_not_a_loop() {
        let policy = LoopPolicy::default();
        let outputs: Vec<String> = (0..40).map(|i| "building...\n".repeat(i + 1)).collect();
        let calls: Vec<(u32, &str, &str)> = outputs
            .iter()
            .enumerate()
            .map(|(i, o)| (i as u32, "tail build.log", o.as_str()))
            .collect();
        let w = window(&calls);
        assert_eq!(detect_loop(&w, &policy), None);
    }

    #[test]
    fn budgets_report_each_set_ceiling() {
        let budget = Budget {
            usd: Some(1.0),
            tokens: None,
            wall_time_secs: Some(60),
        };
        let uses = budget_uses(&budget, 0.9, 10, 61.0);
        assert_eq!(uses.len(), 2);
        assert!(!uses[0].exceeded() && uses[0].used / uses[0].limit >= WARN_AT);
        assert!(uses[1].exceeded());
        assert_eq!(uses[0].describe(), "$0.9000 of $1.00");
        assert!(budget_uses(&Budget::default(), 5.0, 5, 5.0).is_empty());
    }

    #[test]
    fn hashes_are_stable_and_separate_parts() {
        assert_eq!(stable_hash(&["a", "b"]), stable_hash(&["a", "b"]));
        assert_ne!(stable_hash(&["ab", ""]), stable_hash(&["a", "b"]));
    }
}
