#!/usr/bin/env bash
# What reading large reports costs: two shards of a short run, each round's per-second
# series stretched to SECONDS entries (the longest a round may be is 31 days, 2.68 M), then
# the peak resident memory of `merge`, of `report` on one shard and of `compare` of the
# two, beside the files' sizes.
# Usage: bench/report-memory.sh [SECONDS=2000000]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2000000}
# shellcheck source=bench/lib/serve.sh
. bench/lib/serve.sh
for i in 0 1; do
    "$BIN" run workloads/cosmo-0.7.yaml --shard "$i/2" --duration 2s --rounds 1 --seed 7 \
        --out "$WORK/s$i" >/dev/null 2>&1
    python3 - "$WORK/s$i/run.json" "$N" <<'PY'
import json, sys
path, n = sys.argv[1], int(sys.argv[2])
r = json.load(open(path))
for round_ in r["rounds"]:
    round_["elapsed_s"] = float(n - 2)
    round_["per_second"] = [{"in_flight": 0.5, "users": 15}] * n
with open(path, "w") as f:
    json.dump(r, f)
PY
done
peak() { /usr/bin/time -f "%M" "$@" 2>&1 >/dev/null | tail -1; }
size=$(stat -c %s "$WORK/s0/run.json")
echo "shard file: $((size / 1048576)) MiB, $N per-second entries"
echo "merge:   $(($(peak "$BIN" merge "$WORK/s0/run.json" "$WORK/s1/run.json" --out "$WORK/m") / 1024)) MiB peak"
echo "report:  $(($(peak "$BIN" report "$WORK/s0/run.json") / 1024)) MiB peak"
echo "report --html: $(($(peak "$BIN" report "$WORK/s0/run.json" --html "$WORK/r.html") / 1024)) MiB peak, page $(($(stat -c %s "$WORK/r.html") / 1024)) KiB"
echo "compare: $(($(peak "$BIN" compare "$WORK/s0/run.json" "$WORK/s1/run.json") / 1024)) MiB peak"
