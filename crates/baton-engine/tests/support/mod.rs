pub mod backend;
pub mod fn_provider;
