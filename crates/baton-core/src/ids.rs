use serde::{Deserialize, Serialize};
use std::fmt;

/// Identifier of a run: a UUIDv7, so ids sort by creation time.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(String);

impl RunId {
    pub fn new() -> Self {
        RunId(uuid::Uuid::now_v7().simple().to_string())
    }

    /// Wraps an id read back from a store or typed by a user (no validation: lookups fail
    /// cleanly when an id does not exist).
    pub fn from_string(s: impl Into<String>) -> Self {
        RunId(s.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 12 characters, enough to be unique in practice and short enough to type.
    pub fn short(&self) -> &str {
        let end = self.0.len().min(12);
        &self.0[..end]
    }
}

impl Default for RunId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
