//! The set of tools offered to the model, in a fixed order.

use crate::{EditFile, ReadFile, WriteFile};
use crate::{Finish, Grep, ListDir, Shell, Tool, ToolContext};
use baton_core::{ToolCall, ToolEffect, ToolResult, ToolSpec};
use std::sync::Arc;

struct Entry {
    /// Computed once, so the specs sent to the model are byte-identical on every turn (a stable
    /// prompt prefix is what keeps the provider's prompt cache hitting).
    spec: ToolSpec,
    tool: Arc<dyn Tool>,
}

/// Tools by name, in registration order.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    entries: Arc<Vec<Entry>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| &e.spec.name))
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry, for agents that bring their own tools.
    pub fn new() -> ToolRegistry {
        ToolRegistry::default()
    }

    /// The standard tools: read_file, write_file, edit_file, list_dir, grep, shell, finish.
    pub fn standard() -> ToolRegistry {
        let tools: [Arc<dyn Tool>; 7] = [
            Arc::new(ReadFile),
            Arc::new(WriteFile),
            Arc::new(EditFile),
            Arc::new(ListDir),
            Arc::new(Grep),
            Arc::new(Shell),
            Arc::new(Finish),
        ];
        tools
            .into_iter()
            .fold(ToolRegistry::new(), ToolRegistry::with)
    }

    /// Adds `tool`, or replaces the tool of the same name in its position.
    pub fn with(self, tool: Arc<dyn Tool>) -> ToolRegistry {
        let spec = tool.spec();
        let mut entries: Vec<Entry> = match Arc::try_unwrap(self.entries) {
            Ok(entries) => entries,
            Err(shared) => shared
                .iter()
                .map(|e| Entry {
                    spec: e.spec.clone(),
                    tool: e.tool.clone(),
                })
                .collect(),
        };
        match entries.iter_mut().find(|e| e.spec.name == spec.name) {
            Some(existing) => *existing = Entry { spec, tool },
            None => entries.push(Entry { spec, tool }),
        }
        ToolRegistry {
            entries: Arc::new(entries),
        }
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.entries.iter().map(|e| e.spec.clone()).collect()
    }

    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|e| e.spec.name.as_str()).collect()
    }

    pub fn effect_of(&self, name: &str) -> Option<ToolEffect> {
        self.find(name).map(|e| e.spec.effect)
    }

    fn find(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.spec.name == name)
    }

    /// Runs `call`. Never fails: an unknown tool or unusable arguments are error results the
    /// model reads and can correct.
    pub async fn execute(&self, ctx: &ToolContext<'_>, call: &ToolCall) -> ToolResult {
        let Some(entry) = self.find(&call.name) else {
            return ToolResult::error(format!(
                "unknown tool '{}'; the available tools are: {}",
                call.name,
                self.names().join(", ")
            ));
        };
        let arguments = if call.arguments.trim().is_empty() {
            "{}"
        } else {
            &call.arguments
        };
        match serde_json::from_str::<serde_json::Value>(arguments) {
            Ok(value) if value.is_object() => entry.tool.call(ctx, arguments).await,
            Ok(_) => ToolResult::error(format!(
                "arguments must be a JSON object — send a JSON object matching the schema of {}",
                call.name
            )),
            Err(e) => ToolResult::error(format!(
                "arguments are not valid JSON: {e} — send a JSON object matching the schema of {}",
                call.name
            )),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn standard_order_and_effects() {
        let registry = ToolRegistry::standard();
        assert_eq!(
            registry.names(),
            [
                "read_file",
                "write_file",
                "edit_file",
                "list_dir",
                "grep",
                "shell",
                "finish"
            ]
        );
        assert_eq!(registry.effect_of("read_file"), Some(ToolEffect::ReadOnly));
        assert_eq!(registry.effect_of("write_file"), Some(ToolEffect::Mutating));
        assert_eq!(registry.effect_of("edit_file"), Some(ToolEffect::Mutating));
        assert_eq!(registry.effect_of("list_dir"), Some(ToolEffect::ReadOnly));
        assert_eq!(registry.effect_of("grep"), Some(ToolEffect::ReadOnly));
        assert_eq!(registry.effect_of("shell"), Some(ToolEffect::Mutating));
        assert_eq!(
            registry.effect_of(baton_core::FINISH_TOOL),
            Some(ToolEffect::ReadOnly)
        );
        assert_eq!(registry.effect_of("nope"), None);
    }

    #[test]
    fn specs_are_stable_and_clean() {
        let a = serde_json::to_string(&ToolRegistry::standard().specs()).unwrap();
        let b = serde_json::to_string(&ToolRegistry::standard().specs()).unwrap();
        assert_eq!(a, b);
        for spec in ToolRegistry::standard().specs() {
            let schema = spec.parameters.as_object().unwrap();
            assert_eq!(schema["type"], "object", "{}", spec.name);
            assert!(!schema.contains_key("$schema") && !schema.contains_key("title"));
            for (field, prop) in schema["properties"].as_object().unwrap() {
                let desc = prop["description"].as_str().unwrap_or_default();
                assert!(desc.len() > 10, "{}.{field} needs a description", spec.name);
                assert!(!desc.contains('\n'), "{}.{field}: {desc}", spec.name);
                if prop["type"] == "integer" {
                    assert_eq!(prop["minimum"], 1, "{}.{field}", spec.name);
                    assert!(prop.get("format").is_none());
                }
            }
            assert!(!spec.description.is_empty());
        }
    }

    #[test]
    fn with_replaces_in_place() {
        let registry = ToolRegistry::standard().with(Arc::new(crate::Finish));
        assert_eq!(registry.names().len(), 7);
        assert_eq!(registry.names()[6], "finish");
    }
}
