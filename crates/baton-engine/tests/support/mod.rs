pub mod fn_provider;
