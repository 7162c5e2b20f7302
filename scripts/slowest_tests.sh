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
trap 'rm -f "$TIMES" "$TIMES.out"' EXIT
# A build that fails stops the script (its errors on stderr), rather than leaving a table
# of nothing; then the test binaries as cargo built them, by their JSON artifacts.
cargo test --locked --workspace --lib --test it --test timing --no-run
mapfile -t BINS < <(cargo test --locked --workspace --lib --test it --test timing --no-run \
    --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["target"]["name"]+" "+m["executable"])')
if [ "${#BINS[@]}" -eq 0 ]; then
    echo "slowest_tests: cargo named no test binaries" >&2
    exit 1
fi
FAILED=0
for entry in "${BINS[@]}"; do
    name=${entry%% *}
    bin=${entry#* }
    echo "== $name" >&2
    # `test NAME ... ok <1.234s>`: the name and the seconds, whatever the outcome; a
    # binary with a failing test still gives its times, and the table says it failed.
    if ! RUSTC_BOOTSTRAP=1 "$bin" -Z unstable-options --report-time >"$TIMES.out" 2>&1; then
        FAILED=$((FAILED + 1))
        echo "slowest_tests: $name had failing tests (its times are kept)" >&2
    fi
    sed -nE "s/^test ([^ ]+) \.\.\. [a-zA-Z]+ <([0-9.]+)s>$/\2 $name::\1/p" "$TIMES.out" >>"$TIMES"
done
rm -f "$TIMES.out"
{
    echo "# The ten slowest tests"
    echo
    echo "Written by \`scripts/slowest_tests.sh\` on $(date -u +%Y-%m-%d), commit"
    echo "$(git rev-parse --short HEAD), $(nproc) cores, $(uname -m); each as libtest timed it"
    echo "while the suite ran its tests in parallel. $(wc -l <"$TIMES") tests timed;"
    echo "$FAILED test binaries had a failing test."
    echo
    echo "| seconds | test |"
    echo "|---:|---|"
    sort -rn "$TIMES" | head -10 | awk '{printf "| %.1f | `%s` |\n", $1, $2}'
} >"$OUT"
cat "$OUT"
