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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use baton_core::task::SnapshotReason;

    fn record(snapshot: &str, task: Option<&str>) -> SnapshotRecord {
        SnapshotRecord {
            seq: 3,
            snapshot: snapshot.into(),
            reason: SnapshotReason::AfterTools,
            task: task.map(str::to_owned),
        }
    }

    #[test]
    fn a_lost_commit_is_a_question_mark_and_null_not_a_missing_row() {
        let run = RunId::from_string("run-1");
        let (a, b) = (
            record("0123456789abcdef", Some("t1")),
            record("fedcba", None),
        );
        let at: jiff::Timestamp = "2026-12-03T10:00:00Z".parse().unwrap();
        let listed = [
            Listed {
                record: &a,
                at,
                files_changed: Some(4),
            },
            Listed {
                record: &b,
                at,
                files_changed: None,
            },
        ];
        let table = table(&run, &listed);
        let rows: Vec<&str> = table.lines().skip(2).collect();
        assert_eq!(rows.len(), 2, "{table}");
        assert!(
            rows[0].starts_with("  #1  0123456789ab  after_tools"),
            "{table}"
        );
        assert!(rows[0].contains("t1") && rows[0].ends_with(" 4"), "{table}");
        assert!(
            rows[1].contains(" -  ") && rows[1].ends_with(" ?"),
            "{table}"
        );
        let json = json(&run, &listed);
        assert_eq!(json["snapshots"][0]["number"], 1);
        assert_eq!(json["snapshots"][0]["files_changed"], 4);
        assert!(json["snapshots"][1]["files_changed"].is_null());
        assert_eq!(super::table(&run, &[]), "run run-1 has no snapshots\n");
    }

    #[test]
    fn a_restore_lists_each_path_under_its_mark() {
        let run = RunId::from_string("run-1");
        let report = RestoreReport {
            rewritten: vec!["src/a.rs".into()],
            recreated: vec![],
            removed: vec!["new.txt".into()],
        };
        let text = restored(&run, "0123abcd", Some(2), &report);
        assert_eq!(
            text,
            "restored the workspace to snapshot 0123abcd (#2) of run run-1: 1 rewritten, 0 \
             recreated, 1 removed\n  M src/a.rs\n  - new.txt\n"
        );
        let nothing = restored(&run, "0123abcd", None, &RestoreReport::default());
        assert!(nothing.contains("nothing changed") && !nothing.contains('#'));
    }
}
