//! Pure parsing of git's machine-readable output and validation of names (unit-tested here).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// How a path differs between two trees, seen from the older one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Added,
    Deleted,
    /// Content, mode (executable bit) or type (file ↔ symlink) changed.
    Modified,
}

/// Parses `git diff-index/diff-tree --name-status -z --no-renames`: `STATUS\0PATH\0` pairs.
/// Paths are raw bytes (names need not be UTF-8, may hold newlines).
pub(crate) fn name_status_z(bytes: &[u8]) -> Result<Vec<(Status, PathBuf)>, String> {
    let mut fields = bytes.split(|b| *b == 0);
    let mut out = Vec::new();
    while let Some(status) = fields.next() {
        if status.is_empty() {
            continue;
        }
        let Some(path) = fields.next().filter(|p| !p.is_empty()) else {
            return Err(format!(
                "status {} without a path",
                String::from_utf8_lossy(status)
            ));
        };
        let status = match status.first() {
            Some(b'A') => Status::Added,
            Some(b'D') => Status::Deleted,
            Some(b'M' | b'T') => Status::Modified,
            _ => {
                return Err(format!(
                    "unknown status {:?}",
                    String::from_utf8_lossy(status)
                ));
            }
        };
        out.push((status, PathBuf::from(OsStr::from_bytes(path))));
    }
    Ok(out)
}

/// Run ids become a ref name and an index file name: a conservative alphabet keeps both safe.
pub(crate) fn valid_run_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 200
        && !id.starts_with('.')
        && !id.contains("..")
        && !id.ends_with(".lock")
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A hexadecimal commit id prefix, as a user types it.
pub(crate) fn valid_prefix(prefix: &str) -> bool {
    (4..=40).contains(&prefix.len()) && prefix.bytes().all(|b| b.is_ascii_hexdigit())
}

/// One line of `git log --format=%H%x1f%P%x1f%ct%x1f%s`.
pub(crate) struct LogLine {
    pub(crate) id: String,
    pub(crate) parent: Option<String>,
    pub(crate) time: i64,
    pub(crate) subject: String,
}

pub(crate) fn log_lines(text: &str) -> Result<Vec<LogLine>, String> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let mut parts = line.splitn(4, '\x1f');
            let (Some(id), Some(parents), Some(time), subject) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(format!("bad log line {line:?}"));
            };
            Ok(LogLine {
                id: id.to_string(),
                parent: parents
                    .split(' ')
                    .find(|p| !p.is_empty())
                    .map(str::to_string),
                time: time
                    .parse()
                    .map_err(|e| format!("bad time in {line:?}: {e}"))?,
                subject: subject.unwrap_or_default().to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_status_keeps_odd_names_whole() {
        let raw = b"M\0a b.txt\0A\0new\nline\0D\0gone\xff\0T\0link\0";
        let parsed = name_status_z(raw).unwrap();
        assert_eq!(parsed.len(), 4);
        assert_eq!(parsed[0], (Status::Modified, PathBuf::from("a b.txt")));
        assert_eq!(parsed[1], (Status::Added, PathBuf::from("new\nline")));
        assert_eq!(parsed[2].0, Status::Deleted);
        assert_eq!(parsed[2].1.as_os_str().as_bytes(), b"gone\xff");
        assert_eq!(parsed[3], (Status::Modified, PathBuf::from("link")));
        assert!(name_status_z(b"").unwrap().is_empty());
        assert!(name_status_z(b"M\0").is_err());
        assert!(name_status_z(b"X\0p\0").is_err());
    }

    #[test]
    fn run_ids_are_held_to_a_safe_alphabet() {
        assert!(valid_run_id("019ad1f0-7c3e-7a41-9b2a-0123456789ab"));
        assert!(valid_run_id("run_1.2"));
        for bad in ["", ".hidden", "a..b", "x.lock", "a/b", "a b", "ä", "a:b"] {
            assert!(!valid_run_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn prefixes_are_hex_of_4_to_40() {
        assert!(valid_prefix("abcd"));
        assert!(valid_prefix(&"0".repeat(40)));
        assert!(!valid_prefix("abc"));
        assert!(!valid_prefix("abcg"));
        assert!(!valid_prefix(&"0".repeat(41)));
    }

    #[test]
    fn log_lines_parse_root_and_child() {
        let text = "bbb\x1faaa\x1f20\x1fafter_tools turn 2\naaa\x1f\x1f10\x1frun_start\n";
        let lines = log_lines(text).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].parent.as_deref(), Some("aaa"));
        assert_eq!(lines[0].subject, "after_tools turn 2");
        assert_eq!(lines[1].parent, None);
        assert_eq!(lines[1].time, 10);
        assert!(log_lines("x\x1fy").is_err());
    }
}
