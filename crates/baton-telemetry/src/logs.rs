//! Logs: human-readable on stderr (default `warn`; `-v` info, `-vv` debug, `-vvv` trace), and,
//! for the processes that drive a run (`run`, `resume`, their supervised children, `worker`),
//! JSON lines in a file: `logs/RUN.trace.jsonl` in the workspace's state directory (default `info`). `RUST_LOG` overrides
//! both levels. Nothing is logged to stdout, which belongs to `--json`'s event stream.
//!
//! The file is known only once the run id is (a `resume` resolves it from the store), so the
//! file layer writes to a sink that buffers until [`attach_run`] opens the file. Every line
//! gets the run id and passes through the secret redactor before it is written.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use baton_core::{Redactor, RunId};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Lines kept before the file is opened; past this the earliest process output is dropped
/// (a run whose id never becomes known writes no file at all).
const PENDING_CAP: usize = 1 << 20;

/// Whether this process writes the JSON log file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileLog {
    /// A command that drives a run: lines wait for [`attach_run`] / [`attach_file`].
    Deferred,
    Off,
}

enum State {
    Pending(Vec<u8>),
    Open {
        file: File,
        /// `"run_id":"…",` put first into every JSON object.
        run_field: Option<String>,
    },
    /// The file could not be opened: logging to it is off, the run goes on.
    Failed,
}

struct Sink {
    state: Mutex<State>,
    /// Every secret given so far ([`init`], [`redact_also`]): the redactor is rebuilt from them.
    secrets: Mutex<Vec<String>>,
    redactor: Mutex<Redactor>,
}

static SINK: OnceLock<Sink> = OnceLock::new();

fn sink() -> &'static Sink {
    SINK.get_or_init(|| Sink {
        state: Mutex::new(State::Pending(Vec::new())),
        secrets: Mutex::new(Vec::new()),
        redactor: Mutex::new(redactor(Vec::new())),
    })
}

/// Lines are JSON, where a value with quotes or backslashes appears escaped: both forms go.
fn redactor(secrets: Vec<String>) -> Redactor {
    let escaped: Vec<String> = secrets
        .iter()
        .map(|s| {
            let quoted = json_string(s);
            quoted[1..quoted.len() - 1].to_string()
        })
        .collect();
    Redactor::new(secrets.into_iter().chain(escaped))
}

/// `text` with every secret the logs scrub scrubbed: for lines printed directly (an MCP
/// server's stderr in its failure, say), which may echo a token.
pub fn redacted(text: &str) -> String {
    match sink().redactor.lock() {
        Ok(redactor) => redactor.redact(text),
        Err(_) => text.to_owned(),
    }
}

/// Also scrub these values (secrets known only once the configuration is read), beside every
/// one given before.
pub fn redact_also(secrets: &[String]) {
    let sink = sink();
    let (Ok(mut known), Ok(mut redactor)) = (sink.secrets.lock(), sink.redactor.lock()) else {
        return;
    };
    known.extend(secrets.iter().cloned());
    *redactor = self::redactor(known.clone());
}

impl Sink {
    fn write_line(&self, line: &[u8]) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        match &mut *state {
            State::Pending(buf) => {
                if buf.len() + line.len() <= PENDING_CAP {
                    buf.extend_from_slice(line);
                }
            }
            State::Open { file, run_field } => {
                let text = self.prepare(line, run_field.as_deref());
                // A full disk must not stop the run; the journal is the record that matters.
                let _ = file.write_all(text.as_bytes());
            }
            State::Failed => {}
        }
    }

    fn prepare(&self, lines: &[u8], run_field: Option<&str>) -> String {
        let text = String::from_utf8_lossy(lines);
        let text = match self.redactor.lock() {
            Ok(redactor) => redactor.redact(&text),
            Err(_) => text.into_owned(),
        };
        match run_field {
            Some(field) => with_field(&text, field),
            None => text,
        }
    }

    fn open(&self, path: &Path, run_id: Option<&RunId>) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        // A second attach (a supervisor that picked a new id) keeps the first file.
        let State::Pending(pending) = &mut *state else {
            return;
        };
        let pending = std::mem::take(pending);
        // Private (0700 directories, 0600 file): a log holds what the agent read and wrote.
        let opened = path
            .parent()
            .map_or(Ok(()), |dir| {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
            })
            .and_then(|()| {
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .mode(0o600)
                    .open(path)
            });
        match opened {
            Ok(mut file) => {
                let run_field =
                    run_id.map(|id| format!("\"run_id\":{},", json_string(id.as_str())));
                let text = self.prepare(&pending, run_field.as_deref());
                let _ = file.write_all(text.as_bytes());
                *state = State::Open { file, run_field };
            }
            Err(e) => {
                *state = State::Failed;
                drop(state);
                tracing::warn!("cannot write the log file {}: {e}", path.display());
            }
        }
    }
}

fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Puts `field` (`"key":value,`) first into each JSON object line of `text`.
fn with_field(text: &str, field: &str) -> String {
    let mut out = String::with_capacity(text.len() + field.len() * 4);
    for line in text.split_inclusive('\n') {
        match line.strip_prefix('{') {
            Some(rest) => {
                out.push('{');
                out.push_str(field);
                out.push_str(rest);
            }
            None => out.push_str(line),
        }
    }
    out
}

/// Where a run's JSON log lives (next to detached runs' `RUN.log`, under another name).
pub fn run_log_path(workspace: &Path, run_id: &RunId) -> PathBuf {
    baton_state::StateDir::for_workspace(workspace)
        .logs()
        .join(format!("{run_id}.trace.jsonl"))
}

/// Starts writing this process's JSON log for `run_id` (the lines so far included).
pub fn attach_run(workspace: &Path, run_id: &RunId) {
    sink().open(&run_log_path(workspace, run_id), Some(run_id));
}

/// Starts writing the JSON log to `path` (a worker's, which serves many runs).
pub fn attach_file(path: &Path) {
    sink().open(path, None);
}

/// Hands each formatted event to the sink as one write (the fmt layer formats an event fully
/// before writing it), so a line is never split between processes appending to one file.
struct LineWriter(Vec<u8>);

impl Write for LineWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            sink().write_line(&self.0);
        }
    }
}

struct SinkWriter;

impl<'a> MakeWriter<'a> for SinkWriter {
    type Writer = LineWriter;
    fn make_writer(&'a self) -> LineWriter {
        LineWriter(Vec::with_capacity(256))
    }
}

fn level_for(verbose: u8) -> &'static str {
    match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    }
}

fn filter(default: &str) -> EnvFilter {
    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default))
}

/// Installs the subscriber: stderr always, the JSON file when `file` says so. `secrets` (the
/// values of credential-named environment variables) are scrubbed from every line from the
/// start; [`redact_also`] adds the ones known later.
pub fn init(verbose: u8, file: FileLog, secrets: &[String]) {
    redact_also(secrets);
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(filter(level_for(verbose)));
    let json = (file == FileLog::Deferred).then(|| {
        tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(SinkWriter)
            .with_filter(filter(level_for(verbose.max(1))))
    });
    let _ = tracing_subscriber::registry()
        .with(stderr)
        .with(json)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_id_goes_first_into_every_object_line() {
        let text = "{\"a\":1}\n{\"b\":2}\n";
        assert_eq!(
            with_field(text, "\"run_id\":\"r\","),
            "{\"run_id\":\"r\",\"a\":1}\n{\"run_id\":\"r\",\"b\":2}\n"
        );
    }

    #[test]
    fn lines_are_redacted_before_they_are_written() {
        let sink = Sink {
            state: Mutex::new(State::Pending(Vec::new())),
            secrets: Mutex::new(Vec::new()),
            redactor: Mutex::new(redactor(vec![
                "sk-very-secret-1234".to_string(),
                "pass\"word\\42".to_string(),
            ])),
        };
        let escaped = sink.prepare(b"{\"a\":\"pass\\\"word\\\\42\"}\n", None);
        assert!(!escaped.contains("word"), "{escaped}");
        let out = sink.prepare(
            b"{\"fields\":{\"message\":\"key sk-very-secret-1234\"}}\n",
            Some("\"run_id\":\"r\","),
        );
        assert!(!out.contains("sk-very-secret-1234"), "{out}");
        let line: serde_json::Value = serde_json::from_str(out.trim()).expect("still JSON");
        assert_eq!(line["run_id"], "r");
    }

    #[test]
    fn levels_grow_with_v() {
        assert_eq!(level_for(0), "warn");
        assert_eq!(level_for(1), "info");
        assert_eq!(level_for(2), "debug");
        assert_eq!(level_for(3), "trace");
        assert_eq!(level_for(9), "trace");
    }
}
