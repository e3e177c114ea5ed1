//! `baton cost`: what each model call of a run cost, from the journal.

use baton_core::{Event, EventRecord, RunSettings};

fn usd(cost: Option<f64>) -> String {
    cost.map_or_else(|| "unknown".to_string(), |c| format!("${c:.4}"))
}

fn opt(n: Option<u64>) -> String {
    n.map_or_else(|| "-".to_string(), |n| n.to_string())
}

/// A table of the run's model calls and its totals. A call without a price (unknown model) or
/// without reported usage shows "unknown" and makes the total a lower bound, said so plainly.
pub fn render(records: &[EventRecord]) -> String {
    let mut model = String::new();
    let mut out = format!(
        "{:>5} {:>5}  {:<28} {:>9} {:>8} {:>8} {:>8} {:>9} {:>10}\n",
        "TURN", "CALL", "MODEL", "INPUT", "CACHED", "WRITTEN", "OUTPUT", "REASONING", "COST"
    );
    let (mut total, mut input, mut output, mut unknown, mut calls) = (0.0, 0u64, 0u64, 0u32, 0u32);
    for record in records {
        match &record.event {
            Event::RunStarted { settings, .. } | Event::RunResumed { settings } => {
                model = model_name(settings);
            }
            Event::ModelCallFinished {
                turn,
                call,
                usage,
                cost_usd,
                served_model,
                ..
            } => {
                calls += 1;
                let name = served_model.clone().unwrap_or_else(|| model.clone());
                match usage {
                    Some(u) => {
                        input += u.prompt_tokens;
                        output += u.completion_tokens;
                        out.push_str(&format!(
                            "{turn:>5} {call:>5}  {:<28} {:>9} {:>8} {:>8} {:>8} {:>9} {:>10}\n",
                            crate::output::one_line(&name, 28),
                            u.prompt_tokens,
                            opt(u.cached_prompt_tokens),
                            opt(u.cache_write_tokens),
                            u.completion_tokens,
                            opt(u.reasoning_tokens),
                            usd(*cost_usd)
                        ));
                    }
                    None => out.push_str(&format!(
                        "{turn:>5} {call:>5}  {:<28} {:>9} {:>8} {:>8} {:>8} {:>9} {:>10}\n",
                        crate::output::one_line(&name, 28),
                        "?",
                        "?",
                        "?",
                        "?",
                        "?",
                        "unknown"
                    )),
                }
                match cost_usd {
                    Some(c) => total += c,
                    None => unknown += 1,
                }
            }
            _ => {}
        }
    }
    out.push_str(&format!(
        "total: {calls} model calls, {input} input + {output} output tokens, "
    ));
    if unknown == 0 {
        out.push_str(&format!("${total:.4}\n"));
    } else {
        out.push_str(&format!(
            "at least ${total:.4} — {unknown} call(s) of unknown cost (no price for the model, or no usage \
             reported); add a [prices.\"MODEL\"] table to the config to price them\n"
        ));
    }
    out
}

fn model_name(settings: &RunSettings) -> String {
    settings.model.model.clone()
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

    fn records(events: Vec<Event>) -> Vec<EventRecord> {
        events
            .into_iter()
            .enumerate()
            .map(|(i, event)| EventRecord {
                run_id: RunId::from_string("r"),
                seq: i as u64,
                at: jiff::Timestamp::UNIX_EPOCH,
                event,
            })
            .collect()
    }

    #[test]
    fn totals_add_up_and_unknown_costs_are_never_zero() {
        let usage = Usage {
            prompt_tokens: 1000,
            completion_tokens: 100,
            cached_prompt_tokens: Some(800),
            ..Default::default()
        };
        let text = render(&records(vec![
            finished(1, Some(usage), Some(0.0035)),
            finished(2, Some(usage), Some(0.0015)),
        ]));
        assert!(text.contains("$0.0035") && text.contains("800"), "{text}");
        assert!(
            text.ends_with("total: 2 model calls, 2000 input + 200 output tokens, $0.0050\n"),
            "{text}"
        );

        let text = render(&records(vec![
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
