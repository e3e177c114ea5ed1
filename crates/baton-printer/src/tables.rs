//! Aligned tables of the reading commands: `status`'s key/value lines, the task table, the runs
//! table of `ls`.

use baton_summary::RunView;

use crate::{duration_words, one_line};

/// `key  value` lines with the values aligned (keys wider than the column push their value
/// one space further, as `model calls` does).
pub fn key_values(rows: &[(&str, String)]) -> String {
    rows.iter()
        .map(|(key, value)| format!("{key:<10} {value}\n"))
        .collect()
}

/// The tasks of a run as an aligned table.
pub fn tasks_table(graph: &baton_summary::TaskGraph) -> String {
    let source = match graph.source {
        baton_summary::TaskSource::Plan => "task graph",
        baton_summary::TaskSource::Todo => "todo list (update_plan)",
        baton_summary::TaskSource::None => "none",
    };
    let width = graph
        .tasks
        .iter()
        .map(|t| t.id.chars().count())
        .max()
        .unwrap_or(2)
        .max(2);
    let mut out = format!(
        "tasks ({source}): {} of {} done\n{:<width$}  {:<9}  {:>7}  TITLE\n",
        graph.done, graph.total, "ID", "STATE", "ATTEMPT"
    );
    for t in &graph.tasks {
        let attempt = if t.approach == 0 {
            "-".to_string()
        } else {
            format!("{}.{}", t.approach, t.attempt)
        };
        let mut title = one_line(&t.title, 80);
        if let Some(reason) = &t.reason {
            title.push_str(&format!(" ({})", one_line(reason, 80)));
        }
        out.push_str(&format!(
            "{:<width$}  {:<9}  {:>7}  {title}\n",
            t.id,
            t.state.as_str(),
            attempt
        ));
    }
    out
}

/// `baton ls`: one row per run, child runs of `--parallel` indented under their parent.
pub fn runs_table(views: &[RunView]) -> String {
    let mut out = format!(
        "{:<14}  {:<24}  {:>5}  {:>10}  {:>9}  {:<16}  GOAL\n",
        "RUN", "STATUS", "TURNS", "COST", "ELAPSED", "MODEL"
    );
    for v in views {
        let run = if v.depth == 0 {
            v.short_id.clone()
        } else {
            format!("{}└ {}", "  ".repeat(v.depth as usize - 1), v.short_id)
        };
        // `cost.text`, short enough for a column: never $0 for an unknown cost.
        let cost = match v.cost.unknown_calls {
            0 => format!("${:.4}", v.cost.usd),
            _ if v.cost.usd > 0.0 => format!("≥ ${:.4}", v.cost.usd),
            _ => "unknown".to_string(),
        };
        out.push_str(&format!(
            "{:<14}  {:<24}  {:>5}  {:>10}  {:>9}  {:<16}  {}\n",
            one_line(&run, 14),
            one_line(&v.status_label, 24),
            v.turns_started,
            cost,
            duration_words(v.running_ms),
            one_line(v.model.as_deref().unwrap_or("-"), 16),
            one_line(&v.goal, 60)
        ));
    }
    out
}
