pub mod backend;
pub mod fn_provider;
pub mod run;
