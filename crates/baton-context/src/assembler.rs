//! Requests built one after another in time proportional to what changed since the previous
//! one, not to the whole context.
//!
//! Between two model calls a run's history only grows at its end, and a batch of old outputs is
//! masked once every `batch_turns` turns. Building each request from scratch copied the whole
//! history, formatted every masked output's placeholder again and dropped the previous request:
//! that made the harness's time per turn grow with the context (`cargo bench -p baton-engine
//! --bench overhead`). An [`Assembler`] keeps the previous request and changes only what the
//! state changed. Whatever it reuses, the request equals [`crate::assemble_with_report`]'s for
//! the same state (invariant 4): the tests below check it across long runs.

use baton_core::{HistoryEntry, Masking, Message, ModelRequest, RunState};

use crate::mask;

/// The previous request and what it was built from.
#[derive(Default)]
pub struct Assembler {
    /// Prefix, shown history, then the working-memory tail if `tail`; `None` before the first
    /// request.
    request: Option<ModelRequest>,
    prefix_len: usize,
    tail: bool,
    /// The journal seq and turn of every history entry shown, in order: a state whose history
    /// starts with the same entries (history only grows between compactions) reuses them.
    shown: Vec<(u64, u32)>,
    masking: Option<Masking>,
    /// The last turn whose outputs are masked in `request`.
    through: u32,
    masked_outputs: u32,
}

/// A request built by [`Assembler::assemble`].
#[derive(Debug)]
pub struct Assembled<'a> {
    pub request: &'a ModelRequest,
    /// Tool outputs shown as placeholders.
    pub masked_outputs: u32,
    /// How many of the request's first messages are those of the previous request, unchanged
    /// (0 for the first request, and after anything but entries appended): what counted them
    /// need not look at them again ([`crate::tokens::RunningCount`]).
    pub unchanged: usize,
}

impl Assembler {
    /// The request for the next model call of `state`'s run (see
    /// [`crate::assemble_with_report`]); `None` if the state has no settings yet.
    pub fn assemble(&mut self, state: &RunState) -> Option<Assembled<'_>> {
        let settings = state.settings.as_ref()?;
        let masking = settings.context.masking;
        let through = mask::masked_through_turn(&masking, state.turns_started);
        let prefix = crate::prefix(state);
        let mut unchanged = 0;
        let mut request = match self.request.take() {
            Some(mut previous) if self.continues(&previous, &prefix, masking, through, state) => {
                if self.tail {
                    previous.messages.pop();
                }
                unchanged = previous.messages.len();
                previous
            }
            _ => {
                self.prefix_len = prefix.len();
                self.shown.clear();
                self.through = 0;
                self.masked_outputs = 0;
                ModelRequest {
                    messages: prefix,
                    ..crate::empty_request(settings)
                }
            }
        };
        self.masking = Some(masking);
        if let Some(first) = self.mask_through(&mut request.messages, &state.history, through) {
            unchanged = unchanged.min(first);
        }
        self.show_new(&mut request.messages, &state.history);

        let fresh = crate::empty_request(settings);
        request.model = fresh.model;
        request.response_mode = fresh.response_mode;
        request.tool_choice = fresh.tool_choice;
        request.reasoning = fresh.reasoning;
        request.provider_compaction_at = fresh.provider_compaction_at;
        request.tools = crate::offered_tools(state);
        let tail = crate::working_memory(state);
        self.tail = tail.is_some();
        if let Some(content) = tail {
            request.messages.push(Message::User { content });
        }
        Some(Assembled {
            request: self.request.insert(request),
            masked_outputs: self.masked_outputs,
            unchanged,
        })
    }

    /// Whether the previous request is `state`'s with entries appended and more outputs masked:
    /// same prefix and masking, a horizon that did not move back, and a history that starts
    /// with every entry shown before.
    fn continues(
        &self,
        previous: &ModelRequest,
        prefix: &[Message],
        masking: Masking,
        through: u32,
        state: &RunState,
    ) -> bool {
        self.masking == Some(masking)
            && through >= self.through
            && previous.messages.get(..self.prefix_len) == Some(prefix)
            && state.history.len() >= self.shown.len()
            && state
                .history
                .iter()
                .zip(&self.shown)
                .all(|(entry, &(seq, turn))| entry.seq == seq && entry.turn == turn)
    }

    /// Masks the shown outputs that a horizon moved to `through` newly covers; returns the
    /// index of the first message it replaced.
    fn mask_through(
        &mut self,
        messages: &mut [Message],
        history: &[HistoryEntry],
        through: u32,
    ) -> Option<usize> {
        if through == self.through {
            return None;
        }
        let min_bytes = self.min_bytes();
        let shown = &history[..self.shown.len()];
        let mut first = None;
        for (i, entry) in shown.iter().enumerate() {
            if entry.turn <= self.through {
                continue;
            }
            if let Some(placeholder) = mask::masked_entry(entry, through, min_bytes) {
                messages[self.prefix_len + i] = placeholder;
                self.masked_outputs += 1;
                first.get_or_insert(self.prefix_len + i);
            }
        }
        self.through = through;
        first
    }

    /// Appends the history entries not shown yet.
    fn show_new(&mut self, messages: &mut Vec<Message>, history: &[HistoryEntry]) {
        let min_bytes = self.min_bytes();
        for entry in &history[self.shown.len()..] {
            let message = match mask::masked_entry(entry, self.through, min_bytes) {
                Some(placeholder) => {
                    self.masked_outputs += 1;
                    placeholder
                }
                None => entry.message.clone(),
            };
            messages.push(message);
            self.shown.push((entry.seq, entry.turn));
        }
    }

    fn min_bytes(&self) -> usize {
        self.masking
            .as_ref()
            .map_or(usize::MAX, mask::min_masked_bytes)
    }
}

#[cfg(test)]
#[path = "assembler_tests.rs"]
mod tests;
