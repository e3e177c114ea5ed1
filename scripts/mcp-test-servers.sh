#!/usr/bin/env bash
# Installs the MCP servers the tests run against — the reference servers from the npm registry,
# which no one on this team wrote, and the official Python SDK (`mcp` on PyPI) for the failure
# server in crates/baton-mcp/tests/servers/failures.py — at pinned versions, into
# $BATON_TEST_MCP_SERVERS or ${XDG_CACHE_HOME:-$HOME/.cache}/baton-mcp-test-servers (cached:
# nothing is fetched when the pinned versions are there). Prints the directory. Idempotent.
#
# Outside the checkout on purpose: the tests run servers in baton's sandbox, which replaces /tmp
# with a private directory, so servers inside a checkout under /tmp (a CI clone) would be
# invisible to them. The tests find the servers with baton_mcp::testing::servers_dir(); they
# fail (not skip) when they are missing, naming this script.
set -euo pipefail
cd "$(dirname "$0")/.."

dir="${BATON_TEST_MCP_SERVERS:-${XDG_CACHE_HOME:-$HOME/.cache}/baton-mcp-test-servers}"
packages=(
    "@modelcontextprotocol/server-everything@2026.8.31"
    "@modelcontextprotocol/server-filesystem@2026.8.31"
)
python_sdk="mcp==2.3.0"
stamp="$dir/.installed"
want="${packages[*]} $python_sdk"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "$dir"
    exit 0
fi
command -v npm >/dev/null 2>&1 || {
    echo "error: npm is needed to install the MCP test servers (Node.js 18 or later)" >&2
    exit 1
}
mkdir -p "$dir"
echo "== installing MCP test servers into $dir: $want" >&2
npm install --prefix "$dir" --no-audit --no-fund --silent "${packages[@]}" >&2
rm -rf "$dir/python-venv"
python3 -m venv "$dir/python-venv"
"$dir/python-venv/bin/pip" install --quiet --disable-pip-version-check "$python_sdk" >&2
echo "$want" > "$stamp"
echo "$dir"
