#!/usr/bin/env bash
# The report's generator CPU per operation by class, held against each class run alone
# (issue 54, item 3). The embedded server runs in a process of its own; the Cosmo mix's
# three classes run together (cosmo-0.7-saturate.yaml: keep-alive, no think time, with
# USERS of each), then each class alone with the same users, alternated, RUNS times.
# Alone, a class's figure is the whole generator's CPU per operation; together, its share.
# Prints per class the median (min-max) of both and their ratio (1.00: the share is what
# the class costs alone), and the classes' polls' wall time against the generator's CPU
# (under 100 %: the runtime's own work between polls; over: polls the kernel interrupted
# to run another thread, the server's on a crowded host).
# Usage: [LOADMIX_BIN=path/to/loadmix] bench/class-cpu.sh [SECONDS=10] [RUNS=3] [USERS=morse=4,atom=3,caldav=3]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-10}
RUNS=${2:-3}
USERS=${3:-morse=4,atom=3,caldav=3}
# LOADMIX_BIN=PATH measures another build.
# shellcheck source=bench/lib/serve.sh
. bench/lib/serve.sh
PORT=$(free_port)
# Accounts made through CMP, as the Cosmo clients make them: no --no-auth.
"$BIN" serve --bind "127.0.0.1:$PORT" >"$WORK/serve.log" 2>&1 &
PIDS+=($!)
wait_port "$PORT" "loadmix serve" "$WORK/serve.log"
echo "machine: $(nproc) cores; $(date -u +%Y-%m-%dT%H:%MZ); ${SECS}s x $RUNS; $USERS"
# One run: `--users U`, its classes' figures appended to ROWS as `MODE CLASS US_PER_OP`.
one() {
    local mode=$1 users=$2
    rm -rf "$WORK/out"
    "$BIN" run workloads/cosmo-0.7-saturate.yaml --target "http://127.0.0.1:$PORT/cosmo" \
        --users "$users" --duration "${SECS}s" --rounds 1 --set run.warmup=0s --workers 1 \
        --quiet --out "$WORK/out" >/dev/null
    python3 - "$WORK/out/run.json" "$mode" >>"$WORK/rows" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
if r["summary"]["total"]["failures"]:
    sys.exit(f"failures: {r['failures'][:2]}")
g = r["rounds"][0]["generator"]
own = sum(c["busy_s"] for c in g["class_cpu"]) / g["cpu_s"] * 100
for c in g["class_cpu"]:
    print(sys.argv[2], c["class"], c["cpu_ms_per_op"] * 1000, own)
PY
}
: >"$WORK/rows"
IFS=, read -r -a each <<<"$USERS"
for _ in $(seq 1 "$RUNS"); do
    one together "$USERS"
    for u in "${each[@]}"; do
        # The others at 0 users: this class alone, with its users of the mix.
        alone=$(printf '%s\n' "${each[@]}" | sed "s/=.*/=0/" | sed "s/^${u%%=*}=0$/$u/" | paste -sd,)
        one alone "$alone"
    done
done
python3 - "$WORK/rows" <<'PY'
import collections, statistics, sys
v = collections.defaultdict(list)
own = collections.defaultdict(list)
for line in open(sys.argv[1]):
    mode, cls, us, pct = line.split()
    v[(cls, mode)].append(float(us))
    own[(cls, mode)].append(float(pct))
f = lambda x: f"{statistics.median(x):6.1f} ({min(x):.1f}-{max(x):.1f})"
for cls in dict.fromkeys(c for c, _ in v):
    t, a = v[(cls, "together")], v[(cls, "alone")]
    print(f"{cls:7s} µs/op together {f(t)} | alone {f(a)} | together/alone {statistics.median(t) / statistics.median(a):.2f} | polls' time / CPU: together {statistics.median(own[(cls, 'together')]):.0f}%, alone {statistics.median(own[(cls, 'alone')]):.0f}%")
PY
