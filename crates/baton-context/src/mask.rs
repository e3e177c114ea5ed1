//! Tier 1 — observation masking: tool outputs of old turns are shown as a placeholder naming
//! their handle, so the prompt stays small while `recall` can still fetch them exactly.
//!
//! Which turns are masked is a pure function of the current turn, and it moves in batches: the
//! prompt prefix changes once every `batch_turns` turns instead of on every turn, which keeps
//! the provider's prompt cache hitting in between.

use baton_core::handle::handle;
use baton_core::{HistoryEntry, Masking, Message};

/// The last turn whose outputs are masked when `current_turn` is under way (0: none).
pub fn masked_through_turn(masking: &Masking, current_turn: u32) -> u32 {
    match *masking {
        Masking::Off => 0,
        Masking::OlderThan {
            keep_turns,
            batch_turns,
            ..
        } => {
            let batch = batch_turns.max(1);
            let eligible = current_turn.saturating_sub(keep_turns);
            eligible / batch * batch
        }
    }
}

/// The placeholder shown instead of a masked output.
pub fn placeholder(name: &str, seq: u64, content: &str) -> String {
    let handle = handle(name, seq);
    let lines = content.lines().count();
    format!(
        "[{handle} output elided: {} {} — recall(\"{handle}\")]",
        thousands(lines as u64),
        if lines == 1 { "line" } else { "lines" }
    )
}

/// The smallest tool output `masking` masks (`usize::MAX` when it is off).
pub fn min_masked_bytes(masking: &Masking) -> usize {
    match *masking {
        Masking::Off => usize::MAX,
        Masking::OlderThan { min_bytes, .. } => min_bytes as usize,
    }
}

/// The placeholder message that stands for `entry` while outputs of turns up to `through` are
/// masked, or `None` if the prompt shows the entry as it is.
pub fn masked_entry(entry: &HistoryEntry, through: u32, min_bytes: usize) -> Option<Message> {
    match &entry.message {
        Message::Tool {
            call_id,
            name,
            content,
        } if entry.turn <= through && content.len() >= min_bytes => Some(Message::Tool {
            call_id: call_id.clone(),
            name: name.clone(),
            content: placeholder(name, entry.seq, content),
        }),
        _ => None,
    }
}

/// The history as the prompt shows it, and how many outputs were masked.
pub fn masked_history(
    history: &[HistoryEntry],
    masking: &Masking,
    current_turn: u32,
) -> (Vec<Message>, u32) {
    let through = masked_through_turn(masking, current_turn);
    let min_bytes = min_masked_bytes(masking);
    let mut masked = 0;
    let messages = history
        .iter()
        .map(|entry| match masked_entry(entry, through, min_bytes) {
            Some(placeholder) => {
                masked += 1;
                placeholder
            }
            None => entry.message.clone(),
        })
        .collect();
    (messages, masked)
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: Masking = Masking::OlderThan {
        keep_turns: 4,
        batch_turns: 10,
        min_bytes: 10,
    };

    #[test]
    fn horizon_moves_in_batches() {
        let horizons: Vec<u32> = (0..40).map(|t| masked_through_turn(&M, t)).collect();
        assert!(horizons[..14].iter().all(|&h| h == 0));
        assert!(horizons[14..24].iter().all(|&h| h == 10));
        assert!(horizons[24..34].iter().all(|&h| h == 20));
        assert_eq!(masked_through_turn(&Masking::Off, 1000), 0);
        // The last keep_turns turns are never masked.
        for t in 0..500 {
            assert!(masked_through_turn(&M, t) + 4 <= t.max(4));
        }
    }

    #[test]
    fn placeholder_names_handle_and_size() {
        let text = "x\n".repeat(3112);
        assert_eq!(
            placeholder("shell", 42, &text),
            "[shell#42 output elided: 3,112 lines — recall(\"shell#42\")]"
        );
        assert_eq!(
            placeholder("read_file", 7, "one"),
            "[read_file#7 output elided: 1 line — recall(\"read_file#7\")]"
        );
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(999), "999");
    }

    #[test]
    fn masks_only_old_large_tool_outputs() {
        let entry = |seq, turn, message| HistoryEntry { seq, turn, message };
        let tool = |content: &str| Message::Tool {
            call_id: "c".into(),
            name: "shell".into(),
            content: content.into(),
        };
        let history = vec![
            entry(
                3,
                1,
                Message::User {
                    content: "a long note that is not an output".into(),
                },
            ),
            entry(5, 1, tool("a long old tool output")),
            entry(6, 1, tool("short")),
            entry(9, 11, tool("a long recent tool output")),
        ];
        let (messages, masked) = masked_history(&history, &M, 15);
        assert_eq!(masked, 1);
        assert_eq!(messages[0], history[0].message);
        assert_eq!(
            messages[1],
            tool("[shell#5 output elided: 1 line — recall(\"shell#5\")]")
        );
        assert_eq!(messages[2], history[2].message);
        assert_eq!(messages[3], history[3].message);
    }
}
