//! Serializing JSON values with sorted object keys, so request bytes are deterministic.

use serde::Serialize;

/// A JSON value serialized with object keys in sorted order, whatever map type serde_json was
/// built with: its `preserve_order` feature can be switched on by any crate in a build, and the
/// request bytes must not depend on that.
pub(crate) struct Canonical<'a>(pub(crate) &'a serde_json::Value);

impl Serialize for Canonical<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            serde_json::Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                let mut out = serializer.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    out.serialize_entry(key, &Canonical(value))?;
                }
                out.end()
            }
            serde_json::Value::Array(items) => {
                let mut out = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    out.serialize_element(&Canonical(item))?;
                }
                out.end()
            }
            other => other.serialize(serializer),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_serialized_with_sorted_keys_at_every_depth() {
        let value = serde_json::json!({"b": [{"z": 1, "a": null}], "a": {"y": true, "x": "s"}});
        let text = serde_json::to_string(&Canonical(&value)).unwrap();
        assert_eq!(text, r#"{"a":{"x":"s","y":true},"b":[{"a":null,"z":1}]}"#);
    }
}
