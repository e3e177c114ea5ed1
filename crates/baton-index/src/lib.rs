//! baton's code index.
pub mod chunk;
pub mod lang;
pub mod map;
pub mod parse;
