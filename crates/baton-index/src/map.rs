//! The repo map: the workspace's most important definitions, rendered to a token budget.
//!
//! Files are nodes of a graph; file A has an edge to file B for each identifier A uses that B
//! defines, weighted by how often A uses it (square root, so a name used 100 times is not 100×
//! an import) and by how telling the name is: long compound names (`resolve_redirects`) count
//! ten times, `_private` ones a tenth, and a name defined in many files (`new`, `get`) a tenth;
//! a use of a name defined in several files is shared among them.
//! PageRank over that graph, personalised towards the files a task's text names (by path, by
//! file name, or by defining an identifier the text mentions), ranks the files; a file's rank
//! flows along its edges to the definitions it uses. The best-ranked definitions are listed by
//! file, as many as fit the budget (found by bisection on how many).
//!
//! Pure: no IO. Deterministic: every map and sort iterates in a defined order, so the same
//! inputs give byte-identical text.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::lang::DefKind;

/// The default budget of a map, in tokens.
pub const DEFAULT_MAP_TOKENS: usize = 1_000;

const DAMPING: f64 = 0.85;
const ITERATIONS: usize = 100;
const CONVERGED: f64 = 1e-12;
/// A name defined in more files than this is generic.
const GENERIC_NAME_FILES: usize = 3;

/// A definition as the map needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapDef {
    pub name: String,
    pub kind: DefKind,
    pub line: u32,
    pub signature: String,
    /// Nesting depth (0 at the top of the file), for indentation.
    pub depth: u32,
}

/// One file's part of the graph.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapFile {
    pub defs: Vec<MapDef>,
    /// Identifiers the file uses, with their counts.
    pub refs: BTreeMap<String, u32>,
}

/// What a map is for.
#[derive(Clone, Debug, Default)]
pub struct MapRequest<'a> {
    /// Text the map is personalised towards (a task's brief and the run's goal).
    pub focus: &'a str,
    /// Only files under this path prefix are listed (all files still shape the ranking).
    pub path_prefix: Option<&'a str>,
    pub max_tokens: usize,
}

/// Renders the map of `files` (by workspace-relative path). `count_tokens` measures text as the
/// model's tokenizer would. An empty string when nothing fits or there is nothing to show.
pub fn render(
    files: &BTreeMap<String, MapFile>,
    request: &MapRequest<'_>,
    count_tokens: &(dyn Fn(&str) -> usize + Sync),
) -> String {
    let ranked = rank_definitions(files, request.focus);
    let ranked: Vec<&(String, usize, f64)> = ranked
        .iter()
        .filter(|(path, _, _)| request.path_prefix.is_none_or(|p| path.starts_with(p)))
        .collect();
    // Bisect the number of definitions shown: the largest whose rendering fits.
    let (mut lo, mut hi) = (0usize, ranked.len());
    let mut best = String::new();
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        let text = render_top(files, &ranked[..mid]);
        if count_tokens(&text) <= request.max_tokens {
            lo = mid;
            best = text;
        } else {
            hi = mid - 1;
        }
    }
    best
}

fn render_top(files: &BTreeMap<String, MapFile>, top: &[&(String, usize, f64)]) -> String {
    let mut by_file: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
    for (path, def, _) in top {
        by_file.entry(path.as_str()).or_default().insert(*def);
    }
    let mut out = String::new();
    for (path, defs) in by_file {
        out.push_str(path);
        out.push_str(":\n");
        let Some(file) = files.get(path) else {
            continue;
        };
        for &i in &defs {
            let def = &file.defs[i];
            let indent = "  ".repeat(def.depth as usize);
            out.push_str(&format!("{:>5}│ {indent}{}\n", def.line, def.signature));
        }
    }
    out
}

/// Every definition as (path, index in its file's defs, rank), best first; ties by path, then
/// position.
pub fn rank_definitions(
    files: &BTreeMap<String, MapFile>,
    focus: &str,
) -> Vec<(String, usize, f64)> {
    let paths: Vec<&str> = files.keys().map(String::as_str).collect();
    let index: HashMap<&str, usize> = paths.iter().enumerate().map(|(i, p)| (*p, i)).collect();
    // name → files defining it (sorted, deduplicated).
    let mut definers: BTreeMap<&str, BTreeSet<usize>> = BTreeMap::new();
    for (path, file) in files {
        for def in &file.defs {
            definers
                .entry(def.name.as_str())
                .or_default()
                .insert(index[path.as_str()]);
        }
    }
    let mentioned = mentioned_words(focus);
    // Edges: (from, to, name, weight), in path and name order.
    let mut edges: Vec<(usize, usize, &str, f64)> = Vec::new();
    for (from, file) in files.values().enumerate() {
        for (name, &count) in &file.refs {
            let Some(defined_in) = definers.get(name.as_str()) else {
                continue;
            };
            // A use refers to one of the definitions of its name: their shares add up to one.
            let weight = name_weight(name, defined_in.len(), &mentioned) * f64::from(count).sqrt()
                / defined_in.len() as f64;
            for &to in defined_in {
                if to != from {
                    edges.push((from, to, name.as_str(), weight));
                }
            }
        }
    }
    let personal = personalisation(&paths, files, focus, &mentioned);
    let file_rank = pagerank(paths.len(), &edges, &personal);

    let mut out_weight = vec![0.0f64; paths.len()];
    for &(from, _, _, w) in &edges {
        out_weight[from] += w;
    }
    let mut def_rank: BTreeMap<(usize, &str), f64> = BTreeMap::new();
    for &(from, to, name, w) in &edges {
        *def_rank.entry((to, name)).or_insert(0.0) += file_rank[from] * w / out_weight[from];
    }
    let mut ranked = Vec::new();
    // The files the focus names show their own definitions, not only what they use.
    let focused = personal.iter().any(|w| *w != personal[0]);
    for (p, (path, file)) in files.iter().enumerate() {
        let own = if focused && personal[p] > 0.0 {
            0.1
        } else {
            1e-3
        };
        for (i, def) in file.defs.iter().enumerate() {
            // A definition no other file uses still ranks by its file, below used ones.
            let used = def_rank
                .get(&(p, def.name.as_str()))
                .copied()
                .unwrap_or(0.0);
            let mut rank = used + file_rank[p] * own / (1.0 + f64::from(def.depth));
            if def.name.len() >= 4 && mentioned.contains(&def.name.to_lowercase()) {
                rank *= 10.0;
            }
            ranked.push((path.clone(), i, rank));
        }
    }
    ranked.sort_by(|a, b| {
        b.2.total_cmp(&a.2)
            .then_with(|| a.0.cmp(&b.0))
            .then_with(|| a.1.cmp(&b.1))
    });
    ranked
}

fn name_weight(name: &str, files_defining: usize, mentioned: &BTreeSet<String>) -> f64 {
    let mut weight = 1.0;
    if mentioned.contains(&name.to_lowercase()) {
        weight *= 10.0;
    }
    let compound = name.contains('_') || name.chars().skip(1).any(char::is_uppercase);
    if compound && name.len() >= 8 {
        weight *= 10.0;
    }
    if name.starts_with('_') {
        weight *= 0.1;
    }
    if files_defining > GENERIC_NAME_FILES {
        weight *= 0.1;
    }
    weight
}

/// The words of `text` (identifier characters), lower-cased.
fn mentioned_words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.len() >= 3)
        .map(str::to_lowercase)
        .collect()
}

/// Teleport weights: files the focus text names (by path or file name) or that define a word
/// it mentions; uniform when it names none.
fn personalisation(
    paths: &[&str],
    files: &BTreeMap<String, MapFile>,
    focus: &str,
    mentioned: &BTreeSet<String>,
) -> Vec<f64> {
    let focus_lower = focus.to_lowercase();
    let mut weights: Vec<f64> = paths
        .iter()
        .zip(files.values())
        .map(|(path, file)| {
            let file_name = path.rsplit('/').next().unwrap_or(path).to_lowercase();
            let named = focus_lower.contains(&path.to_lowercase())
                || (file_name.len() >= 4 && focus_lower.contains(&file_name));
            let defines_mentioned = file
                .defs
                .iter()
                .any(|d| d.name.len() >= 4 && mentioned.contains(&d.name.to_lowercase()));
            match (named, defines_mentioned) {
                (true, _) => 10.0,
                (false, true) => 1.0,
                (false, false) => 0.0,
            }
        })
        .collect();
    let total: f64 = weights.iter().sum();
    if total == 0.0 {
        weights.iter_mut().for_each(|w| *w = 1.0);
    }
    let total: f64 = weights.iter().sum();
    weights
        .iter_mut()
        .for_each(|w| *w /= total.max(f64::MIN_POSITIVE));
    weights
}

/// Personalised PageRank by power iteration; dangling files' rank teleports like the rest.
fn pagerank(n: usize, edges: &[(usize, usize, &str, f64)], personal: &[f64]) -> Vec<f64> {
    if n == 0 {
        return Vec::new();
    }
    let mut out_weight = vec![0.0f64; n];
    for &(from, _, _, w) in edges {
        out_weight[from] += w;
    }
    let mut rank = personal.to_vec();
    for _ in 0..ITERATIONS {
        let dangling: f64 = (0..n)
            .filter(|&i| out_weight[i] == 0.0)
            .map(|i| rank[i])
            .sum();
        let mut next: Vec<f64> = personal
            .iter()
            .map(|p| (1.0 - DAMPING + DAMPING * dangling) * p)
            .collect();
        for &(from, to, _, w) in edges {
            next[to] += DAMPING * rank[from] * w / out_weight[from];
        }
        let change: f64 = next.iter().zip(&rank).map(|(a, b)| (a - b).abs()).sum();
        rank = next;
        if change < CONVERGED {
            break;
        }
    }
    rank
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn def(name: &str, line: u32) -> MapDef {
        MapDef {
            name: name.into(),
            kind: DefKind::Function,
            line,
            signature: format!("fn {name}()"),
            depth: 0,
        }
    }

    fn file(defs: &[(&str, u32)], refs: &[(&str, u32)]) -> MapFile {
        MapFile {
            defs: defs.iter().map(|(n, l)| def(n, *l)).collect(),
            refs: refs.iter().map(|(n, c)| ((*n).to_owned(), *c)).collect(),
        }
    }

    fn words(text: &str) -> usize {
        text.split_whitespace().count()
    }

    fn repo() -> BTreeMap<String, MapFile> {
        BTreeMap::from([
            (
                "src/main.rs".into(),
                file(&[("main", 1)], &[("parse_config", 3), ("run_server", 1)]),
            ),
            (
                "src/config.rs".into(),
                file(&[("parse_config", 4), ("Config", 1)], &[]),
            ),
            (
                "src/server.rs".into(),
                file(&[("run_server", 2)], &[("parse_config", 1)]),
            ),
            ("src/unused.rs".into(), file(&[("orphan", 1)], &[])),
        ])
    }

    #[test]
    fn used_definitions_rank_first() {
        let ranked = rank_definitions(&repo(), "");
        let first = &ranked[0];
        assert_eq!(
            (first.0.as_str(), first.1),
            ("src/config.rs", 0),
            "{ranked:?}"
        );
        let orphan = ranked.iter().position(|r| r.0 == "src/unused.rs").unwrap();
        let run_server = ranked.iter().position(|r| r.0 == "src/server.rs").unwrap();
        assert!(run_server < orphan);
    }

    #[test]
    fn focus_pulls_named_files_up() {
        let plain = rank_definitions(&repo(), "");
        let focused = rank_definitions(&repo(), "fix the orphan in src/unused.rs");
        let pos =
            |r: &[(String, usize, f64)]| r.iter().position(|x| x.0 == "src/unused.rs").unwrap();
        assert!(pos(&focused) < pos(&plain));
    }

    #[test]
    fn budget_is_respected_and_output_is_stable() {
        let request = MapRequest {
            focus: "",
            path_prefix: None,
            max_tokens: 8,
        };
        let text = render(&repo(), &request, &words);
        assert!(words(&text) <= 8, "{text}");
        assert!(text.contains("parse_config"), "{text}");
        assert_eq!(text, render(&repo(), &request, &words));
        let all = render(
            &repo(),
            &MapRequest {
                max_tokens: 10_000,
                ..request
            },
            &words,
        );
        assert_eq!(all.matches('│').count(), 5, "{all}");
        assert!(
            all.starts_with("src/config.rs:\n"),
            "files are listed by path: {all}"
        );
        let none = render(
            &repo(),
            &MapRequest {
                max_tokens: 1,
                ..MapRequest::default()
            },
            &words,
        );
        assert_eq!(none, "");
    }

    #[test]
    fn prefix_limits_the_listing() {
        let request = MapRequest {
            focus: "",
            path_prefix: Some("src/server"),
            max_tokens: 1000,
        };
        let text = render(&repo(), &request, &words);
        assert_eq!(text, "src/server.rs:\n    2│ fn run_server()\n");
    }

    #[test]
    fn empty_repo_is_empty_map() {
        assert_eq!(
            render(
                &BTreeMap::new(),
                &MapRequest {
                    max_tokens: 100,
                    ..Default::default()
                },
                &words
            ),
            ""
        );
    }
}
