//! Test support (cargo feature `test-support`, for this workspace's tests and benches): where
//! `scripts/mcp-test-servers.sh` installed the MCP servers the tests run against.
//!
//! Outside the repository on purpose — `$BATON_TEST_MCP_SERVERS`, else
//! `${XDG_CACHE_HOME:-$HOME/.cache}/baton-mcp-test-servers` — because the tests run servers in
//! baton's sandbox, which replaces `/tmp` with a private directory: a checkout under `/tmp` (a
//! CI clone) would hide servers installed inside it. A missing install fails the test, naming
//! the script.

use std::path::PathBuf;

/// The directory the servers are installed in.
pub fn servers_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("BATON_TEST_MCP_SERVERS").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    cache.join("baton-mcp-test-servers")
}

fn installed(path: PathBuf) -> PathBuf {
    assert!(
        path.exists(),
        "the MCP test servers are not installed ({} is missing): run scripts/mcp-test-servers.sh",
        path.display()
    );
    path
}

/// `server-everything`'s entry point (run with `node FILE stdio` or `node FILE streamableHttp`).
pub fn everything_js() -> String {
    installed(
        servers_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
    )
    .display()
    .to_string()
}

/// `server-filesystem`'s entry point (`node FILE DIR…`).
pub fn filesystem_js() -> String {
    installed(
        servers_dir().join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"),
    )
    .display()
    .to_string()
}

/// The Python with the official SDK (`mcp` on PyPI).
pub fn python() -> PathBuf {
    installed(servers_dir().join("python-venv/bin/python"))
}
