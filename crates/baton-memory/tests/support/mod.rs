pub mod journal;
pub mod workspace;
