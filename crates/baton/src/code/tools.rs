//! The code index's tools: `search_code` (hybrid search) and `repo_map` (the ranked map of
//! definitions, for a subdirectory or with a larger budget).

use std::sync::Arc;

use async_trait::async_trait;
use baton_core::{ToolEffect, ToolResult};
use baton_index::{DEFAULT_MAP_TOKENS, MAX_K, SearchMode, SearchRequest};
use baton_tools::{ToolContext, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{CodeIntel, MAX_MAP_TOKENS, REPO_MAP_TOOL, SEARCH_CODE_TOOL};

pub(super) struct SearchCode(pub(super) Arc<CodeIntel>);

/// The arguments of `search_code`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SearchCodeArgs {
    /// What to find, in words or identifiers: "where are retries scheduled", "parse_config".
    query: String,
    /// How many hits to return (default 10).
    #[schemars(range(min = 1, max = 50))]
    k: Option<usize>,
    /// Only files whose workspace-relative path starts with this (a directory, a file).
    path_prefix: Option<String>,
}

#[async_trait]
impl TypedTool for SearchCode {
    type Args = SearchCodeArgs;
    const NAME: &'static str = SEARCH_CODE_TOOL;
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;

    fn description(&self) -> String {
        "Search the workspace's code by meaning and by keywords (hybrid: BM25 and embeddings, \
         fused). Each hit is `path:first-last`, the definition it is in, and a short snippet; \
         read_file the lines for the rest."
            .into()
    }

    async fn run(&self, _ctx: &ToolContext<'_>, args: SearchCodeArgs) -> ToolResult {
        let intel = &self.0;
        if let Err(e) = intel.index.update().await {
            return ToolResult::error(format!("cannot update the code index: {e}"));
        }
        let request = SearchRequest {
            query: &args.query,
            k: args.k.unwrap_or(10).clamp(1, MAX_K),
            mode: SearchMode::Hybrid,
            path_prefix: args.path_prefix.as_deref().filter(|p| !p.is_empty()),
        };
        let metered = intel.embeddings.as_ref().map(|e| e.metered.as_ref());
        let results = match intel.index.search(&request, metered).await {
            Ok(results) => results,
            // The embedder failing must not take search away: keywords still work.
            Err(baton_index::IndexError::Embed(e)) => {
                let keyword = SearchRequest {
                    mode: SearchMode::Keyword,
                    ..request.clone()
                };
                match intel.index.search(&keyword, None).await {
                    Ok(mut results) => {
                        results.notes =
                            vec![format!("the embedder failed ({e}): keyword search only")];
                        results
                    }
                    Err(e) => return ToolResult::error(format!("search failed: {e}")),
                }
            }
            Err(e) => return ToolResult::error(format!("search failed: {e}")),
        };
        if results.hits.is_empty() {
            return ToolResult::success(format!("no code matches \"{}\"", args.query));
        }
        let mut out = String::new();
        for hit in &results.hits {
            out.push_str(&format!(
                "{}:{}-{}{}\n",
                hit.path,
                hit.start_line,
                hit.end_line,
                hit.symbol
                    .as_deref()
                    .map(|s| format!(" ({s})"))
                    .unwrap_or_default()
            ));
            for line in hit.snippet.lines() {
                out.push_str("    ");
                out.push_str(line);
                out.push('\n');
            }
        }
        for note in &results.notes {
            out.push_str(&format!("(note: {note})\n"));
        }
        ToolResult::success(out.trim_end().to_owned())
    }
}

pub(super) struct RepoMapTool(pub(super) Arc<CodeIntel>);

/// The arguments of `repo_map`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RepoMapArgs {
    /// Only files under this workspace-relative directory or path prefix.
    path: Option<String>,
    /// The map's size in tokens (default 1000, at most 8000).
    #[schemars(range(min = 1, max = 8000))]
    tokens: Option<usize>,
}

#[async_trait]
impl TypedTool for RepoMapTool {
    type Args = RepoMapArgs;
    const NAME: &'static str = REPO_MAP_TOOL;
    const EFFECT: ToolEffect = ToolEffect::ReadOnly;

    fn description(&self) -> String {
        "The repository's most used definitions by file (line and signature), ranked by how \
         much of the code uses them. For a subdirectory, or with a larger token budget than \
         the map in your brief."
            .into()
    }

    async fn run(&self, ctx: &ToolContext<'_>, args: RepoMapArgs) -> ToolResult {
        let tokens = args
            .tokens
            .unwrap_or(DEFAULT_MAP_TOKENS)
            .clamp(1, MAX_MAP_TOKENS);
        let prefix = args
            .path
            .as_deref()
            .map(|p| p.trim_start_matches("./").trim_end_matches('/'))
            .filter(|p| !p.is_empty() && *p != ".");
        let focus = ctx
            .run
            .as_ref()
            .map(|r| r.state.goal.clone())
            .unwrap_or_default();
        match self.0.map(&focus, prefix, tokens).await {
            Ok(map) if map.is_empty() => ToolResult::success(match prefix {
                Some(p) => format!("no definitions under {p}"),
                None => "no definitions found in the workspace".to_owned(),
            }),
            Ok(map) => ToolResult::success(map),
            Err(e) => ToolResult::error(e.to_string()),
        }
    }
}
