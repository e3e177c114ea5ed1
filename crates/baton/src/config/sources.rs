//! Where each configured key comes from: the layers (user file, project file, environment,
//! flags) folded key by key, each key with the layer that set it last and those it overrode —
//! what `baton config` shows.
//!
//! ```
//! use baton::config::{ConfigLayer, Source, set_keys};
//! let file = ConfigLayer { model: Some("a".into()), ..ConfigLayer::default() };
//! let flag = ConfigLayer { model: Some("b".into()), ..ConfigLayer::default() };
//! let keys = set_keys(&[(Source("user file".into()), file), (Source("flag".into()), flag)]);
//! let (value, source, overrode) = &keys["model"];
//! assert_eq!((value.as_str(), source.0.as_str()), (Some("b"), "flag"));
//! assert_eq!(overrode, &[Source("user file".into())]);
//! ```

use std::collections::BTreeMap;

use serde_json::Value;

use super::ConfigLayer;

/// Where a key's value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source(pub String);

/// `key` → (value, source, the sources it overrode), for every key some layer sets, keys named as
/// in the files (`sandbox.mode`, `prices."MODEL"`).
pub fn set_keys(
    layers: &[(Source, ConfigLayer)],
) -> BTreeMap<String, (Value, Source, Vec<Source>)> {
    let mut out: BTreeMap<String, (Value, Source, Vec<Source>)> = BTreeMap::new();
    for (source, layer) in layers {
        let Ok(value) = serde_json::to_value(layer) else {
            continue;
        };
        let mut flat = Vec::new();
        flatten("", &value, &mut flat);
        for (key, value) in flat {
            match out.get_mut(&key) {
                Some(entry) => {
                    let before = std::mem::replace(&mut entry.1, source.clone());
                    entry.2.push(before);
                    entry.0 = value;
                }
                None => {
                    out.insert(key, (value, source.clone(), Vec::new()));
                }
            }
        }
    }
    out
}

/// Tables become `table.key`; `[prices."MODEL"]` stays one value per model.
fn flatten(prefix: &str, value: &Value, out: &mut Vec<(String, Value)>) {
    match value {
        Value::Null => {}
        Value::Object(map) if prefix.is_empty() || prefix != "prices" => {
            for (key, value) in map {
                let key = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                if prefix.is_empty() && key == "prices" {
                    if let Value::Object(models) = value {
                        for (model, price) in models {
                            out.push((format!("prices.\"{model}\""), price.clone()));
                        }
                    }
                    continue;
                }
                flatten(&key, value, out);
            }
        }
        other => out.push((prefix.to_string(), other.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_key_names_the_last_layer_that_set_it_and_those_it_overrode() {
        let layer = |text: &str| -> ConfigLayer { toml::from_str(text).unwrap() };
        let keys = set_keys(&[
            (
                Source("user file".into()),
                layer("model = \"a\"\nmax_turns = 5\n[sandbox]\nmode = \"read-only\"\n"),
            ),
            (
                Source("project file".into()),
                layer(
                    "model = \"b\"\n[prices.\"b\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n",
                ),
            ),
            (Source("environment".into()), ConfigLayer::default()),
            (Source("flag".into()), layer("model = \"c\"\n")),
        ]);
        let (value, source, overrode) = &keys["model"];
        assert_eq!((value, source.0.as_str()), (&Value::from("c"), "flag"));
        assert_eq!(
            overrode,
            &[Source("user file".into()), Source("project file".into())]
        );
        assert_eq!(keys["max_turns"].1.0, "user file");
        assert_eq!(keys["sandbox.mode"].0, Value::from("read-only"));
        assert!(keys.contains_key("prices.\"b\""), "{keys:?}");
        assert_eq!(keys.len(), 4);
    }
}
