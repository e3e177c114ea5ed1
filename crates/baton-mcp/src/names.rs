//! The names MCP tools get in a run: `mcp__SERVER__TOOL`, within the providers' rule for tool
//! names — OpenAI's function names and Anthropic's tool names both allow only
//! `^[a-zA-Z0-9_-]{1,64}$` — and deterministic, so that a resumed run finds the names it
//! journaled.

/// The longest tool name the providers accept.
pub const MAX_NAME: usize = 64;

/// `mcp__SERVER__TOOL`, with every character outside `[a-zA-Z0-9_-]` replaced by `_`; a name
/// longer than 64 characters keeps its first 55 and ends with `_` and 8 hex digits of a hash of
/// the whole name, so that two long names stay distinct.
pub fn tool_name(server: &str, tool: &str) -> String {
    let raw = format!("mcp__{server}__{tool}");
    let clean: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.len() <= MAX_NAME {
        return clean;
    }
    let keep = MAX_NAME - 9;
    format!("{}_{:08x}", &clean[..keep], fnv1a(&raw) as u32)
}

/// FNV-1a, 64 bits: stable across processes and builds, unlike std's hasher.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        (1..=MAX_NAME).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn plain_names_are_kept() {
        assert_eq!(
            tool_name("github", "search_issues"),
            "mcp__github__search_issues"
        );
        assert_eq!(
            tool_name("everything", "get-sum"),
            "mcp__everything__get-sum"
        );
    }

    #[test]
    fn other_characters_become_underscores() {
        assert_eq!(tool_name("fs", "read.file"), "mcp__fs__read_file");
        assert_eq!(tool_name("fs", "lire fichier é"), "mcp__fs__lire_fichier__");
    }

    #[test]
    fn long_names_are_cut_with_a_hash_and_stay_distinct() {
        let a = tool_name("server", &"a".repeat(80));
        let b = tool_name("server", &format!("{}b", "a".repeat(79)));
        assert!(valid(&a) && valid(&b), "{a} {b}");
        assert_eq!(a.len(), MAX_NAME);
        assert_ne!(a, b);
        assert_eq!(a, tool_name("server", &"a".repeat(80)));
    }

    #[test]
    fn every_name_is_valid() {
        for (server, tool) in [
            ("s", ""),
            ("s", "🙂"),
            ("x", &"é".repeat(60)),
            ("srv", "a/b:c"),
        ] {
            let name = tool_name(server, tool);
            assert!(valid(&name), "{name}");
        }
    }
}
