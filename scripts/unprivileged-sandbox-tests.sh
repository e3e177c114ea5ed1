#!/usr/bin/env bash
# The sandbox's red-team, isolation and fork-bomb suites (both backends each) as an unprivileged
# user, so that what holds for root holds without root's powers too (a user namespace under
# bubblewrap, no pids cgroup, RLIMIT_NPROC). Run as root, it creates the user `baton-ci`
# (`useradd`) and runs the already built test binaries as that user; run as anyone else, the
# main suite already ran unprivileged and this does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "== not root: the sandbox suites already ran as an unprivileged user"
    exit 0
fi
user=baton-ci
id "$user" >/dev/null 2>&1 || useradd --create-home "$user"
home=$(getent passwd "$user" | cut -d: -f6)

# The binaries of the three suites, built by `cargo test` before.
mapfile -t binaries < <(
    cargo test -p baton-sandbox --no-run --message-format=json 2>/dev/null \
        | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    t = m.get("target", {})
    if m.get("reason") == "compiler-artifact" and m.get("executable") and t.get("kind") == ["test"]:
        print(m["executable"])
'
)
[ "${#binaries[@]}" -ge 3 ] || { echo "expected the sandbox test binaries, got: ${binaries[*]}" >&2; exit 1; }

# The user must reach the binaries and the trampoline, and make temporary directories where the
# tests make them (target/tmp, as /tmp does: sticky and writable by all).
dir=$PWD
while [ "$dir" != / ]; do
    chmod o+x "$dir"
    dir=$(dirname "$dir")
done
target=${CARGO_TARGET_DIR:-$PWD/target}
mkdir -p "$target/tmp"
chmod 1777 "$target/tmp"
chmod -R o+rX "$target/debug/deps" "$target/debug/baton-sandbox-exec"

for binary in "${binaries[@]}"; do
    echo "== as $user: $(basename "$binary")"
    runuser -u "$user" -- env -i PATH="$PATH" HOME="$home" LANG=C.UTF-8 "$binary"
done
