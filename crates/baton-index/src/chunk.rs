//! Splitting a file into the chunks that are searched and embedded.
//!
//! A definition small enough is one chunk (a function, a method, a struct with its fields). A
//! larger one with nested definitions (an impl block, a class) gives its head (up to its first
//! member) as a chunk and its members as theirs; a large one without members is cut into line
//! windows that keep its name. Code between definitions (imports, top-level statements) and
//! files without a grammar are cut into line windows. Blank-only windows are dropped. The
//! chunks of a file never overlap and, blank lines aside, cover it.

use crate::parse::Def;

/// A definition up to this many lines is one chunk.
pub const MAX_CHUNK_LINES: u32 = 80;
/// Line windows (code outside definitions, files without a grammar) are this long.
pub const WINDOW_LINES: u32 = 40;

/// A chunk of a file: lines `start_line..=end_line` (1-based).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub start_line: u32,
    pub end_line: u32,
    /// The qualified name of the definition the chunk is (or is part of).
    pub symbol: Option<String>,
    /// The chunk's text: its lines, joined by `\n`.
    pub text: String,
}

/// The chunks of a file of `lines` with definitions `defs` (as [`crate::parse::parse`] lists
/// them: source order, parents before children).
pub fn chunks(lines: &[&str], defs: &[Def]) -> Vec<Chunk> {
    let total = u32::try_from(lines.len()).unwrap_or(u32::MAX);
    let mut out = Vec::new();
    let top: Vec<usize> = (0..defs.len())
        .filter(|&i| defs[i].parent.is_none())
        .collect();
    let mut cutter = Cutter {
        lines,
        defs,
        out: &mut out,
    };
    cutter.cover(1, total, &top, None);
    out
}

struct Cutter<'a> {
    lines: &'a [&'a str],
    defs: &'a [Def],
    out: &'a mut Vec<Chunk>,
}

impl Cutter<'_> {
    /// Chunks lines `lo..=hi`, which hold the definitions `members` (indices, in order).
    fn cover(&mut self, lo: u32, hi: u32, members: &[usize], context: Option<&str>) {
        let mut cursor = lo;
        for &i in members {
            let def = &self.defs[i];
            // Overlapping siblings (a grammar's odd nesting) are skipped, never chunked twice.
            if def.start_line < cursor || def.end_line > hi {
                continue;
            }
            self.windows(cursor, def.start_line - 1, context);
            self.definition(i);
            cursor = def.end_line + 1;
        }
        self.windows(cursor, hi, context);
    }

    fn definition(&mut self, i: usize) {
        let def = &self.defs[i];
        let symbol = Some(def.qualified.as_str());
        if def.end_line - def.start_line < MAX_CHUNK_LINES {
            self.push(def.start_line, def.end_line, symbol);
            return;
        }
        let children: Vec<usize> = (i + 1..self.defs.len())
            .filter(|&c| self.defs[c].parent == Some(i))
            .collect();
        match children.first() {
            Some(&first) => {
                let head_end = self.defs[first].start_line - 1;
                // The head (signature, fields, docs) up to the first member.
                self.windows_max(def.start_line, head_end, symbol, MAX_CHUNK_LINES);
                self.cover(head_end + 1, def.end_line, &children, symbol);
            }
            None => self.windows_max(def.start_line, def.end_line, symbol, MAX_CHUNK_LINES),
        }
    }

    fn windows(&mut self, lo: u32, hi: u32, symbol: Option<&str>) {
        self.windows_max(lo, hi, symbol, WINDOW_LINES);
    }

    fn windows_max(&mut self, lo: u32, hi: u32, symbol: Option<&str>, size: u32) {
        let mut start = lo;
        while start <= hi {
            let end = (start + size - 1).min(hi);
            self.push(start, end, symbol);
            start = end + 1;
        }
    }

    fn push(&mut self, start: u32, end: u32, symbol: Option<&str>) {
        let Some(slice) = self
            .lines
            .get(start as usize - 1..(end as usize).min(self.lines.len()))
        else {
            return;
        };
        // Trim blank lines at both ends, so a hit's range is the code itself.
        let first = slice.iter().position(|l| !l.trim().is_empty());
        let last = slice.iter().rposition(|l| !l.trim().is_empty());
        let (Some(first), Some(last)) = (first, last) else {
            return;
        };
        let offset = |i: usize| u32::try_from(i).unwrap_or(0);
        self.out.push(Chunk {
            start_line: start + offset(first),
            end_line: start + offset(last),
            symbol: symbol.map(str::to_owned),
            text: slice[first..=last].join("\n"),
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::lang::Lang;
    use crate::parse::parse;
    use proptest::prelude::*;

    fn chunk_source(lang: Option<Lang>, src: &str) -> Vec<Chunk> {
        let lines: Vec<&str> = src.lines().collect();
        let defs = lang
            .and_then(|l| parse(l, src))
            .map(|p| p.defs)
            .unwrap_or_default();
        chunks(&lines, &defs)
    }

    /// The windows `search_memory` names files by (baton-memory cut its own 40-line chunks
    /// before the workspace had one index; the same ranges come from here now).
    #[test]
    fn text_without_a_grammar_is_cut_in_windows_naming_their_lines() {
        let w = WINDOW_LINES;
        let text: String = (1..=2 * w + 1).map(|i| format!("line {i}\n")).collect();
        let got = chunk_source(None, &text);
        let ranges: Vec<(u32, u32)> = got.iter().map(|c| (c.start_line, c.end_line)).collect();
        assert_eq!(ranges, [(1, w), (w + 1, 2 * w), (2 * w + 1, 2 * w + 1)]);
        let second: Vec<String> = (w + 1..=2 * w).map(|i| format!("line {i}")).collect();
        assert_eq!(got[1].text, second.join("\n"));
        assert!(chunk_source(None, "").is_empty());
        // A window of blank lines only is left out.
        let gap = format!("a\n{}b\n", "\n".repeat(2 * w as usize));
        let starts: Vec<u32> = chunk_source(None, &gap)
            .iter()
            .map(|c| c.start_line)
            .collect();
        assert_eq!(starts, [1, 2 * w + 2]);
    }

    #[test]
    fn functions_are_chunks_and_gaps_are_windows() {
        let src = "use std::fs;\n\nfn a() {\n    1;\n}\n\n\nfn b() {}\n";
        let got: Vec<_> = chunk_source(Some(Lang::Rust), src)
            .into_iter()
            .map(|c| (c.start_line, c.end_line, c.symbol))
            .collect();
        assert_eq!(
            got,
            [
                (1, 1, None),
                (3, 5, Some("a".to_owned())),
                (8, 8, Some("b".to_owned())),
            ]
        );
    }

    #[test]
    fn a_large_impl_splits_into_head_and_methods() {
        let mut src = String::from("impl Big {\n    // Many methods.\n");
        for m in 0..30 {
            src.push_str(&format!("    fn m{m}(&self) {{\n        {m};\n    }}\n"));
        }
        src.push_str("}\n");
        let got = chunk_source(Some(Lang::Rust), &src);
        assert_eq!(got[0].symbol.as_deref(), Some("Big"));
        assert_eq!((got[0].start_line, got[0].end_line), (1, 2));
        assert_eq!(got[1].symbol.as_deref(), Some("Big::m0"));
        assert_eq!((got[1].start_line, got[1].end_line), (3, 5));
        assert_eq!(
            got.last().unwrap().symbol.as_deref(),
            Some("Big"),
            "the closing brace"
        );
        assert_eq!(got.len(), 32);
    }

    #[test]
    fn a_long_function_is_cut_into_named_windows() {
        let body: String = (0..200).map(|i| format!("    x{i}();\n")).collect();
        let src = format!("def long():\n{body}");
        let got = chunk_source(Some(Lang::Python), &src);
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|c| c.symbol.as_deref() == Some("long")));
        assert_eq!((got[0].start_line, got[0].end_line), (1, 80));
        assert_eq!((got[2].start_line, got[2].end_line), (161, 201));
    }

    proptest! {
        /// Chunks never overlap, come in order, and cover every non-blank line exactly once.
        #[test]
        fn chunks_cover_each_line_once(
            blocks in proptest::collection::vec((0u8..4, 1usize..120), 0..12)
        ) {
            let mut src = String::new();
            for (i, (kind, len)) in blocks.iter().enumerate() {
                match kind {
                    0 => { src.push_str(&format!("fn f{i}() {{\n")); for j in 0..*len { src.push_str(&format!("    s{j}();\n")); } src.push_str("}\n"); }
                    1 => { src.push_str(&format!("impl T{i} {{\n")); for j in 0..*len { src.push_str(&format!("    fn g{j}() {{}}\n")); } src.push_str("}\n"); }
                    2 => { for _ in 0..*len { src.push('\n'); } }
                    _ => { for j in 0..*len { src.push_str(&format!("use m{j};\n")); } }
                }
            }
            let lines: Vec<&str> = src.lines().collect();
            let got = chunk_source(Some(Lang::Rust), &src);
            let mut covered = vec![0u32; lines.len() + 1];
            let mut last_end = 0;
            for c in &got {
                prop_assert!(c.start_line > last_end && c.end_line >= c.start_line);
                last_end = c.end_line;
                for l in c.start_line..=c.end_line { covered[l as usize] += 1; }
                prop_assert_eq!(&c.text, &lines[c.start_line as usize - 1..c.end_line as usize].join("\n"));
            }
            for (i, line) in lines.iter().enumerate() {
                if !line.trim().is_empty() { prop_assert_eq!(covered[i + 1], 1, "line {}", i + 1); }
            }
        }
    }
}
