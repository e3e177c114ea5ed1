//! Execution policy.
