//! The texts of `baton snapshots` and `baton rollback`.

use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use baton_core::{RunId, SnapshotRecord};
use baton_snapshot::RestoreReport;
use serde_json::{Value, json};

use crate::word;

/// One journaled snapshot of a run, as listed.
pub struct Listed<'a> {
    /// What the journal says of it.
    pub record: &'a SnapshotRecord,
    /// When it was taken.
    pub at: jiff::Timestamp,
    /// Files changed from the one before; `None` when the shadow repository lost its commit
    /// (shown as `?`, not hidden).
    pub files_changed: Option<usize>,
}

/// `baton snapshots --json`: the run and its snapshots, numbered from 1.
pub fn json(run: &RunId, listed: &[Listed<'_>]) -> Value {
    let rows: Vec<Value> = listed
        .iter()
        .enumerate()
        .map(|(i, s)| {
            json!({
                "number": i + 1,
                "snapshot": s.record.snapshot,
                "reason": word(&s.record.reason),
                "task": s.record.task,
                "at": s.at.to_string(),
                "files_changed": s.files_changed,
            })
        })
        .collect();
    json!({ "run": run.to_string(), "snapshots": rows })
}

/// `baton snapshots`: a table, one row per snapshot.
pub fn table(run: &RunId, listed: &[Listed<'_>]) -> String {
    if listed.is_empty() {
        return format!("run {run} has no snapshots\n");
    }
    let mut text = format!(
        "run {run}\n{:>4}  {:<12}  {:<13}  {:<12}  {:<19}  {:>5}\n",
        "#", "SNAPSHOT", "REASON", "TASK", "TIME (UTC)", "FILES"
    );
    for (i, s) in listed.iter().enumerate() {
        text.push_str(&format!(
            "{:>4}  {:<12}  {:<13}  {:<12}  {:<19}  {:>5}\n",
            format!("#{}", i + 1),
            s.record.snapshot.get(..12).unwrap_or(&s.record.snapshot),
            word(&s.record.reason),
            s.record.task.as_deref().unwrap_or("-"),
            s.at.strftime("%Y-%m-%d %H:%M:%S"),
            s.files_changed
                .map_or_else(|| "?".to_string(), |n| n.to_string())
        ));
    }
    text
}

/// `baton rollback`: what restoring snapshot `short` (number `number` of the run) changed, one
/// line per path (`M` rewritten, `+` recreated, `-` removed).
pub fn restored(run: &RunId, short: &str, number: Option<usize>, report: &RestoreReport) -> String {
    let number = number.map(|n| format!(" (#{n})")).unwrap_or_default();
    if report.is_empty() {
        return format!(
            "the workspace already is snapshot {short}{number} of run {run}; nothing changed\n"
        );
    }
    let mut text = format!(
        "restored the workspace to snapshot {short}{number} of run {run}: {} rewritten, {} \
         recreated, {} removed\n",
        report.rewritten.len(),
        report.recreated.len(),
        report.removed.len()
    );
    let mut show = |mark: &str, paths: &[PathBuf]| {
        for path in paths {
            let path = String::from_utf8_lossy(path.as_os_str().as_bytes());
            text.push_str(&format!("  {mark} {path}\n"));
        }
    };
    show("M", &report.rewritten);
    show("+", &report.recreated);
    show("-", &report.removed);
    text
}
