//! The run-shaping flags: clap twins of the library's [`baton::config::ConfigLayer`] and its
//! `[context]` table, made from their one declaration ([`baton::config_layer_fields!`],
//! [`baton::context_config_fields!`]) — the same fields, doc comments (each flag's help) and
//! `#[arg(…)]` attributes — so that the library needs no clap and a new setting's flag is still
//! its key's declaration and nothing here. Each twin converts into its library struct field by
//! field.

/// A layer's clap twin and its conversion into the library's struct of the same name.
macro_rules! flag_twin {
    (
        $(#[doc = $doc:literal])*
        #[derive $derive:tt]
        $(#[serde $serde:tt])*
        pub struct $name:ident $(=> $target:ty)? {
            $(
                $(#[doc = $field_doc:literal])*
                $(#[serde $field_serde:tt])*
                $(#[arg $arg:tt])?
                $(#[command $command:tt])?
                pub $field:ident : Option<$ty:ty> $(=> $how:ident($($path:ident).+))?,
            )*
        }
    ) => {
        $(#[doc = $doc])*
        #[derive(clap::Args, Clone, Default)]
        pub struct $name {
            $(
                $(#[doc = $field_doc])*
                $(#[arg $arg])?
                $(#[command $command])?
                pub $field: Option<$ty>,
            )*
        }

        impl From<$name> for baton::config::$name {
            // A flattened table converts into its library struct; every other value is itself.
            fn from(flags: $name) -> Self {
                baton::config::$name {
                    $($field: flags.$field.map(Into::into),)*
                }
            }
        }
    };
}

baton::context_config_fields!(flag_twin);
baton::config_layer_fields!(flag_twin);
