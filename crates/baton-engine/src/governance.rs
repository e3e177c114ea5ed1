//! Budgets and loop detection in the run loop: checked between turns (a clean point to pause)
//! and, for budgets, before every model call against the call's worst case.

use baton_core::governance::{
    BudgetResource, BudgetUse, WARN_AT, WORST_CASE_COMPLETION_TOKENS, budget_uses, detect_loop,
};
use baton_core::{Event, LoopResponse, PauseReason, RunState, RunStatus, Usage};

use crate::Engine;
use crate::EngineError;
use crate::journal::Journal;

/// Seconds the run has been running, counting the time since its last event in this process.
fn running_secs(state: &RunState) -> f64 {
    let since_last = match (state.status, state.last_event_at) {
        (RunStatus::Running, Some(at)) => {
            (jiff::Timestamp::now().as_millisecond() - at.as_millisecond()).max(0) as u64
        }
        _ => 0,
    };
    (state.running_ms + since_last) as f64 / 1000.0
}

/// The current task's use of the per-task budget, with its id.
fn task_used_up(state: &RunState) -> Option<(String, Vec<BudgetUse>)> {
    let settings = state.settings.as_ref()?;
    let task = state.board.as_ref()?.current_entry()?;
    let since_last = match (state.status, state.last_event_at) {
        (RunStatus::Running, Some(at)) => {
            (jiff::Timestamp::now().as_millisecond() - at.as_millisecond()).max(0) as u64
        }
        _ => 0,
    };
    let secs = (task.running_ms + since_last) as f64 / 1000.0;
    Some((
        task.spec.id.clone(),
        budget_uses(&settings.tasks.budget, task.cost_usd, task.tokens, secs),
    ))
}

/// The current task, its turns and its turn limit, when it has used them all.
fn task_turns_used_up(state: &RunState) -> Option<(String, u32, u32)> {
    let limit = state.settings.as_ref()?.tasks.max_turns?;
    let task = state.board.as_ref()?.current_entry()?;
    (task.turns >= limit).then(|| (task.spec.id.clone(), task.turns, limit))
}

fn used_up(state: &RunState) -> Vec<BudgetUse> {
    let Some(settings) = state.settings.as_ref() else {
        return vec![];
    };
    let tokens = state.usage.prompt_tokens + state.usage.completion_tokens;
    budget_uses(
        &settings.budget,
        state.usage.cost_usd,
        tokens,
        running_secs(state),
    )
}

/// What `baton resume` needs to continue past `resource`'s ceiling.
fn raise_hint(resource: BudgetResource, limit: f64) -> String {
    format!(
        "`baton resume {} {}` raises it",
        resource.flag(),
        raised(resource, limit)
    )
}

fn raised(resource: BudgetResource, limit: f64) -> String {
    match resource {
        BudgetResource::Usd => format!("{:.2}", (limit * 2.0).max(1.0)),
        BudgetResource::Tokens => format!("{:.0}", (limit * 2.0).max(1000.0)),
        BudgetResource::WallTime => format!("{:.0}s", (limit * 2.0).max(60.0)),
    }
}

/// The same for a per-task budget.
fn raise_task_hint(resource: BudgetResource, limit: f64) -> String {
    let flag = match resource {
        BudgetResource::Usd => "--task-budget-usd",
        BudgetResource::Tokens => "--task-budget-tokens",
        BudgetResource::WallTime => "--task-max-time",
    };
    format!(
        "`baton resume {flag} {}` raises it",
        raised(resource, limit)
    )
}

impl Engine {
    /// Between turns: pauses on a used-up budget, warns at 80%, nudges or pauses on a loop.
    /// Returns whether it journaled anything (the loop then decides afresh).
    pub(crate) async fn govern_between_turns(
        &self,
        journal: &mut Journal,
    ) -> Result<bool, EngineError> {
        let state = journal.state();
        let uses = used_up(state);
        if let Some(exceeded) = uses.iter().find(|u| u.exceeded()) {
            let detail = format!(
                "budget used up: {} — {}",
                exceeded.describe(),
                raise_hint(exceeded.resource, exceeded.limit)
            );
            self.end_run(
                journal,
                Event::RunPaused {
                    reason: PauseReason::Budget,
                    detail,
                },
            )
            .await?;
            return Ok(true);
        }
        if let Some((task, uses)) = task_used_up(state)
            && let Some(exceeded) = uses.iter().find(|u| u.exceeded())
        {
            let detail = format!(
                "task `{task}` used up its budget: {} — {}",
                exceeded.describe(),
                raise_task_hint(exceeded.resource, exceeded.limit)
            );
            self.end_run(
                journal,
                Event::RunPaused {
                    reason: PauseReason::Budget,
                    detail,
                },
            )
            .await?;
            return Ok(true);
        }
        if let Some((task, turns, limit)) = task_turns_used_up(state) {
            self.end_run(
                journal,
                Event::RunPaused {
                    reason: PauseReason::MaxTurns,
                    detail: format!(
                        "task `{task}` reached its limit of {limit} turns ({turns} worked) — \
                         `baton resume --task-max-turns {}` raises it",
                        limit.saturating_mul(2).max(1)
                    ),
                },
            )
            .await?;
            return Ok(true);
        }
        if let Some(warn) = uses
            .iter()
            .find(|u| u.used >= WARN_AT * u.limit && !state.budget_warned.contains(&u.resource))
        {
            journal
                .record(Event::BudgetWarning {
                    resource: warn.resource,
                    used: warn.used,
                    limit: warn.limit,
                })
                .await?;
            return Ok(true);
        }
        let Some(settings) = state.settings.as_ref() else {
            return Ok(false);
        };
        let Some((pattern, detail)) = detect_loop(&state.recent_calls, &settings.loop_detection)
        else {
            return Ok(false);
        };
        if state.loop_nudges == 0 {
            journal
                .record(Event::LoopDetected {
                    pattern,
                    detail,
                    response: LoopResponse::Nudge,
                })
                .await?;
        } else {
            journal
                .record(Event::LoopDetected {
                    pattern,
                    detail: detail.clone(),
                    response: LoopResponse::Pause,
                })
                .await?;
            self.end_run(
                journal,
                Event::RunPaused {
                    reason: PauseReason::Loop,
                    detail: format!(
                        "the agent keeps going in circles ({detail}) after being told — look at \
                         `baton logs`, then `baton resume` (optionally with other settings)"
                    ),
                },
            )
            .await?;
        }
        Ok(true)
    }

    /// Before a model call: pauses (and returns false) if the call's worst case — the estimated
    /// prompt plus a long answer — would pass a USD or token budget.
    pub(crate) async fn budget_allows_call(
        &self,
        journal: &mut Journal,
        model: &str,
        estimated_prompt_tokens: u64,
    ) -> Result<bool, EngineError> {
        let state = journal.state();
        let Some(settings) = state.settings.as_ref() else {
            return Ok(true);
        };
        let worst = Usage {
            prompt_tokens: estimated_prompt_tokens,
            completion_tokens: WORST_CASE_COMPLETION_TOKENS,
            ..Usage::default()
        };
        let mut refusal = None;
        if let Some(limit) = settings.budget.usd
            && let Some(cost) = self.parts.prices.cost(model, &worst)
            && state.usage.cost_usd + cost > limit
        {
            refusal = Some(format!(
                "the next model call could cost up to ${cost:.4} (≈{estimated_prompt_tokens} prompt + \
                 {WORST_CASE_COMPLETION_TOKENS} completion tokens), which would pass the budget \
                 (${:.4} of ${limit:.2} used) — {}",
                state.usage.cost_usd,
                raise_hint(BudgetResource::Usd, limit)
            ));
        }
        if let Some(limit) = settings.budget.tokens {
            let used = state.usage.prompt_tokens + state.usage.completion_tokens;
            let next = estimated_prompt_tokens + WORST_CASE_COMPLETION_TOKENS;
            if refusal.is_none() && used + next > limit {
                refusal = Some(format!(
                    "the next model call could use up to {next} tokens, which would pass the \
                     budget ({used} of {limit} used) — {}",
                    raise_hint(BudgetResource::Tokens, limit as f64)
                ));
            }
        }
        if let (None, Some(task)) = (
            &refusal,
            state.board.as_ref().and_then(|b| b.current_entry()),
        ) {
            let budget = &settings.tasks.budget;
            let next_tokens = estimated_prompt_tokens + WORST_CASE_COMPLETION_TOKENS;
            if let Some(limit) = budget.usd
                && let Some(cost) = self.parts.prices.cost(model, &worst)
                && task.cost_usd + cost > limit
            {
                refusal = Some(format!(
                    "the next model call could cost up to ${cost:.4}, which would pass task \
                     `{}`'s budget (${:.4} of ${limit:.2} used) — {}",
                    task.spec.id,
                    task.cost_usd,
                    raise_task_hint(BudgetResource::Usd, limit)
                ));
            } else if let Some(limit) = budget.tokens
                && task.tokens + next_tokens > limit
            {
                refusal = Some(format!(
                    "the next model call could use up to {next_tokens} tokens, which would pass \
                     task `{}`'s budget ({} of {limit} used) — {}",
                    task.spec.id,
                    task.tokens,
                    raise_task_hint(BudgetResource::Tokens, limit as f64)
                ));
            }
        }
        let Some(detail) = refusal else {
            return Ok(true);
        };
        self.end_run(
            journal,
            Event::RunPaused {
                reason: PauseReason::Budget,
                detail,
            },
        )
        .await?;
        Ok(false)
    }
}
