#!/usr/bin/env bash
# The ten slowest tests of the suite (the unit tests of every crate, `tests/it` and
# `tests/timing`), each timed by libtest as the suite runs them (in parallel, as
# `cargo test` does), written to tests/SLOWEST.md with the date, machine and commit.
# Not part of the test command: run it by hand on a quiet machine when the suite's
# shape changes, and commit the table. libtest's `--report-time` is unstable; the test
# binaries take it at run time under RUSTC_BOOTSTRAP=1, and nothing is compiled so.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=tests/SLOWEST.md
TIMES=$(mktemp)
trap 'rm -f "$TIMES"' EXIT
# The test binaries as cargo builds them, by their JSON artifacts.
mapfile -t BINS < <(cargo test --locked --workspace --lib --test it --test timing --no-run \
    --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["name"]+" "+m["executable"])')
for entry in "${BINS[@]}"; do
    name=${entry%% *}
    bin=${entry#* }
    echo "== $name" >&2
    # `test NAME ... ok <1.234s>`: the name and the seconds, whatever the outcome.
    RUSTC_BOOTSTRAP=1 "$bin" -Z unstable-options --report-time 2>/dev/null |
        sed -nE "s/^test ([^ ]+) \.\.\. [a-zA-Z]+ <([0-9.]+)s>$/\2 $name::\1/p" >>"$TIMES" || true
done
{
    echo "# The ten slowest tests"
    echo
    echo "Written by \`scripts/slowest_tests.sh\` on $(date -u +%Y-%m-%d), commit"
    echo "$(git rev-parse --short HEAD), $(nproc) cores, $(uname -m); each as libtest timed it"
    echo "while the suite ran its tests in parallel. $(wc -l <"$TIMES") tests timed."
    echo
    echo "| seconds | test |"
    echo "|---:|---|"
    sort -rn "$TIMES" | head -10 | awk '{printf "| %.1f | `%s` |\n", $1, $2}'
} >"$OUT"
cat "$OUT"
