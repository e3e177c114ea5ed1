//! The run's working memory that outlives compaction: the plan (a todo list the model keeps
//! with `update_plan`) and durable facts (decisions and findings it records with `remember`).
//!
//! Both change only through successful calls of those tools, applied by the reducer from the
//! journaled arguments, so replay rebuilds them exactly. The argument parsing lives here so the
//! engine (which validates the call) and the reducer (which applies it) cannot disagree.

use serde::{Deserialize, Serialize};

pub const UPDATE_PLAN_TOOL: &str = "update_plan";
pub const REMEMBER_TOOL: &str = "remember";
pub const RECALL_TOOL: &str = "recall";
pub const SEARCH_MEMORY_TOOL: &str = "search_memory";

/// A plan longer than this is refused: it is re-sent with every request.
pub const MAX_PLAN_ITEMS: usize = 50;
/// Longest plan step or fact, in bytes.
pub const MAX_ITEM_BYTES: usize = 500;
/// Facts kept; beyond this the model is told to consolidate with `replaces`.
pub const MAX_FACTS: usize = 100;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanItem {
    pub step: String,
    pub status: PlanStatus,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanStatus {
    Pending,
    InProgress,
    Done,
}

impl PlanStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanStatus::Pending => "pending",
            PlanStatus::InProgress => "in_progress",
            PlanStatus::Done => "done",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpdatePlanArgs {
    items: Vec<PlanItem>,
}

/// Parses `update_plan` arguments: the whole new plan. Errors are meant for the model.
pub fn parse_plan_update(arguments: &str) -> Result<Vec<PlanItem>, String> {
    let args: UpdatePlanArgs = serde_json::from_str(arguments).map_err(|e| {
        format!(
            "invalid arguments: {e}; expected {{\"items\": [{{\"step\": \"...\", \"status\": \"pending|in_progress|done\"}}]}}"
        )
    })?;
    if args.items.len() > MAX_PLAN_ITEMS {
        return Err(format!(
            "the plan has {} items; keep it to {MAX_PLAN_ITEMS} or fewer",
            args.items.len()
        ));
    }
    let mut items = Vec::with_capacity(args.items.len());
    for item in args.items {
        let step = item.step.trim().to_string();
        if step.is_empty() {
            return Err("a plan step is empty".into());
        }
        if step.len() > MAX_ITEM_BYTES {
            return Err(format!(
                "a plan step is {} bytes; keep each under {MAX_ITEM_BYTES}",
                step.len()
            ));
        }
        items.push(PlanItem {
            step,
            status: item.status,
        });
    }
    Ok(items)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RememberArgs {
    fact: String,
    /// Number (1-based) of an earlier fact this one supersedes.
    #[serde(default)]
    replaces: Option<usize>,
}

/// What a `remember` call does to the fact list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FactUpdate {
    pub fact: String,
    /// Index (0-based) of the fact replaced, if any.
    pub replaces: Option<usize>,
}

/// Parses `remember` arguments against the current facts.
pub fn parse_remember(arguments: &str, facts: &[String]) -> Result<FactUpdate, String> {
    let args: RememberArgs = serde_json::from_str(arguments).map_err(|e| {
        format!(
            "invalid arguments: {e}; expected {{\"fact\": \"...\", \"replaces\": N (optional)}}"
        )
    })?;
    let fact = args.fact.trim().to_string();
    if fact.is_empty() {
        return Err("the fact is empty".into());
    }
    if fact.len() > MAX_ITEM_BYTES {
        return Err(format!(
            "the fact is {} bytes; keep it under {MAX_ITEM_BYTES}",
            fact.len()
        ));
    }
    let replaces = match args.replaces {
        None => None,
        Some(n) if n >= 1 && n <= facts.len() => Some(n - 1),
        Some(n) => {
            return Err(format!(
                "there is no fact {n} to replace (facts are numbered 1 to {})",
                facts.len()
            ));
        }
    };
    if replaces.is_none() && facts.len() >= MAX_FACTS {
        return Err(format!(
            "{MAX_FACTS} facts are recorded already; consolidate by replacing one (\"replaces\": N)"
        ));
    }
    Ok(FactUpdate { fact, replaces })
}

/// Applies a parsed update to the fact list.
pub fn apply_fact(facts: &mut Vec<String>, update: FactUpdate) {
    match update.replaces.and_then(|i| facts.get_mut(i)) {
        Some(slot) => *slot = update.fact,
        None => facts.push(update.fact),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_parses_and_trims() {
        let plan = parse_plan_update(
            r#"{"items":[{"step":" write tests ","status":"done"},{"step":"fix","status":"in_progress"}]}"#,
        )
        .unwrap();
        assert_eq!(plan[0].step, "write tests");
        assert_eq!(plan[1].status, PlanStatus::InProgress);
    }

    #[test]
    fn plan_errors_are_specific() {
        for (args, needle) in [
            ("not json", "invalid arguments"),
            (
                r#"{"items":[{"step":"a","status":"maybe"}]}"#,
                "invalid arguments",
            ),
            (r#"{"items":[{"step":"  ","status":"done"}]}"#, "empty"),
            (r#"{"items":[],"extra":1}"#, "invalid arguments"),
        ] {
            let err = parse_plan_update(args).unwrap_err();
            assert!(err.contains(needle), "{args}: {err}");
        }
        let long = serde_json::json!({"items": [{"step": "x".repeat(600), "status": "done"}]});
        assert!(
            parse_plan_update(&long.to_string())
                .unwrap_err()
                .contains("600 bytes")
        );
        let many: Vec<_> = (0..51)
            .map(|i| serde_json::json!({"step": format!("s{i}"), "status": "pending"}))
            .collect();
        let many = serde_json::json!({ "items": many }).to_string();
        assert!(parse_plan_update(&many).unwrap_err().contains("51 items"));
    }

    #[test]
    fn facts_append_and_replace() {
        let mut facts = vec![];
        for args in [
            r#"{"fact":"uses tabs"}"#,
            r#"{"fact":"db is sqlite"}"#,
            r#"{"fact":"db is postgres","replaces":2}"#,
        ] {
            let update = parse_remember(args, &facts).unwrap();
            apply_fact(&mut facts, update);
        }
        assert_eq!(facts, ["uses tabs", "db is postgres"]);
        let err = parse_remember(r#"{"fact":"x","replaces":3}"#, &facts).unwrap_err();
        assert!(err.contains("no fact 3"), "{err}");
        assert!(parse_remember(r#"{"fact":"x","replaces":0}"#, &facts).is_err());
        assert!(parse_remember(r#"{"fact":" "}"#, &facts).is_err());
    }

    #[test]
    fn fact_list_is_bounded() {
        let facts: Vec<String> = (0..MAX_FACTS).map(|i| format!("f{i}")).collect();
        assert!(
            parse_remember(r#"{"fact":"one more"}"#, &facts)
                .unwrap_err()
                .contains("consolidate")
        );
        assert!(parse_remember(r#"{"fact":"one more","replaces":1}"#, &facts).is_ok());
    }
}
