pub mod backend;
pub mod counting;
pub mod fn_provider;
pub mod run;
