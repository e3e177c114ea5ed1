//! Bounded capture of output whose size we do not control (process output, search results).
//!
//! The beginning of output usually says what was run and the end says how it ended (the error,
//! the test summary), so both are kept and the middle is dropped with a note saying how much.

use std::collections::VecDeque;

/// Keeps the first `head_cap` bytes and the last `tail_cap` bytes pushed into it. Memory is
/// `head_cap + tail_cap` whatever the input size.
#[derive(Debug)]
pub struct CappedBuffer {
    head: Vec<u8>,
    head_cap: usize,
    tail: VecDeque<u8>,
    tail_cap: usize,
    total: u64,
}

impl CappedBuffer {
    pub fn new(head_cap: usize, tail_cap: usize) -> Self {
        CappedBuffer {
            head: Vec::new(),
            head_cap,
            tail: VecDeque::new(),
            tail_cap,
            total: 0,
        }
    }

    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total = self.total.saturating_add(bytes.len() as u64);
        let head_room = self.head_cap.saturating_sub(self.head.len());
        if head_room > 0 {
            let take = head_room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.is_empty() || self.tail_cap == 0 {
            return;
        }
        if bytes.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_cap..]);
        } else {
            let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
            self.tail.drain(..overflow);
            self.tail.extend(bytes);
        }
    }

    /// Bytes pushed so far, kept or not.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes dropped between head and tail.
    pub fn cut(&self) -> u64 {
        self.total - (self.head.len() + self.tail.len()) as u64
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The kept text, with a `[... N bytes cut ...]` line where the middle was dropped. Invalid
    /// UTF-8 is replaced, not rejected: the model is better served by mostly-readable output.
    pub fn to_text(&self) -> String {
        let cut = self.cut();
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        if cut == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        let head = trim_partial_char_end(&self.head);
        let tail = trim_partial_char_start(&tail);
        let mut text = String::from_utf8_lossy(head).into_owned();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("[... {} bytes cut ...]\n", group_thousands(cut)));
        text.push_str(&String::from_utf8_lossy(tail));
        text
    }
}

/// Drops an incomplete multi-byte character at the end, left by cutting inside it, so the
/// boundary does not show as a replacement character.
pub(crate) fn trim_partial_char_end(bytes: &[u8]) -> &[u8] {
    let start = bytes.len().saturating_sub(3);
    for i in (start..bytes.len()).rev() {
        let b = bytes[i];
        if b & 0b1100_0000 == 0b1100_0000 {
            let width = if b >= 0xF0 {
                4
            } else if b >= 0xE0 {
                3
            } else {
                2
            };
            return if bytes.len() - i < width {
                &bytes[..i]
            } else {
                bytes
            };
        }
        if b & 0b1000_0000 == 0 {
            return bytes;
        }
    }
    bytes
}

fn trim_partial_char_start(bytes: &[u8]) -> &[u8] {
    let skip = bytes
        .iter()
        .take(3)
        .take_while(|b| *b & 0b1100_0000 == 0b1000_0000)
        .count();
    &bytes[skip..]
}

/// `48213112` → `48,213,112`.
pub fn group_thousands(n: u64) -> String {
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

/// Cuts `text` to at most `max` bytes on a character boundary.
pub fn truncate_at_char(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn small_input_is_kept_whole() {
        let mut b = CappedBuffer::new(10, 10);
        b.push(b"hello ");
        b.push(b"world");
        assert_eq!(b.to_text(), "hello world");
        assert_eq!(b.cut(), 0);
        assert_eq!(b.total(), 11);
    }

    #[test]
    fn exactly_full_is_not_cut() {
        let mut b = CappedBuffer::new(3, 3);
        b.push(b"abcdef");
        assert_eq!(b.to_text(), "abcdef");
    }

    #[test]
    fn large_input_keeps_head_and_tail_with_note() {
        let mut b = CappedBuffer::new(4, 4);
        for chunk in [&b"0123"[..], b"456789", b"ab", b"cdefgh"] {
            b.push(chunk);
        }
        assert_eq!(b.total(), 18);
        assert_eq!(b.cut(), 10);
        assert_eq!(b.to_text(), "0123\n[... 10 bytes cut ...]\nefgh");
    }

    #[test]
    fn memory_stays_bounded() {
        let mut b = CappedBuffer::new(100, 100);
        let chunk = vec![b'x'; 1 << 16];
        for _ in 0..800 {
            b.push(&chunk);
        }
        assert_eq!(b.head.len(), 100);
        assert_eq!(b.tail.len(), 100);
        assert!(b.tail.capacity() < 1 << 17);
        assert!(b.to_text().contains("[... 52,428,600 bytes cut ...]"));
    }

    #[test]
    fn invalid_utf8_is_lossy() {
        let mut b = CappedBuffer::new(16, 16);
        b.push(b"\xff\xfe ok");
        assert_eq!(b.to_text(), "\u{fffd}\u{fffd} ok");
    }

    #[test]
    fn cut_inside_a_character_does_not_leave_garbage() {
        let mut b = CappedBuffer::new(4, 4);
        // The head limit falls inside the "é".
        b.push("aaaé".as_bytes());
        b.push(&[b'x'; 20]);
        b.push("zéé".as_bytes());
        let text = b.to_text();
        assert!(!text.contains('\u{fffd}'), "{text}");
        assert!(text.starts_with("aaa\n"), "{text}");
        assert!(text.ends_with("éé"), "{text}");
    }

    #[test]
    fn thousands() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1000), "1,000");
        assert_eq!(group_thousands(48_213_112), "48,213,112");
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate_at_char("héllo", 2), "h");
        assert_eq!(truncate_at_char("abc", 10), "abc");
    }
}
