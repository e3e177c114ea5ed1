#!/usr/bin/env bash
# baton's harness overhead side by side with LangGraph's SQLite checkpointer (issue 20), in one
# run on one machine: installs the peer benchmark's pinned requirements into a virtualenv under
# target/ (from PyPI, once), then runs `cargo bench -p baton-engine --bench overhead`, which
# measures baton at 100, 1,000 and 10,000 turns, runs LangGraph's bench.py at 100 and 1,000
# turns (its stock checkpointer grows as N²: 10,000 turns would need ~120 GiB), and prints both
# with the issue's targets and the ratios.
#
#   benches/overhead-vs-langgraph.sh [TURNS...]
#
# LANGGRAPH_BENCH   the peer benchmark's directory (default: ../shared/peers/langgraph_bench)
# BATON_LANGGRAPH_REPS, BATON_LANGGRAPH_MAX_TURNS, BATON_OVERHEAD_STORES: see the bench's doc.
set -euo pipefail
cd "$(dirname "$0")/.."

peer="${LANGGRAPH_BENCH:-../shared/peers/langgraph_bench}"
if [ ! -f "$peer/bench.py" ] || [ ! -f "$peer/requirements.lock.txt" ]; then
    echo "error: no LangGraph benchmark at $peer (set LANGGRAPH_BENCH to its directory)" >&2
    exit 2
fi
peer="$(cd "$peer" && pwd)"

venv=target/langgraph-venv
lock_copy="$venv/requirements.lock.txt"
if ! cmp -s "$peer/requirements.lock.txt" "$lock_copy"; then
    echo "== installing LangGraph's pinned requirements into $venv" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$peer/requirements.lock.txt"
    cp "$peer/requirements.lock.txt" "$lock_copy"
fi

BATON_LANGGRAPH_PYTHON="$(pwd)/$venv/bin/python" BATON_LANGGRAPH_BENCH="$peer" \
    cargo bench -p baton-engine --bench overhead -- "$@"
