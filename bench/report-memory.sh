#!/usr/bin/env bash
# What reading large reports costs: two shards of a short run, each round's per-second
# series stretched to SECONDS entries (the longest a round may be is 31 days, 2.68 M), then
# the peak resident memory of `merge`, of `report` on one shard and of `compare` of the
# two, beside the files' sizes. FORM `full` fills every second as a busy run does (its
# percentiles, every error class, all 22 latency bands); `plain` only users and in flight.
# Usage: bench/report-memory.sh [SECONDS=2000000] [FORM=plain]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2000000}
FORM=${2:-plain}
# shellcheck source=bench/lib/serve.sh
. bench/lib/serve.sh
for i in 0 1; do
    "$BIN" run workloads/cosmo-0.7.yaml --shard "$i/2" --duration 2s --rounds 1 --seed 7 \
        --out "$WORK/s$i" >/dev/null 2>&1
    python3 - "$WORK/s$i/run.json" "$N" "$FORM" <<'PY'
import json, sys
path, n, form = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = json.load(open(path))
second = {"in_flight": 0.5, "users": 15}
if form == "full":
    names = ["connect", "timeout", "reset", "status", "body"]
    second.update({"p50_ms": 1.5, "p99_ms": 20.0, "errors": {k: 1 for k in names},
                   "latency_heat": [1] * 22})
for round_ in r["rounds"]:
    round_["elapsed_s"] = float(n - 2)
    round_["per_second"] = [second] * n
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
