//! Argument parsing, schema generation and blocking-work plumbing shared by the tools.

use baton_core::{ToolEffect, ToolResult, ToolSpec};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// Parses the model's raw argument text. Empty text counts as `{}` because some models send
/// nothing for a call whose arguments are all optional.
pub fn parse_args<T: DeserializeOwned>(tool: &str, arguments: &str) -> Result<T, ToolResult> {
    let text = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    let value: Value = serde_json::from_str(text).map_err(|e| {
        ToolResult::error(format!(
            "arguments are not valid JSON: {e} — send a JSON object matching the schema of \
             {tool}"
        ))
    })?;
    if !value.is_object() {
        return Err(ToolResult::error(format!(
            "arguments must be a JSON object, got {} — send a JSON object matching the schema \
             of {tool}",
            json_kind(&value)
        )));
    }
    serde_json::from_value(value).map_err(|e| {
        ToolResult::error(format!(
            "invalid arguments for {tool}: {e} — send a JSON object matching the schema"
        ))
    })
}

/// Runs blocking filesystem work off the async runtime's worker threads.
pub async fn run_blocking<F>(work: F) -> ToolResult
where
    F: FnOnce() -> ToolResult + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| ToolResult::error(format!("the tool failed internally: {e}")))
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A tool spec whose parameter schema is generated from `T`.
pub fn spec_for<T: JsonSchema>(name: &str, description: &str, effect: ToolEffect) -> ToolSpec {
    ToolSpec {
        name: name.to_string(),
        description: description.to_string(),
        parameters: schema_of::<T>(),
        effect,
    }
}

/// The JSON schema of `T`, reduced to what a model needs: `type`, `properties`, `required`.
/// Generator metadata (`$schema`, `title`) only costs prompt tokens, and `["integer", "null"]`
/// unions or `uint` formats confuse small models and some providers' schema validators; an
/// absent optional field already means "none".
pub fn schema_of<T: JsonSchema>() -> Value {
    let mut schema = schemars::schema_for!(T).to_value();
    if let Some(root) = schema.as_object_mut() {
        root.remove("$schema");
        root.remove("title");
        root.remove("description");
        if let Some(Value::Object(props)) = root.get_mut("properties") {
            for prop in props.values_mut() {
                if let Value::Object(prop) = prop {
                    simplify_property(prop);
                }
            }
        }
    }
    schema
}

fn simplify_property(prop: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = prop.get("type") {
        let non_null: Vec<Value> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .cloned()
            .collect();
        if non_null.len() == 1 {
            prop.insert("type".to_string(), non_null[0].clone());
        }
    }
    if let Some(Value::Array(values)) = prop.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if prop.get("type").and_then(Value::as_str) == Some("integer") {
        prop.remove("format");
    }
    // Doc comments arrive with their source line breaks; the model reads prose.
    if let Some(Value::String(description)) = prop.get_mut("description") {
        *description = description.split_whitespace().collect::<Vec<_>>().join(" ");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use baton_core::ToolOutcome;
    use serde::Deserialize;

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Example {
        /// The name, described over
        /// two lines.
        name: String,
        /// How many.
        count: Option<u32>,
    }

    #[test]
    fn schema_is_clean() {
        let schema = schema_of::<Example>();
        assert_eq!(
            schema,
            serde_json::json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The name, described over two lines."},
                    "count": {"type": "integer", "description": "How many.", "minimum": 0}
                },
                "required": ["name"]
            })
        );
    }

    #[test]
    fn parse_errors_are_results() {
        let err = parse_args::<Example>("t", "{not json").err().unwrap();
        assert_eq!(err.outcome, ToolOutcome::Error);
        assert!(
            err.content.starts_with("arguments are not valid JSON"),
            "{}",
            err.content
        );
        let err = parse_args::<Example>("t", "[1]").err().unwrap();
        assert!(
            err.content.contains("must be a JSON object, got an array"),
            "{}",
            err.content
        );
        let err = parse_args::<Example>("t", "{}").err().unwrap();
        assert!(
            err.content.contains("missing field `name`"),
            "{}",
            err.content
        );
        let ok = parse_args::<Example>("t", r#"{"name":"x","junk":1}"#).unwrap();
        assert_eq!(ok.name, "x");
    }
}
