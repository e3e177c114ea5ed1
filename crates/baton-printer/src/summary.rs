//! How much a run did, in words: the status line, the summary at its end, and the documented
//! names of enum values.

use baton_core::{Event, RunState};

/// "41 m 12 s", "2 h 3 m", "12 s".
pub fn duration_words(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} m {} s", secs / 60, secs % 60),
        _ => format!("{} h {} m", secs / 3600, secs % 3600 / 60),
    }
}

/// "950", "12.3 k", "2.1 M".
fn count_words(n: u64) -> String {
    match n {
        0..1000 => n.to_string(),
        1000..1_000_000 => format!("{:.1} k", n as f64 / 1e3),
        _ => format!("{:.1} M", n as f64 / 1e6),
    }
}

/// The run's cost as the status line shows it: never $0 for an unknown cost.
fn cost_words(state: &RunState) -> String {
    let priced = state
        .model_calls_finished
        .saturating_sub(state.usage.unpriced_calls);
    match (state.usage.unpriced_calls, priced) {
        (0, _) => format!("${:.4}", state.usage.cost_usd),
        (_, 0) => "cost unknown".to_string(),
        _ => format!("≥ ${:.4}", state.usage.cost_usd),
    }
}

/// The line at the end of every run: "finished in 41 m 12 s · 183 turns · 2.1 M tokens (94%
/// cached) · $3.12". `None` while the run goes on.
pub fn summary_line(event: &Event, state: &RunState) -> Option<String> {
    let ended = match event {
        Event::RunFinished { .. } => "finished in".to_string(),
        Event::RunFailed { .. } => "failed after".to_string(),
        Event::RunPaused { reason, .. } => format!("paused ({}) after", word(reason)),
        _ => return None,
    };
    let tokens = state.usage.prompt_tokens + state.usage.completion_tokens;
    let cached = match state.usage.prompt_tokens {
        0 => String::new(),
        prompt => format!(
            " ({}% cached)",
            state.usage.cached_prompt_tokens * 100 / prompt
        ),
    };
    let turns = state.turns_started;
    Some(format!(
        "{ended} {} · {turns} turn{} · {} tokens{cached} · {}",
        duration_words(state.running_ms),
        if turns == 1 { "" } else { "s" },
        count_words(tokens),
        cost_words(state)
    ))
}

/// The documented name of an enum value (its serde name, as in docs/events.md), never the
/// Rust one: `run_start`, not `RunStart`.
pub fn word<T: serde::Serialize + std::fmt::Debug>(value: &T) -> String {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{value:?}"))
}

/// The live summary of a run: task progress (when it has a plan), turns, tokens and cost.
pub fn status_line(state: &RunState) -> String {
    let mut parts = Vec::new();
    if let Some(board) = &state.board {
        let done = board
            .tasks
            .iter()
            .filter(|t| t.status.is_terminal())
            .count();
        parts.push(format!("tasks {done}/{}", board.tasks.len()));
        if let Some(task) = board.current_entry() {
            parts.push(format!(
                "{} (approach {}, attempt {})",
                task.spec.id, task.approach, task.attempt
            ));
        }
    }
    parts.push(format!("turn {}", state.turns_started));
    parts.push(format!(
        "{} tokens",
        state.usage.prompt_tokens + state.usage.completion_tokens
    ));
    parts.push(duration_words(state.running_ms));
    // An unknown cost is never shown as $0: "≥" only when some calls were priced.
    parts.push(cost_words(state));
    parts.join(" · ")
}

/// What a run started now uses (defaults where nothing sets a key): `baton config`'s last part.
pub fn settings_text(settings: &baton_core::RunSettings) -> String {
    let mut lines = Vec::new();
    let m = &settings.model;
    lines.push("what a run started now uses (defaults where nothing above is set):".to_string());
    lines.push(format!(
        "  model          {} at {} ({})",
        m.model,
        m.base_url,
        word(&m.provider)
    ));
    lines.push(format!(
        "  responses      {}, tool choice {}",
        word(&m.response_mode),
        word(&m.tool_choice)
    ));
    let r = &m.reasoning;
    lines.push(format!(
        "  reasoning      history {}, effort {}, thinking {}{}",
        word(&r.history),
        r.effort.as_deref().unwrap_or("(server default)"),
        r.thinking
            .map_or("(server default)".to_string(), |t| word(&t)),
        r.thinking_budget
            .map_or(String::new(), |b| format!(", budget {b} tokens"))
    ));
    if let Some(v) = r.verbosity {
        lines.push(format!("  verbosity      {}", v.as_str()));
    }
    lines.push(format!(
        "  turns          at most {}",
        settings.limits.max_turns
    ));
    lines.push(format!(
        "  context        window {} tokens",
        settings.context.window_tokens
    ));
    lines.push(format!(
        "  endings        a text reply: {}; {} replies without a tool call pause",
        word(&settings.endings.on_text_reply),
        settings.loop_detection.no_tool_turns
    ));
    lines.push(format!(
        "  shell          timeout {} s",
        settings.limits.shell_timeout_secs
    ));
    lines.push(String::new());
    lines.join("\n")
}

#[cfg(test)]
mod cost_tests {
    use super::*;

    #[test]
    fn the_status_line_never_shows_an_unknown_cost_as_zero() {
        let mut state = RunState {
            model_calls_finished: 2,
            ..RunState::default()
        };
        state.usage.unpriced_calls = 2;
        assert!(
            status_line(&state).ends_with("cost unknown"),
            "{}",
            status_line(&state)
        );
        state.usage.unpriced_calls = 1;
        state.usage.cost_usd = 0.5;
        assert!(
            status_line(&state).ends_with("≥ $0.5000"),
            "{}",
            status_line(&state)
        );
        state.usage.unpriced_calls = 0;
        assert!(
            status_line(&state).ends_with("· $0.5000"),
            "{}",
            status_line(&state)
        );
    }
}

#[cfg(test)]
mod summary_tests {
    use super::*;

    #[test]
    fn the_end_of_a_run_is_one_line_with_time_turns_tokens_and_cost() {
        assert_eq!(duration_words(12_400), "12 s");
        assert_eq!(duration_words(2_472_000), "41 m 12 s");
        assert_eq!(duration_words(7_380_000), "2 h 3 m");
        let mut state = RunState {
            running_ms: 2_472_000,
            turns_started: 183,
            model_calls_finished: 190,
            ..RunState::default()
        };
        state.usage.prompt_tokens = 2_000_000;
        state.usage.cached_prompt_tokens = 1_880_000;
        state.usage.completion_tokens = 100_000;
        state.usage.cost_usd = 3.12;
        let finished = Event::RunFinished {
            summary: "done".into(),
            finished_by: None,
        };
        assert_eq!(
            summary_line(&finished, &state).unwrap(),
            "finished in 41 m 12 s · 183 turns · 2.1 M tokens (94% cached) · $3.1200"
        );
        assert!(summary_line(&Event::TurnStarted { turn: 1 }, &state).is_none());
    }
}
