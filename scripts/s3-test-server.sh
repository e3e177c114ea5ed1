#!/usr/bin/env bash
# Installs the S3-compatible server the artifact tests run against on 127.0.0.1: moto's server
# (`moto[server]` from PyPI, by package name) in a venv cached in $BATON_S3_CACHE (default
# ~/.cache/baton-s3). Idempotent: does nothing when it is installed already. Prints the path of
# the server executable; `crates/baton-cli/tests/workers_s3.rs` starts it itself on a free port
# (`moto_server -H 127.0.0.1 -p PORT`) and fails, naming this script, when it is missing.
set -euo pipefail

cache=${BATON_S3_CACHE:-$HOME/.cache/baton-s3}
venv=$cache/venv
moto_version=5.2.5
marker=$venv/.baton-moto-$moto_version

if [ ! -e "$marker" ] || [ ! -x "$venv/bin/moto_server" ]; then
  printf '== installing moto[server]==%s into %s\n' "$moto_version" "$venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet "moto[server]==$moto_version"
  touch "$marker"
fi
echo "$venv/bin/moto_server"
