//! `baton logs`: a readable transcript of a run, rendered from its journal.

use crate::word;
use baton_core::{Event, EventRecord, FinishedBy, ToolOutcome};

/// Tool output longer than this is shortened in the transcript (the journal keeps all of it).
const MAX_OUTPUT_LINES: usize = 40;

pub fn render(records: &[EventRecord]) -> String {
    let mut out = String::new();
    for record in records {
        let time = record.at.strftime("%H:%M:%S");
        let text = match &record.event {
            Event::RunStarted { .. }
            | Event::RunResumed { .. }
            | Event::SupervisorRestarted { .. }
            | Event::TurnStarted { .. }
            | Event::NoteAdded { .. }
            | Event::TurnFinished { .. }
            | Event::RunPaused { .. }
            | Event::TextEndAccepted { .. }
            | Event::RunFinished { .. }
            | Event::RunFailed { .. } => run_text(record),
            Event::ModelCallStarted { .. }
            | Event::ModelCallFailed { .. }
            | Event::ModelCallFinished { .. }
            | Event::ToolCallStarted { .. }
            | Event::ToolCallFinished { .. } => call_text(record),
            Event::CompactionStarted { .. }
            | Event::BudgetWarning { .. }
            | Event::LoopDetected { .. }
            | Event::CompactionFailed { .. }
            | Event::CompactionFinished { .. } => context_text(record),
            Event::McpServerFailed { server, error } => {
                format!("MCP server {server} did not start, its tools are missing: {error}")
            }
            Event::McpServerStarted {
                server,
                version,
                tools,
            } => format!(
                "MCP server {server} ({version}) started: {} tool(s)",
                tools.len()
            ),
            other => crate::task_line(other).unwrap_or_default(),
        };
        out.push_str(&format!("{time} #{:<4} {text}\n", record.seq));
    }
    out
}

/// A run's life and its turns.
fn run_text(record: &EventRecord) -> String {
    match &record.event {
        Event::RunStarted {
            goal,
            workspace,
            settings,
            project_instructions,
            tools,
            ..
        } => format!(
            "run {} started in {workspace}\ngoal: {goal}\nmodel: {} at {} ({}), max {} turns\ntools: {}{}",
            record.run_id,
            settings.model.model,
            settings.model.base_url,
            word(&settings.model.response_mode),
            settings.limits.max_turns,
            tools
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            if project_instructions.is_some() {
                "\nAGENTS.md: included"
            } else {
                ""
            }
        ),
        Event::RunResumed { settings } => {
            format!(
                "resumed (model {}, max {} turns)",
                settings.model.model, settings.limits.max_turns
            )
        }
        Event::SupervisorRestarted {
            attempt,
            cause,
            backoff_ms,
        } => format!(
            "supervisor: the agent process {cause}; restart {attempt} after {:.1} s",
            *backoff_ms as f64 / 1000.0
        ),
        Event::TurnStarted { turn } => format!("── turn {turn} ──"),
        Event::NoteAdded { text } => format!("note to model: {text}"),
        Event::TurnFinished { turn } => format!("turn {turn} done"),
        Event::RunPaused { reason, detail } => format!("PAUSED [{}]: {detail}", word(reason)),
        Event::TextEndAccepted { summary, .. } => {
            format!("the model's text reply is taken as its claim that it is done: {summary}")
        }
        Event::RunFinished {
            summary,
            finished_by,
        } => match finished_by {
            Some(FinishedBy::Text) => format!("FINISHED (by a text reply): {summary}"),
            _ => format!("FINISHED: {summary}"),
        },
        Event::RunFailed { error } => format!("FAILED: {error}"),
        _ => String::new(),
    }
}

/// Model calls and tool calls.
fn call_text(record: &EventRecord) -> String {
    match &record.event {
        Event::ModelCallStarted {
            call,
            attempt,
            context,
            ..
        } => {
            let mut line = format!("model call {call}, attempt {attempt} sent");
            if let Some(c) = context {
                line.push_str(&format!(
                    " (≈{} of {} tokens, {} outputs masked{})",
                    c.estimated_prompt_tokens,
                    c.window_tokens,
                    c.masked_outputs,
                    c.prefix_stability
                        .map(|p| format!(", prefix {:.0}% stable", p * 100.0))
                        .unwrap_or_default()
                ));
            }
            line
        }
        Event::ModelCallFailed {
            attempt,
            class,
            message,
            retry_in_ms,
            ..
        } => format!(
            "model call attempt {attempt} failed [{}]: {message}{}",
            word(class),
            retry_in_ms
                .map(|ms| format!(" (retry in {ms} ms)"))
                .unwrap_or_default()
        ),
        Event::ModelCallFinished {
            message,
            usage,
            duration_ms,
            finish_reason,
            ..
        } => {
            let tokens = match usage {
                Some(u) => format!(
                    "{} prompt tokens{}, {} completion tokens",
                    u.prompt_tokens,
                    u.cached_prompt_tokens
                        .map(|c| format!(" ({c} cached)"))
                        .unwrap_or_default(),
                    u.completion_tokens
                ),
                None => "usage not reported by the server".to_string(),
            };
            let mut s = format!(
                "model answered in {duration_ms} ms: {tokens}{}",
                finish_reason
                    .as_ref()
                    .map(|r| format!(", finish reason {r}"))
                    .unwrap_or_default()
            );
            let reasoning = message.reasoning_text();
            if !reasoning.trim().is_empty() {
                // Abridged: reasoning runs long, and the journal keeps it whole.
                s.push_str(&format!("\nreasoning:\n{}", shorten(&reasoning)));
            }
            if let Some(text) = message.content.as_deref().filter(|t| !t.trim().is_empty()) {
                s.push_str(&format!("\nassistant: {}", indent(text)));
            }
            for call in &message.tool_calls {
                s.push_str(&format!(
                    "\n  wants {} [{}] {}",
                    call.name, call.id, call.arguments
                ));
            }
            s
        }
        Event::ToolCallStarted {
            name,
            call_id,
            effect,
            ..
        } => format!("tool {name} [{call_id}] started ({})", word(effect)),
        Event::ToolCallFinished {
            call_id,
            result,
            duration_ms,
            ..
        } => {
            let outcome = match result.outcome {
                ToolOutcome::Success => "ok",
                ToolOutcome::Error => "ERROR",
                ToolOutcome::Interrupted => "INTERRUPTED",
            };
            format!(
                "tool [{call_id}] {outcome} in {duration_ms} ms:\n{}",
                indent(&shorten(&result.content))
            )
        }
        _ => String::new(),
    }
}

/// Compaction, budgets and loops.
fn context_text(record: &EventRecord) -> String {
    match &record.event {
        Event::CompactionStarted {
            replaced,
            trigger,
            estimated_prompt_tokens,
            ..
        } => format!(
            "compaction of {replaced} history entries started ({}, prompt ≈ {estimated_prompt_tokens} tokens)",
            word(trigger)
        ),
        Event::BudgetWarning {
            resource,
            used,
            limit,
            ..
        } => format!("budget warning: {} used", resource.describe(*used, *limit)),
        Event::LoopDetected {
            pattern,
            detail,
            response,
        } => format!(
            "loop detected ({}): {detail} → {}",
            word(pattern),
            word(response)
        ),
        Event::CompactionFailed {
            attempt,
            class,
            message,
            retry_in_ms,
            ..
        } => format!(
            "compaction attempt {attempt} failed [{}]: {message}{}",
            word(class),
            retry_in_ms
                .map(|ms| format!(" (retry in {ms} ms)"))
                .unwrap_or_default()
        ),
        Event::CompactionFinished {
            summary,
            replaced,
            first_seq,
            last_seq,
            left_out,
            ..
        } => format!(
            "compacted {replaced} entries (events {first_seq}-{last_seq}{}) into the summary (summary#{}):\n{}",
            if *left_out > 0 {
                format!(", {left_out} oldest left out")
            } else {
                String::new()
            },
            record.seq,
            indent(summary)
        ),
        _ => String::new(),
    }
}

fn indent(text: &str) -> String {
    text.lines().collect::<Vec<_>>().join("\n    ")
}

fn shorten(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= MAX_OUTPUT_LINES {
        return format!("    {}", lines.join("\n    "));
    }
    let head = &lines[..MAX_OUTPUT_LINES / 2];
    let tail = &lines[lines.len() - MAX_OUTPUT_LINES / 2..];
    format!(
        "    {}\n    [... {} lines not shown; `baton logs --full` shows all ...]\n    {}",
        head.join("\n    "),
        lines.len() - MAX_OUTPUT_LINES,
        tail.join("\n    ")
    )
}

/// The whole tool output, for `--full`.
pub fn render_full(records: &[EventRecord]) -> String {
    let mut out = render(&records[..0]);
    for record in records {
        if let Event::ToolCallFinished {
            call_id, result, ..
        } = &record.event
        {
            out.push_str(&format!(
                "#{} tool [{call_id}] {}:\n{}\n",
                record.seq,
                word(&result.outcome),
                result.content
            ));
        } else {
            out.push_str(&render(std::slice::from_ref(record)));
        }
    }
    out
}
