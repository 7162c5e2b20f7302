#!/usr/bin/env bash
# The request path at full speed, loadmix against wrk at equal threads (issue 13):
# nginx (1 worker, no access log) serves a 196-byte file; 64 keep-alive connections;
# `wrk -tN` against `loadmix run --workers N` for N = 1 and 2. Each pair runs RUNS times,
# the tools alternating which goes first, and the script prints each run and then, per N,
# the median ratio (loadmix / wrk) of the request rate and of the CPU time per request
# (user + system from getrusage, the whole process), with the min and max over runs.
# Installs wrk and nginx (Debian) if missing.
# Usage: bench/rate.sh [SECONDS=8] [RUNS=3]   (LOADMIX_ARGS adds flags to loadmix's run)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-8}
RUNS=${2:-3}
command -v wrk >/dev/null && command -v nginx >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk nginx >/dev/null; }
cargo build --release --locked -q
LM=target/release/loadmix
WORK=$(mktemp -d)
NGINX=
cleanup() { [ -n "$NGINX" ] && kill "$NGINX" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
mkdir -p "$WORK/www"
head -c 196 /dev/zero | tr '\0' 'x' >"$WORK/www/index.html"
chmod 755 "$WORK" "$WORK/www"
chmod 644 "$WORK/www/index.html"
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx.err;
events { worker_connections 1024; }
http { access_log off; server { listen 127.0.0.1:$PORT; root $WORK/www; } }
CONF
nginx -c "$WORK/nginx.conf" &
NGINX=$!
for _ in $(seq 1 50); do curl -sf "http://127.0.0.1:$PORT/index.html" >/dev/null && break; sleep 0.1; done
URL="http://127.0.0.1:$PORT/index.html"
cat >"$WORK/get.yaml" <<YAML
name: trivial-get
target: http://127.0.0.1:$PORT
context: ""
run: { duration: ${SECS}s, timeout: 10s }
connection: keep_alive
users:
  - class: c
    protocol: http
    count: 64
    mix:
      get: { weight: 1, path: /index.html, expect: 200 }
YAML
M="python3 bench/measure.py"
# One tool's run: "rate cpu_us_per_request".
run_wrk() {
    $M "$WORK/wrk.out" -- wrk -t"$1" -c64 -d"${SECS}s" --timeout 10s "$URL" >"$WORK/wrk.m"
    if grep -q "Non-2xx\|Socket errors" "$WORK/wrk.out"; then cat "$WORK/wrk.out" >&2; exit 1; fi
    python3 - "$WORK/wrk.out" "$WORK/wrk.m" <<'PY'
import json, re, sys
out = open(sys.argv[1]).read()
rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
reqs = int(re.search(r"(\d+) requests in", out).group(1))
cpu = json.loads(open(sys.argv[2]).read().splitlines()[-1])["cpu"]
print(rate, cpu / reqs * 1e6)
PY
}
run_lm() {
    rm -rf "$WORK/lm"
    # shellcheck disable=SC2086
    $M "$WORK/lm.out" -- "$LM" run "$WORK/get.yaml" --workers "$1" --quiet --out "$WORK/lm" ${LOADMIX_ARGS:-} >"$WORK/lm.m"
    python3 - "$WORK/lm/run.json" "$WORK/lm.m" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["summary"]["total"]
if t["failures"]:
    sys.exit(f"loadmix saw {t['failures']} failures")
cpu = json.loads(open(sys.argv[2]).read().splitlines()[-1])["cpu"]
# Every request sent, over the whole process's CPU (start-up and report included).
print(t["ops_per_sec"], cpu / t["requests"] * 1e6)
PY
}
echo "machine: $(nproc) cores, $(uname -r); $(date -u +%Y-%m-%dT%H:%MZ)"
for N in 1 2; do
    : >"$WORK/ratios-$N"
    for k in $(seq 1 "$RUNS"); do
        if [ $((k % 2)) = 1 ]; then
            W=$(run_wrk "$N"); L=$(run_lm "$N")
        else
            L=$(run_lm "$N"); W=$(run_wrk "$N")
        fi
        # shellcheck disable=SC2086
        printf "threads %s run %s: wrk %.0f req/s %.1f µs/req | loadmix %.0f req/s %.1f µs/req\n" "$N" "$k" $W $L
        echo "$W $L" >>"$WORK/ratios-$N"
    done
    python3 - "$WORK/ratios-$N" "$N" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
rate = [l[2] / l[0] for l in rows]
cpu = [l[3] / l[1] for l in rows]
f = lambda v: f"{statistics.median(v):.2f}× ({min(v):.2f}–{max(v):.2f})"
print(f"threads {sys.argv[2]}: loadmix/wrk request rate {f(rate)}; CPU per request {f(cpu)}  [median (min–max) of {len(rows)}]")
PY
done
