//! `baton index`, `baton search` and `baton map`: the workspace's code index from the shell.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::anyhow;
use baton::code::{CodeIntel, count_tokens};
use baton_index::{DEFAULT_MAP_TOKENS, MapRequest, SearchMode, SearchRequest};
use clap::{Args, ValueEnum};

use crate::commands::workspace_dir;
use crate::{CliError, exit};

type CliResult = Result<u8, CliError>;

#[derive(Args)]
pub struct IndexArgs {
    /// Delete the index and build it from nothing.
    #[arg(long)]
    rebuild: bool,
    /// Print what the index holds as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    Hybrid,
    Keyword,
    Vector,
}

#[derive(Args)]
pub struct SearchArgs {
    /// What to find: words ("where are retries scheduled") or identifiers.
    query: String,
    /// How many hits (at most 50).
    #[arg(long, default_value_t = 10)]
    k: usize,
    /// hybrid (BM25 and vectors, fused), keyword or vector.
    #[arg(long, value_enum, default_value = "hybrid")]
    mode: Mode,
    /// Only files whose path starts with this.
    #[arg(long, value_name = "PATH")]
    path: Option<String>,
    /// One JSON object per hit, best first.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct MapArgs {
    /// Only files under this path.
    path: Option<String>,
    /// The map's size in tokens (default: `[repo_map] tokens`, else 1000).
    #[arg(long)]
    tokens: Option<usize>,
}

async fn open(workspace: &Path, store: Option<&str>) -> Result<Arc<CodeIntel>, CliError> {
    Ok(CodeIntel::for_command(workspace, store).await?)
}

/// Updates files, then vectors, printing progress on stderr when it takes a while.
async fn bring_up_to_date(
    intel: &CodeIntel,
    quiet: bool,
) -> Result<(baton_index::UpdateReport, baton_index::EmbedReport), CliError> {
    let started = Instant::now();
    let progress = |done: usize, total: usize| {
        if !quiet && total > 0 && (done == 0 || done == total || started.elapsed().as_secs() >= 1) {
            eprint!("\rbaton: embedding chunks {done}/{total}");
            if done == total {
                eprintln!();
            }
        }
    };
    Ok(intel.bring_up_to_date(&progress).await?)
}

pub async fn index(workspace: &Path, store: Option<&str>, args: IndexArgs) -> CliResult {
    let workspace = workspace_dir(workspace)?;
    if args.rebuild {
        baton::code::delete_index(&workspace)?;
    }
    let started = Instant::now();
    let intel = open(&workspace, store).await?;
    if let baton_index::Opened::Rebuilt(why) = intel.index().opened() {
        eprintln!("baton: rebuilding the code index: {why}");
    }
    let (update, embed) = bring_up_to_date(&intel, args.json).await?;
    let model = intel.embeddings().map(|e| e.metered.model_id());
    let stats = intel
        .index()
        .stats(model.as_deref())
        .await
        .map_err(|e| anyhow!("{e}"))?;
    let summary = baton_printer::code::IndexSummary {
        stats: &stats,
        update: &update,
        embed: &embed,
        embedder: intel
            .embeddings()
            .map(|e| e.description.as_str())
            .zip(model.as_deref()),
        seconds: started.elapsed().as_secs_f64(),
    };
    if args.json {
        println!("{}", summary.json());
    } else {
        print!("{}", summary.text());
    }
    Ok(exit::FINISHED)
}

pub async fn search(workspace: &Path, store: Option<&str>, args: SearchArgs) -> CliResult {
    let workspace = workspace_dir(workspace)?;
    if args.query.trim().is_empty() {
        return Err(CliError::usage(anyhow!(
            "the query is empty: say what to find"
        )));
    }
    let intel = open(&workspace, store).await?;
    let mode = match args.mode {
        Mode::Hybrid => SearchMode::Hybrid,
        Mode::Keyword => SearchMode::Keyword,
        Mode::Vector => SearchMode::Vector,
    };
    if mode == SearchMode::Vector && intel.embeddings().is_none() {
        return Err(CliError::usage(anyhow!(
            "{}",
            baton_index::IndexError::NoEmbedder
        )));
    }
    bring_up_to_date(&intel, args.json).await?;
    let request = SearchRequest {
        query: &args.query,
        k: args.k.clamp(1, baton_index::MAX_K),
        mode,
        path_prefix: args.path.as_deref(),
    };
    let metered = intel.embeddings().map(|e| e.metered.as_ref());
    let results = match intel.index().search(&request, metered).await {
        Ok(results) => results,
        Err(baton_index::IndexError::EmptyQuery) => {
            return Err(CliError::usage(anyhow!(
                "the query has no words to search for: use letters or digits"
            )));
        }
        Err(e) => return Err(CliError::from(anyhow!("search failed: {e}"))),
    };
    for note in &results.notes {
        eprintln!("baton: {note}");
    }
    let mut out = std::io::stdout().lock();
    for hit in &results.hits {
        if args.json {
            let _ = writeln!(out, "{}", serde_json::to_string(hit).unwrap_or_default());
        } else {
            let _ = write!(out, "{}", baton_printer::code::hit_text(hit));
        }
    }
    if results.hits.is_empty() && !args.json {
        eprintln!("baton: no code matches \"{}\"", args.query);
    }
    Ok(exit::FINISHED)
}

pub async fn map(workspace: &Path, store: Option<&str>, args: MapArgs) -> CliResult {
    let workspace = workspace_dir(workspace)?;
    let layer = baton::settings::file_and_env_layers(&workspace)?;
    let tokens = args
        .tokens
        .or_else(|| {
            layer
                .repo_map
                .as_ref()
                .and_then(|m| m.tokens)
                .map(|t| t as usize)
        })
        .unwrap_or(DEFAULT_MAP_TOKENS);
    if tokens == 0 {
        return Err(CliError::usage(anyhow!("--tokens must be at least 1")));
    }
    let intel = open(&workspace, store).await?;
    intel
        .index()
        .update()
        .await
        .map_err(|e| anyhow!("indexing {}: {e}", workspace.display()))?;
    let prefix = args
        .path
        .as_deref()
        .map(|p| p.trim_start_matches("./").trim_end_matches('/'))
        .filter(|p| !p.is_empty() && *p != ".");
    let map = intel
        .index()
        .map(
            &MapRequest {
                focus: "",
                path_prefix: prefix,
                max_tokens: tokens,
            },
            &count_tokens,
        )
        .await
        .map_err(|e| anyhow!("{e}"))?;
    if map.is_empty() {
        eprintln!(
            "baton: no definitions{} fit {tokens} tokens",
            prefix.map(|p| format!(" under {p}")).unwrap_or_default()
        );
    }
    print!("{map}");
    Ok(exit::FINISHED)
}
