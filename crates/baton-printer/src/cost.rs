//! `baton cost`: what each model call of a run cost, from the run's aggregate (the same numbers
//! `baton status` and the dashboard show).

use baton_summary::{CallKind, RunAggregate};

fn usd(cost: Option<f64>) -> String {
    cost.map_or_else(|| "unknown".to_string(), |c| format!("${c:.4}"))
}

fn opt(n: Option<u64>) -> String {
    n.map_or_else(|| "-".to_string(), |n| n.to_string())
}

/// A table of the run's model calls (turn calls and compaction summary calls) and its totals.
/// A call without a price (unknown model) or without reported usage shows "unknown" and makes
/// the total a lower bound, said so plainly.
pub fn render(agg: &RunAggregate) -> String {
    let mut out = format!(
        "{:>5} {:>5}  {:<28} {:>9} {:>8} {:>8} {:>8} {:>9} {:>10}\n",
        "TURN", "CALL", "MODEL", "INPUT", "CACHED", "WRITTEN", "OUTPUT", "REASONING", "COST"
    );
    for row in &agg.calls {
        let call = match (row.kind, row.call) {
            (CallKind::Turn, Some(n)) => n.to_string(),
            _ => "sum".to_string(),
        };
        let model = crate::one_line(&row.model, 28);
        let cells = match &row.usage {
            Some(u) => [
                u.prompt_tokens.to_string(),
                opt(u.cached_prompt_tokens),
                opt(u.cache_write_tokens),
                u.completion_tokens.to_string(),
                opt(u.reasoning_tokens),
            ],
            None => ["?", "?", "?", "?", "?"].map(String::from),
        };
        out.push_str(&format!(
            "{:>5} {call:>5}  {model:<28} {:>9} {:>8} {:>8} {:>8} {:>9} {:>10}\n",
            row.turn,
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            cells[4],
            usd(row.cost_usd)
        ));
    }
    for row in &agg.embeddings {
        out.push_str(&format!(
            "embeddings: {} — {} call{}, {} texts, {} tokens, {}\n",
            row.model,
            row.calls,
            if row.calls == 1 { "" } else { "s" },
            row.inputs,
            row.input_tokens,
            row.cost_usd
                .map_or_else(|| "no price".to_string(), |c| format!("${c:.4}"))
        ));
    }
    let t = &agg.tokens;
    let embeddings = if agg.embeddings.is_empty() {
        ""
    } else {
        " (embeddings included)"
    };
    out.push_str(&format!(
        "total{embeddings}: {} model calls, {} input + {} output tokens, ",
        agg.model_calls(),
        t.input,
        t.output
    ));
    match agg.cost.unknown_calls {
        0 => out.push_str(&format!("${:.4}\n", agg.cost.usd)),
        unknown => out.push_str(&format!(
            "{} — {unknown} call(s) of unknown cost (no price for the model, or no usage \
             reported); add a [prices.\"MODEL\"] table to the config to price them\n",
            if unknown >= agg.model_calls() {
                "cost unknown".to_string()
            } else {
                format!("at least ${:.4}", agg.cost.usd)
            }
        )),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::*;

    fn finished(turn: u32, usage: Option<Usage>, cost_usd: Option<f64>) -> Event {
        Event::ModelCallFinished {
            turn,
            call: turn,
            message: AssistantMessage::default(),
            usage,
            cost_usd,
            finish_reason: None,
            served_model: Some("gpt-4o-2024-08-06".into()),
            duration_ms: 1,
        }
    }

    fn aggregate(events: Vec<Event>) -> RunAggregate {
        let records: Vec<EventRecord> = events
            .into_iter()
            .enumerate()
            .map(|(i, event)| EventRecord {
                run_id: RunId::from_string("r"),
                seq: i as u64,
                at: jiff::Timestamp::UNIX_EPOCH,
                event,
            })
            .collect();
        RunAggregate::from_events(&records)
    }

    #[test]
    fn embeddings_are_listed_and_their_price_is_in_the_total() {
        let usage = Usage {
            prompt_tokens: 1000,
            completion_tokens: 100,
            ..Default::default()
        };
        let text = render(&aggregate(vec![
            finished(1, Some(usage), Some(0.0035)),
            Event::EmbeddingsUsed {
                model: "openai/text-embedding-3-small".into(),
                calls: 2,
                inputs: 7,
                input_tokens: 300,
                cost_usd: Some(0.0015),
            },
            Event::EmbeddingsUsed {
                model: "local/all-MiniLM-L6-v2".into(),
                calls: 1,
                inputs: 1,
                input_tokens: 9,
                cost_usd: None,
            },
        ]));
        assert!(
            text.contains(
                "embeddings: openai/text-embedding-3-small — 2 calls, 7 texts, 300 tokens, $0.0015\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "embeddings: local/all-MiniLM-L6-v2 — 1 call, 1 texts, 9 tokens, no price"
            ),
            "{text}"
        );
        assert!(
            text.ends_with(
                "total (embeddings included): 1 model calls, 1000 input + 100 output tokens, $0.0050\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn totals_add_up_and_unknown_costs_are_never_zero() {
        let usage = Usage {
            prompt_tokens: 1000,
            completion_tokens: 100,
            cached_prompt_tokens: Some(800),
            ..Default::default()
        };
        let text = render(&aggregate(vec![
            finished(1, Some(usage), Some(0.0035)),
            finished(2, Some(usage), Some(0.0015)),
        ]));
        assert!(text.contains("$0.0035") && text.contains("800"), "{text}");
        assert!(
            text.ends_with("total: 2 model calls, 2000 input + 200 output tokens, $0.0050\n"),
            "{text}"
        );

        let text = render(&aggregate(vec![
            finished(1, Some(usage), Some(0.002)),
            finished(2, None, None),
        ]));
        assert!(text.contains("unknown"), "{text}");
        assert!(
            text.contains("at least $0.0020 — 1 call(s) of unknown cost"),
            "{text}"
        );
    }
}
