//! A blocking runner for one prepared command: wall-clock timeout that kills the whole tree,
//! and output either captured (capped) or passed through. Used by `baton sandbox`, the tests
//! and the benchmark; the async shell tool has its own loop over the same [`Prepared`].

use crate::sandbox::Prepared;
use std::io::{BufRead, Read, Write};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Rewrites output before it is shown (secret redaction).
pub trait StreamFilter: Send + Sync {
    /// What to show for `text`: a whole line, or the start of a long one.
    fn filter(&self, text: &str) -> String;
    /// How many bytes at the end of `text`, the start of a line still being read, must wait
    /// for what follows (so that nothing the filter would change is cut in two).
    fn hold_back(&self, text: &str) -> usize;
}

pub type LineFilter = Arc<dyn StreamFilter>;

/// Where the command's output goes.
#[derive(Clone)]
pub enum Output {
    /// Kept in memory, at most this many bytes per stream (the rest is read and dropped).
    Capture(usize),
    /// Inherited: the command writes straight to baton's stdout and stderr.
    Inherit,
    /// Streamed line by line to baton's stdout and stderr through the filter.
    Filter(LineFilter),
}

#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub timed_out: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The process group id the command ran in (its leader's pid).
    pub pgid: u32,
}

impl Finished {
    /// The exit code a shell would report: the code, or 128 + the signal number.
    pub fn code(&self) -> i32 {
        use std::os::unix::process::ExitStatusExt;
        self.status
            .code()
            .or_else(|| self.status.signal().map(|s| 128 + s))
            .unwrap_or(1)
    }
}

/// Runs `prepared` to completion or until `timeout`, when its whole tree is killed.
pub fn run(mut prepared: Prepared, timeout: Duration, output: Output) -> std::io::Result<Finished> {
    let (out, err) = match output {
        Output::Capture(_) | Output::Filter(_) => (Stdio::piped(), Stdio::piped()),
        Output::Inherit => (Stdio::inherit(), Stdio::inherit()),
    };
    let mut child = prepared
        .command
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()?;
    let pgid = child.id();
    let readers = match &output {
        Output::Capture(cap) => [
            child.stdout.take().map(|p| reader(p, *cap)),
            child.stderr.take().map(|p| reader(p, *cap)),
        ],
        Output::Filter(filter) => [
            child
                .stdout
                .take()
                .map(|p| streamer(p, filter.clone(), || Box::new(std::io::stdout()))),
            child
                .stderr
                .take()
                .map(|p| streamer(p, filter.clone(), || Box::new(std::io::stderr()))),
        ],
        Output::Inherit => [None, None],
    };
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    // Short commands are the common case: poll fast at first, then back off.
    let mut pause = Duration::from_micros(200);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            prepared.guard.kill_running_tree(pgid);
            break child.wait()?;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(10));
    };
    // Background processes still holding the pipes would keep the readers waiting: the
    // command is over, so its tree goes.
    prepared.guard.kill_tree(Some(pgid));
    // A process that escaped the tree (setsid, without a pid namespace or cgroup to catch it)
    // may still hold the pipes: collect what arrives within a grace period, then stop waiting.
    let grace = Instant::now() + Duration::from_secs(2);
    while readers.iter().flatten().any(|h| !h.is_finished()) && Instant::now() < grace {
        std::thread::sleep(Duration::from_millis(10));
    }
    let [stdout, stderr] = readers.map(|r| {
        r.filter(|h| h.is_finished())
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    });
    Ok(Finished {
        status,
        timed_out,
        stdout,
        stderr,
        pgid,
    })
}

fn reader(mut pipe: impl Read + Send + 'static, cap: usize) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut chunk = vec![0u8; 64 * 1024];
        while let Ok(n) = pipe.read(&mut chunk) {
            if n == 0 {
                break;
            }
            let room = cap.saturating_sub(kept.len());
            kept.extend_from_slice(&chunk[..n.min(room)]);
        }
        kept
    })
}

/// The longest prefix of `bytes` that does not end inside a UTF-8 character (the bytes of a
/// character cut at the end wait for the rest; invalid bytes elsewhere are shown as U+FFFD).
fn utf8_prefix(bytes: &[u8]) -> usize {
    let start = bytes.len().saturating_sub(4);
    if let Some(lead) = (start..bytes.len())
        .rev()
        .find(|&i| bytes[i] & 0xC0 != 0x80)
    {
        let needs = match bytes[lead] {
            b if b >= 0xF0 => 4,
            b if b >= 0xE0 => 3,
            b if b >= 0xC0 => 2,
            _ => 1,
        };
        if bytes.len() - lead < needs {
            return lead;
        }
    }
    bytes.len()
}

fn streamer(
    pipe: impl Read + Send + 'static,
    filter: LineFilter,
    sink: fn() -> Box<dyn Write>,
) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut pipe = std::io::BufReader::new(pipe);
        let mut raw = Vec::new();
        let mut pending = String::new();
        let mut out = sink();
        let mut show = |text: &str| {
            let _ = out.write_all(filter.filter(text).as_bytes());
            let _ = out.flush();
        };
        // A line without a newline is still shown once it reaches this size, but for what
        // the filter holds back.
        while let Ok(n) = (&mut pipe).take(64 * 1024).read_until(b'\n', &mut raw) {
            if n == 0 {
                break;
            }
            let line_ends = raw.ends_with(b"\n");
            // A character cut at the end of the piece waits for the rest of its bytes.
            let valid = if line_ends {
                raw.len()
            } else {
                utf8_prefix(&raw)
            };
            pending.push_str(&String::from_utf8_lossy(&raw[..valid]));
            raw.drain(..valid);
            let now = if line_ends {
                pending.len()
            } else {
                pending.len() - filter.hold_back(&pending).min(pending.len())
            };
            if now > 0 {
                show(&pending[..now]);
                pending.drain(..now);
            }
        }
        pending.push_str(&String::from_utf8_lossy(&raw));
        if !pending.is_empty() {
            show(&pending);
        }
        Vec::new()
    })
}

#[cfg(test)]
mod utf8_tests {
    #[test]
    fn a_character_cut_at_the_end_waits() {
        let text = "aé€😀".as_bytes();
        assert_eq!(super::utf8_prefix(text), text.len());
        for cut in 1..text.len() {
            let prefix = super::utf8_prefix(&text[..cut]);
            assert!(std::str::from_utf8(&text[..prefix]).is_ok(), "{cut}");
            assert!(cut - prefix < 4);
        }
    }
}
