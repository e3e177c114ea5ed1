//! How configuration layers merge, declared once: [`layered!`] defines a layer struct (every
//! field an `Option`) and its `overlay`, field by field, from the field list itself — so a new
//! key is one line in the struct. What a set value does to the value below it is its type's
//! [`Layered`] rule: plain values and lists replace, tables merge key by key.

use std::collections::HashMap;
use std::path::PathBuf;

/// How a value set in a later layer combines with the same key's value in an earlier one.
pub trait Layered: Sized {
    /// `over` (the later layer's value) combined with `self`. Default: `over` replaces.
    fn layered(self, over: Self) -> Self {
        over
    }
}

/// A key in two layers: both set combine by the type's rule, else whichever is set.
pub fn overlay_key<T: Layered>(base: Option<T>, over: Option<T>) -> Option<T> {
    match (base, over) {
        (Some(base), Some(over)) => Some(base.layered(over)),
        (base, over) => over.or(base),
    }
}

macro_rules! replaced {
    ($($ty:ty),* $(,)?) => { $(impl Layered for $ty {})* };
}

replaced!(bool, u8, u32, u64, f64, String, PathBuf);
replaced!(
    baton_core::ResponseMode,
    baton_core::OnTextReply,
    baton_core::WireApi,
    baton_core::ReasoningHistory,
    baton_core::Thinking,
    baton_core::Verbosity,
    baton_model::ratelimit::RateLimit,
);

impl<T> Layered for Vec<T> {}

/// `[mcp_servers.NAME]`: a later layer's server replaces the same name's whole table (a
/// server's keys belong together: a project's `url` must not inherit a user file's `command`).
impl<V> Layered for std::collections::BTreeMap<String, V> {
    fn layered(mut self, over: Self) -> Self {
        self.extend(over);
        self
    }
}

/// Maps (`[prices."MODEL"]`) merge entry by entry; a later layer's entry wins.
impl<V> Layered for HashMap<String, V> {
    fn layered(mut self, over: Self) -> Self {
        self.extend(over);
        self
    }
}

/// A key set in a layer replaces the setting.
pub(crate) fn set<T>(setting: &mut T, key: Option<T>) {
    if let Some(value) = key {
        *setting = value;
    }
}

/// A key set in a layer replaces an optional setting.
pub(crate) fn set_some<T>(setting: &mut Option<T>, key: Option<T>) {
    if key.is_some() {
        *setting = key;
    }
}

/// Defines a configuration layer struct and its `overlay`; see the module documentation.
///
/// With `=> Target` after the struct's name, a field may say where its value goes in `Target`:
/// `=> set(limits.max_turns)` (the key replaces the setting) or `=> set_some(tasks.max_turns)`
/// (an optional setting). `apply_declared` then applies every such key, so a plain setting's
/// key, flag and destination are one declaration.
///
/// A field's attributes come in this order: its doc comment, `#[serde(…)]`, then at most one
/// `#[arg(…)]` and one `#[command(…)]`. Those last two are the field's flag, which the CLI's
/// clap twin of the layer reads (`crates/baton-cli/src/flag_layer.rs`, from the same
/// declaration: [`config_layer_fields!`](crate::config_layer_fields)); the layer here drops
/// them, so the library does not depend on clap.
macro_rules! layered {
    (
        $(#[$meta:meta])*
        pub struct $name:ident => $target:ty {
            $(
                $(#[doc = $doc:literal])*
                $(#[serde $serde:tt])*
                $(#[arg $arg:tt])?
                $(#[command $command:tt])?
                pub $field:ident : Option<$ty:ty> $(=> $how:ident($($path:ident).+))?,
            )*
        }
    ) => {
        $crate::layered::layered! {
            $(#[$meta])*
            pub struct $name {
                $(
                    $(#[doc = $doc])*
                    $(#[serde $serde])*
                    pub $field: Option<$ty>,
                )*
            }
        }

        impl $name {
            /// The keys declared with a destination, applied onto `settings`: each set key
            /// replaces its setting, unset keys keep it.
            pub(crate) fn apply_declared(&self, settings: &mut $target) {
                $($(
                    $crate::layered::$how(&mut settings.$($path).+, self.$field.as_ref().cloned());
                )?)*
            }
        }
    };
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[doc = $doc:literal])*
                $(#[serde $serde:tt])*
                $(#[arg $arg:tt])?
                $(#[command $command:tt])?
                pub $field:ident : Option<$ty:ty>,
            )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $(
                $(#[doc = $doc])*
                $(#[serde $serde])*
                pub $field: Option<$ty>,
            )*
        }

        impl $name {
            /// Keys set in `over` replace those in `self`; tables merge key by key.
            pub fn overlay(self, over: $name) -> $name {
                $name {
                    $($field: $crate::layered::overlay_key(self.$field, over.$field),)*
                }
            }
        }

        /// A table inside a layer merges key by key.
        impl $crate::layered::Layered for $name {
            fn layered(self, over: Self) -> Self {
                self.overlay(over)
            }
        }
    };
}

pub(crate) use layered;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::{ConfigLayer, SandboxLayer, SnapshotsConfig};
    use baton_model::pricing::Price;

    fn price(input: f64) -> Price {
        Price {
            input_per_mtok: input,
            cached_input_per_mtok: input,
            cache_write_per_mtok: input,
            output_per_mtok: 1.0,
        }
    }

    #[test]
    fn scalars_and_lists_replace_tables_and_maps_merge_unset_keeps() {
        let base = ConfigLayer {
            model: Some("a".into()),
            max_turns: Some(5),
            prices: Some(HashMap::from([
                ("m1".into(), price(1.0)),
                ("m2".into(), price(2.0)),
            ])),
            sandbox: Some(SandboxLayer {
                mode: Some("read-only".into()),
                env: Some(vec!["A".into(), "B".into()]),
                ..SandboxLayer::default()
            }),
            snapshots: Some(SnapshotsConfig {
                enabled: Some(false),
            }),
            ..ConfigLayer::default()
        };
        let over = ConfigLayer {
            model: Some("b".into()),
            prices: Some(HashMap::from([("m2".into(), price(9.0))])),
            sandbox: Some(SandboxLayer {
                env: Some(vec!["C".into()]),
                ..SandboxLayer::default()
            }),
            snapshots: Some(SnapshotsConfig { enabled: None }),
            ..ConfigLayer::default()
        };
        let merged = base.overlay(over);
        assert_eq!(merged.model.as_deref(), Some("b"));
        assert_eq!(merged.max_turns, Some(5), "unset in the later layer: kept");
        let prices = merged.prices.unwrap();
        assert_eq!(prices["m1"].input_per_mtok, 1.0);
        assert_eq!(prices["m2"].input_per_mtok, 9.0);
        let sandbox = merged.sandbox.unwrap();
        assert_eq!(sandbox.mode.as_deref(), Some("read-only"), "tables merge");
        assert_eq!(sandbox.env, Some(vec!["C".to_string()]), "lists replace");
        assert_eq!(
            merged.snapshots,
            Some(SnapshotsConfig { enabled: None }),
            "a later [snapshots] table replaces the earlier one"
        );
    }
}
