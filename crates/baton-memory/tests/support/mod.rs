pub mod journal;
