//! Prometheus metrics, computed from the runs' aggregates when scraped.
//!
//! Runs are driven by other processes (agents, workers), so an in-process registry would see
//! none of them: the numbers come from the journals, which the server folds incrementally (see
//! `server.rs`). Output follows the text exposition format 0.0.4: `# HELP` / `# TYPE` lines,
//! histograms as cumulative `_bucket{le=…}` series plus `_sum` and `_count`, label values
//! escaped.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::aggregate::RunAggregate;

/// Model call latency buckets, seconds.
pub const MODEL_CALL_BUCKETS: &[f64] = &[
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];
/// Tool call duration buckets, seconds.
pub const TOOL_CALL_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// The content type of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A histogram being filled: per-bucket (non-cumulative) counts, sum and count.
#[derive(Clone, Debug)]
struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    fn observe(&mut self, value: f64) {
        if let Some(i) = self.bounds.iter().position(|b| value <= *b) {
            self.counts[i] += 1;
        }
        self.sum += value;
        self.count += 1;
    }

    fn write(&self, out: &mut String, name: &str, label: &str, value: &str) {
        let mut cumulative = 0;
        for (bound, count) in self.bounds.iter().zip(&self.counts) {
            cumulative += count;
            let _ = writeln!(
                out,
                "{name}_bucket{{{label}=\"{}\",le=\"{}\"}} {cumulative}",
                escape(value),
                number(*bound)
            );
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{label}=\"{}\",le=\"+Inf\"}} {}",
            escape(value),
            self.count
        );
        let _ = writeln!(
            out,
            "{name}_sum{{{label}=\"{}\"}} {}",
            escape(value),
            number(self.sum)
        );
        let _ = writeln!(
            out,
            "{name}_count{{{label}=\"{}\"}} {}",
            escape(value),
            self.count
        );
    }
}

/// A label value as the text format wants it: backslash, double quote and newline escaped.
pub fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A sample value: Go-style floats (`+Inf`, `NaN`), integers without a fraction.
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{v}")
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The metrics text for these runs: each run's status word (see `view::status_word`) and its
/// aggregate.
pub fn render<'a>(runs: impl IntoIterator<Item = (&'a str, &'a RunAggregate)>) -> String {
    let mut by_status: BTreeMap<&str, u64> =
        ["running", "interrupted", "paused", "finished", "failed"]
            .into_iter()
            .map(|s| (s, 0))
            .collect();
    // model → [input, cached, output]
    let mut tokens: BTreeMap<&str, [u64; 3]> = BTreeMap::new();
    let mut cost: BTreeMap<&str, f64> = BTreeMap::new();
    let mut unpriced: BTreeMap<&str, u64> = BTreeMap::new();
    let mut model_calls: BTreeMap<&str, Histogram> = BTreeMap::new();
    let mut retries: BTreeMap<&str, u64> = BTreeMap::new();
    let mut tool_calls: BTreeMap<&str, Histogram> = BTreeMap::new();
    for (status, agg) in runs {
        *by_status.entry(status).or_default() += 1;
        for call in &agg.calls {
            let model = call.model.as_str();
            if let Some(u) = &call.usage {
                let t = tokens.entry(model).or_default();
                t[0] += u.prompt_tokens;
                t[1] += u.cached_prompt_tokens.unwrap_or(0);
                t[2] += u.completion_tokens;
            }
            match call.cost_usd {
                Some(c) => *cost.entry(model).or_default() += c,
                None => *unpriced.entry(model).or_default() += 1,
            }
            model_calls
                .entry(model)
                .or_insert_with(|| Histogram::new(MODEL_CALL_BUCKETS))
                .observe(call.duration_ms as f64 / 1000.0);
        }
        for (class, n) in &agg.retries {
            *retries.entry(class.as_str()).or_default() += n;
        }
        for tool in &agg.tools {
            if let Some(ms) = tool.duration_ms {
                tool_calls
                    .entry(tool.name.as_str())
                    .or_insert_with(|| Histogram::new(TOOL_CALL_BUCKETS))
                    .observe(ms as f64 / 1000.0);
            }
        }
    }

    let mut out = String::new();
    header(
        &mut out,
        "baton_runs",
        "gauge",
        "Runs in the store by status (interrupted: marked running, but no live process holds it).",
    );
    for (status, n) in &by_status {
        let _ = writeln!(out, "baton_runs{{status=\"{}\"}} {n}", escape(status));
    }
    header(
        &mut out,
        "baton_tokens_total",
        "counter",
        "Tokens of finished model calls (turn and summary calls) by model and kind; cached is part of input.",
    );
    for (model, [input, cached, output]) in &tokens {
        for (kind, n) in [("input", input), ("cached", cached), ("output", output)] {
            let _ = writeln!(
                out,
                "baton_tokens_total{{model=\"{}\",kind=\"{kind}\"}} {n}",
                escape(model)
            );
        }
    }
    header(
        &mut out,
        "baton_cost_usd_total",
        "counter",
        "USD of the priced model calls by model (calls of unknown price are counted in baton_model_calls_unpriced_total, not as $0).",
    );
    for (model, usd) in &cost {
        let _ = writeln!(
            out,
            "baton_cost_usd_total{{model=\"{}\"}} {}",
            escape(model),
            number(*usd)
        );
    }
    header(
        &mut out,
        "baton_model_calls_unpriced_total",
        "counter",
        "Finished model calls whose cost is unknown (no price for the model, or no usage reported).",
    );
    for (model, n) in &unpriced {
        let _ = writeln!(
            out,
            "baton_model_calls_unpriced_total{{model=\"{}\"}} {n}",
            escape(model)
        );
    }
    header(
        &mut out,
        "baton_model_call_duration_seconds",
        "histogram",
        "Duration of finished model calls (the successful attempt), by model.",
    );
    for (model, h) in &model_calls {
        h.write(
            &mut out,
            "baton_model_call_duration_seconds",
            "model",
            model,
        );
    }
    header(
        &mut out,
        "baton_model_call_retries_total",
        "counter",
        "Failed model call attempts (each retried, or ending in a pause) by error class.",
    );
    for (class, n) in &retries {
        let _ = writeln!(
            out,
            "baton_model_call_retries_total{{class=\"{}\"}} {n}",
            escape(class)
        );
    }
    header(
        &mut out,
        "baton_tool_call_duration_seconds",
        "histogram",
        "Duration of finished tool calls by tool.",
    );
    for (tool, h) in &tool_calls {
        h.write(&mut out, "baton_tool_call_duration_seconds", "tool", tool);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn histograms_are_cumulative_with_inf_sum_and_count() {
        let mut h = Histogram::new(&[0.1, 1.0]);
        for v in [0.05, 0.5, 0.7, 3.0] {
            h.observe(v);
        }
        let mut out = String::new();
        h.write(&mut out, "x", "model", "m\"1");
        assert_eq!(
            out,
            "x_bucket{model=\"m\\\"1\",le=\"0.1\"} 1\n\
             x_bucket{model=\"m\\\"1\",le=\"1\"} 3\n\
             x_bucket{model=\"m\\\"1\",le=\"+Inf\"} 4\n\
             x_sum{model=\"m\\\"1\"} 4.25\n\
             x_count{model=\"m\\\"1\"} 4\n"
        );
    }

    #[test]
    fn every_status_is_reported_even_at_zero() {
        let text = render(std::iter::empty());
        assert!(
            text.contains("baton_runs{status=\"finished\"} 0\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE baton_model_call_duration_seconds histogram\n"));
    }
}
