//! `search_memory`: keyword search over the run's history and the workspace files.
//! (Temporary until the index crate lands in this session.)

use baton_core::ToolResult;
use baton_tools::Workspace;

use crate::journal::Journal;
use crate::run_loop::Engine;

#[derive(Default)]
pub(crate) struct MemorySearch;

impl MemorySearch {
    pub(crate) async fn search(
        &self,
        _engine: &Engine,
        _journal: &Journal,
        _workspace: &Workspace,
        _arguments: &str,
    ) -> ToolResult {
        ToolResult::error("search_memory is unavailable")
    }
}
