#!/usr/bin/env bash
# What each protocol driver costs the generator per operation, beside what the operation
# costs the server (issue 13). The embedded server runs in a process of its own (memory
# store), watched by PID; each driver's class of the Cosmo mix runs alone
# (cosmo-0.7-saturate.yaml: keep-alive, no think time) with `--workers 1`, RUNS times.
# Generator CPU is the loadmix process's user + system time from getrusage (start-up, set-up
# and report included) over the operations it counted; the server's is its CPU per
# successful operation from the report. Prints, per driver, the median (min-max) of both
# and their ratio.
# Usage: [LM=path/to/loadmix] [SERVER_LM=path] bench/drivers.sh [SECONDS=10] [RUNS=3]
# SERVER_LM runs the server from another build than the generator: a change to what both
# sides share (the XML writer) moves the server's cost too, so a before and after of the
# generator holds the server's build fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-10}
RUNS=${2:-3}
# LM=PATH measures another build (an earlier commit's, for a before and after).
if [ -z "${LM:-}" ]; then
    cargo build --release --locked -q
    LM=target/release/loadmix
fi
WORK=$(mktemp -d)
SERVE=
cleanup() { [ -n "$SERVE" ] && kill "$SERVE" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${SERVER_LM:-$LM}" serve --bind "127.0.0.1:$PORT" >"$WORK/serve.log" 2>&1 &
SERVE=$!
for _ in $(seq 1 100); do curl -sf -o /dev/null "http://127.0.0.1:$PORT/cosmo/_loadmix/metrics" && break; sleep 0.1; done
echo "machine: $(nproc) cores; $(date -u +%Y-%m-%dT%H:%MZ); ${SECS}s x $RUNS per driver"
for driver in ${DRIVERS:-morse atom caldav}; do
    case $driver in
        morse) users="morse=10,atom=0,caldav=0" ;;
        atom) users="morse=0,atom=10,caldav=0" ;;
        caldav) users="morse=0,atom=0,caldav=10" ;;
    esac
    : >"$WORK/$driver.rows"
    for k in $(seq 1 "$RUNS"); do
        rm -rf "$WORK/out"
        python3 bench/measure.py "$WORK/lm.out" -- "$LM" run workloads/cosmo-0.7-saturate.yaml \
            --target "http://127.0.0.1:$PORT/cosmo" --users "$users" --duration "${SECS}s" \
            --rounds 1 --set run.warmup=0s --workers 1 --monitor-process "$SERVE" \
            --quiet --out "$WORK/out" >"$WORK/lm.m"
        python3 - "$WORK/out/run.json" "$WORK/lm.m" >>"$WORK/$driver.rows" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["summary"]["total"]
if t["failures"]:
    sys.exit(f"{t['failures']} failures: {r['failures'][:2]}")
cpu = json.loads(open(sys.argv[2]).read().splitlines()[-1])["cpu"]
server = r["summary"]["server"][0]["cpu_ms_per_op"] * 1000
print(t["ops_per_sec"], cpu / t["requests"] * 1e6, server)
PY
    done
    python3 - "$WORK/$driver.rows" "$driver" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
f = lambda v: f"{statistics.median(v):7.1f} ({min(v):.1f}-{max(v):.1f})"
gen, srv = [r[1] for r in rows], [r[2] for r in rows]
ratio = [g / s for g, s in zip(gen, srv)]
print(f"{sys.argv[2]:7s} ops/s {f([r[0] for r in rows])} | generator µs/op {f(gen)} | server µs/op {f(srv)} | generator/server {statistics.median(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f})")
PY
done
