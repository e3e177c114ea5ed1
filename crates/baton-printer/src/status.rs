//! `baton status`: one run as aligned `key  value` lines, then its task table; and the lease and
//! queue words `status` and `ls --all` share.

use baton_core::{FinishedBy, RunState, RunStatus};
use baton_store::RunSummary;
use baton_summary::{RunAggregate, RunView, status_label};

use crate::{duration_words, key_values, one_line, tasks_table, word};

/// Where the run's journal is kept: a shared store also shows who holds the run and its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// SQLite in the state directory: one machine, no workers.
    Local,
    /// PostgreSQL: workers lease runs and take them from the queue.
    Shared,
}

/// The text of `baton status` for a run. `state` is the replayed state when the journal replays
/// (a journal with events from a newer baton does not): without it the lines about elapsed
/// time and the context are left out and every other line still shows.
pub fn text(
    summary: &RunSummary,
    agg: &RunAggregate,
    state: Option<&RunState>,
    store: StoreKind,
) -> String {
    let view = RunView::new(summary, agg);
    let mut rows = run_rows(summary, agg, &view);
    if let Some(state) = state {
        rows.extend(state_rows(state));
    }
    rows.extend(usage_rows(agg, &view));
    rows.push(("events", summary.event_count.to_string()));
    if store == StoreKind::Shared {
        rows.push(("holder", lease_text(summary)));
        if summary.queued {
            let how = match queue_status(summary) {
                "queued" => "waiting for a worker",
                _ => "a worker has it",
            };
            rows.push(("queued", format!("yes ({how})")));
        }
    }
    for (key, at) in [
        ("created", summary.created_at),
        ("updated", summary.updated_at),
    ] {
        rows.push((key, at.strftime("%Y-%m-%d %H:%M:%S UTC").to_string()));
    }
    rows.extend(ending_rows(&view));
    let mut out = key_values(&rows);
    let tasks = agg.tasks();
    if !tasks.tasks.is_empty() {
        out.push('\n');
        out.push_str(&tasks_table(&tasks));
    }
    out
}

type Rows = Vec<(&'static str, String)>;

fn run_rows(summary: &RunSummary, agg: &RunAggregate, view: &RunView) -> Rows {
    let mut rows: Rows = vec![
        ("run", summary.id.to_string()),
        ("goal", one_line(&summary.goal, 200)),
        ("status", status_label(summary)),
    ];
    if let (Some(model), Some(base_url)) = (&agg.model, &agg.base_url) {
        rows.push(("model", format!("{model} at {base_url}")));
    }
    // The turn the progress lines showed last, also when it did not finish (a pause inside
    // it): "6 of max 200", not the 5 finished ones.
    if let Some(max) = agg.max_turns {
        rows.push(("turns", format!("{} of max {max}", view.turns_started)));
    }
    for failure in &view.mcp_failures {
        let why = one_line(&failure.error, 200);
        rows.push((
            "mcp",
            format!(
                "server {} did not start, its tools are missing: {why}",
                failure.server
            ),
        ));
    }
    rows
}

/// History and working memory: these need the reducer's state.
fn state_rows(state: &RunState) -> Rows {
    let mut rows: Rows = vec![(
        "elapsed",
        format!(
            "{} running (pauses and time between processes not counted)",
            duration_words(state.running_ms)
        ),
    )];
    if let Some(settings) = &state.settings {
        rows.push((
            "context",
            format!(
                "window {} tokens, {} compaction{}, {} history entries{}",
                settings.context.window_tokens,
                state.compactions,
                if state.compactions == 1 { "" } else { "s" },
                state.history.len(),
                match (state.plan.len(), state.facts.len()) {
                    (0, 0) => String::new(),
                    (plan, facts) => format!(", plan of {plan} steps, {facts} durable facts"),
                }
            ),
        ));
    }
    rows
}

fn usage_rows(agg: &RunAggregate, view: &RunView) -> Rows {
    let mut rows: Rows = vec![("model calls", agg.model_calls().to_string())];
    rows.push((
        "tokens",
        format!(
            "{} prompt ({} cached) + {} completion{}",
            agg.tokens.input,
            agg.tokens.cached,
            agg.tokens.output,
            match agg.tokens.unreported_calls {
                0 => String::new(),
                n => format!(" (+ {n} calls whose server reported no usage)"),
            }
        ),
    ));
    let cost = agg.cost.text(agg.model_calls());
    rows.push((
        "cost",
        match agg.cost.unknown_calls {
            0 => cost,
            _ => format!("{cost} (`baton cost` has details)"),
        },
    ));
    if view.tasks_total > 0 {
        rows.push((
            "tasks",
            format!("{} of {} done", view.tasks_done, view.tasks_total),
        ));
    }
    rows
}

/// How the run paused or ended.
fn ending_rows(view: &RunView) -> Rows {
    let mut rows = Rows::new();
    if let Some(pause) = &view.pause {
        rows.push((
            "paused",
            format!("{}: {}", word(&pause.reason), pause.detail),
        ));
    }
    if let Some(text) = &view.summary {
        rows.push(("summary", one_line(text, 500)));
    }
    if let Some(by) = view.finished_by {
        let how = match by {
            FinishedBy::Tool => "the model called `finish`",
            FinishedBy::Text => "the model's text reply (after one nudge)",
        };
        rows.push(("ended by", how.to_string()));
    }
    if let Some(error) = &view.error {
        rows.push(("error", error.clone()));
    }
    rows
}

/// A run's status for `ls --all`: `queued` while it waits in the queue for a worker (submitted,
/// or handed back by a stopped worker), else its journal's status.
pub fn queue_status(run: &RunSummary) -> &'static str {
    let open = !matches!(run.status, RunStatus::Finished | RunStatus::Failed);
    if run.queued && open && run.holder.as_ref().is_none_or(|h| !h.alive) {
        "queued"
    } else {
        run.status.as_str()
    }
}

/// The `ls --all` table: every run of a shared store, with its holder and lease.
pub fn queue_table(runs: &[RunSummary]) -> String {
    let mut out = format!(
        "{:<12}  {:<10}  {:>6}  {:<64}  GOAL\n",
        "RUN", "STATUS", "EVENTS", "HOLDER (LEASE)"
    );
    for run in runs {
        out.push_str(&format!(
            "{:<12}  {:<10}  {:>6}  {:<64}  {}\n",
            run.id.short(),
            queue_status(run),
            run.event_count,
            one_line(&lease_text(run), 64),
            one_line(&run.goal, 60)
        ));
    }
    out
}

/// How `ls --all` / `status` describe a run's lease: who holds it, how old the lease is (since
/// it was taken or last renewed) and when it expires.
pub fn lease_text(summary: &RunSummary) -> String {
    lease_text_at(summary, jiff::Timestamp::now())
}

/// [`lease_text`] as seen at `now`.
fn lease_text_at(summary: &RunSummary, now: jiff::Timestamp) -> String {
    match &summary.holder {
        None if summary.status == RunStatus::Finished || summary.status == RunStatus::Failed => {
            "-".into()
        }
        None => "free".into(),
        Some(h) => {
            let age = h
                .renewed_at
                .map(|at| {
                    format!(
                        "age {:.1}s, ",
                        now.duration_since(at).as_secs_f64().max(0.0)
                    )
                })
                .unwrap_or_default();
            let left = h.expires_at.duration_since(now).as_secs_f64();
            if left >= 0.0 {
                format!("{} ({age}expires in {left:.1}s)", h.holder.describe())
            } else {
                format!("{} ({age}expired {:.1}s ago)", h.holder.describe(), -left)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use baton_core::RunId;
    use baton_store::{Holder, HolderInfo};

    fn summary(status: RunStatus, holder: Option<HolderInfo>) -> RunSummary {
        let at: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        RunSummary {
            id: RunId::new(),
            goal: "g".into(),
            workspace: "/w".into(),
            status,
            created_at: at,
            updated_at: at,
            event_count: 3,
            holder,
            queued: false,
        }
    }

    #[test]
    fn lease_text_names_the_worker_and_the_lease_age_and_expiry() {
        let now: jiff::Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        let holder = Holder {
            host: "box".into(),
            pid: 7,
            pid_start: None,
            worker_id: Some("w-1".into()),
        };
        let info = HolderInfo {
            holder,
            expires_at: "2026-01-01T00:01:40Z".parse().unwrap(),
            alive: true,
            renewed_at: Some("2026-01-01T00:00:40Z".parse().unwrap()),
        };
        let text = lease_text_at(&summary(RunStatus::Running, Some(info.clone())), now);
        assert_eq!(text, "w-1 (pid 7 on box) (age 20.0s, expires in 40.0s)");
        let expired = HolderInfo {
            expires_at: "2026-01-01T00:00:55Z".parse().unwrap(),
            renewed_at: None,
            ..info
        };
        let text = lease_text_at(&summary(RunStatus::Running, Some(expired)), now);
        assert_eq!(text, "w-1 (pid 7 on box) (expired 5.0s ago)");
        assert_eq!(
            lease_text_at(&summary(RunStatus::Paused, None), now),
            "free"
        );
        assert_eq!(lease_text_at(&summary(RunStatus::Finished, None), now), "-");
    }
}
