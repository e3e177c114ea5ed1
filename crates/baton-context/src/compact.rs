//! Tier 2 — compaction: when the prompt outgrows its threshold, the model writes a structured
//! handoff summary that replaces the older part of the history.
//!
//! What is replaced is decided here, purely from the state; the summary itself comes back from
//! a model call and is journaled, so replay rebuilds the same history without asking again.

use baton_core::{Compaction, HistoryEntry, Message, ModelRequest, RunState, ToolChoice};

use crate::assemble_parts;

/// What the model is asked for when it compacts. The sections are the ones a person taking
/// over the work would need; the plan and durable facts are kept outside the summary.
pub const SUMMARY_INSTRUCTIONS: &str = "\
The conversation above is about to be compacted: everything before this message will be replaced \
by the summary you write now, and you will continue the work from that summary alone (the plan and \
the durable facts are kept separately and shown to you on every request; do not copy them).

Write a handoff summary for the engineer who continues this work. Be specific: name files, \
functions, commands, error messages and numbers. Use exactly these sections:

## Goal
## Done so far
## Decisions and why
## Approaches that failed and why
## Errors seen
## Constraints and user preferences
## Open problems
## Next step
## Key files

Answer with the summary text only; do not call tools.";

/// Entries of the current turn's history that a compaction would replace: everything before the
/// last `keep_recent_turns` turns. `None` when that would replace nothing new (only an earlier
/// summary, or nothing at all).
pub fn compaction_cut(state: &RunState, keep_recent_turns: u32) -> Option<u32> {
    let keep_from = state.turns_started.saturating_sub(keep_recent_turns);
    let cut = state
        .history
        .iter()
        .position(|entry| entry.turn >= keep_from)
        .unwrap_or(state.history.len());
    let new_material = state.history[..cut].iter().any(|e| e.turn > 0);
    (cut > 0 && new_material).then_some(cut as u32)
}

/// How many turns a compaction of `state` keeps (`None`: compaction is off).
pub fn keep_recent_turns(state: &RunState) -> Option<u32> {
    match state.settings.as_ref()?.context.compaction {
        Compaction::Off | Compaction::Provider => None,
        Compaction::Summarize { keep_recent_turns } => Some(keep_recent_turns),
    }
}

/// Oldest entries left out of the summary request after `overflows` overflow failures: each
/// one leaves out the older half of what was still included (an earlier summary always stays),
/// rounded to whole turns so no tool result loses its call.
pub fn left_out(history: &[HistoryEntry], replaced: u32, overflows: u32) -> u32 {
    let replaced = (replaced as usize).min(history.len());
    let start = usize::from(history.first().is_some_and(|e| e.turn == 0));
    let span = replaced.saturating_sub(start);
    if overflows == 0 || span == 0 {
        return 0;
    }
    let kept = span >> overflows.min(31);
    let mut end = start + span - kept;
    // Extend to a turn boundary.
    while end < replaced && end > start && history[end].turn == history[end - 1].turn {
        end += 1;
    }
    (end - start) as u32
}

/// The request that asks the model for the handoff summary: the same prefix and masked history
/// the turn's request would have (so the provider's cache still applies), cut before the kept
/// turns, with the summary instructions last. Tools stay listed but may not be called.
pub fn compaction_request(state: &RunState, replaced: u32, left_out: u32) -> Option<ModelRequest> {
    let parts = assemble_parts(state)?;
    let replaced = (replaced as usize).min(state.history.len());
    let start = usize::from(state.history.first().is_some_and(|e| e.turn == 0));
    let skip = start..(start + left_out as usize).min(replaced);
    let mut messages = parts.prefix;
    messages.extend(
        parts
            .history
            .into_iter()
            .take(replaced)
            .enumerate()
            .filter(|(i, _)| !skip.contains(i))
            .map(|(_, m)| m),
    );
    let mut instructions = SUMMARY_INSTRUCTIONS.to_string();
    if !skip.is_empty() {
        instructions.push_str(&format!(
            "\n\n({} older history entries were left out of this request so that it fits; say \
             in the summary that details from before them can be fetched with `recall`.)",
            skip.len()
        ));
    }
    messages.push(Message::User {
        content: instructions,
    });
    Some(ModelRequest {
        messages,
        tools: state.tools.clone(),
        tool_choice: ToolChoice::None,
        provider_compaction_at: None,
        ..parts.request
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::Message;

    fn entries(turns: &[u32]) -> Vec<HistoryEntry> {
        turns
            .iter()
            .enumerate()
            .map(|(i, &turn)| HistoryEntry {
                seq: i as u64 + 10,
                turn,
                message: Message::User {
                    content: format!("entry {i}"),
                },
            })
            .collect()
    }

    fn state(turns: &[u32], current: u32) -> RunState {
        RunState {
            history: entries(turns),
            turns_started: current,
            ..RunState::default()
        }
    }

    #[test]
    fn cut_keeps_recent_turns_whole() {
        let s = state(&[1, 1, 2, 2, 2, 3, 3, 4, 4], 5);
        assert_eq!(compaction_cut(&s, 2), Some(5)); // turns 3 and 4 stay
        assert_eq!(compaction_cut(&s, 0), Some(9));
        assert_eq!(compaction_cut(&s, 4), None); // nothing older than turn 1
    }

    #[test]
    fn cut_needs_more_than_an_old_summary() {
        let s = state(&[0, 7, 7, 8, 8], 9);
        assert_eq!(compaction_cut(&s, 2), None);
        assert_eq!(compaction_cut(&s, 1), Some(3));
        assert_eq!(compaction_cut(&state(&[], 3), 0), None);
    }

    #[test]
    fn left_out_halves_the_span_on_whole_turns_and_keeps_the_summary() {
        let history = entries(&[0, 1, 1, 2, 2, 3, 3, 4, 4]);
        assert_eq!(left_out(&history, 9, 0), 0);
        // span 8 (after the summary): keep 4, leave out 4 (turns 1 and 2).
        assert_eq!(left_out(&history, 9, 1), 4);
        // keep 2, leave out 6.
        assert_eq!(left_out(&history, 9, 2), 6);
        // An odd split is extended to the end of its turn.
        let history = entries(&[1, 1, 1, 2, 2]);
        assert_eq!(left_out(&history, 5, 1), 3);
    }
}
