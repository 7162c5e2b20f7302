#!/usr/bin/env bash
# The generator against its peers on this machine, at equal thread counts (issue 13). Every
# comparison runs RUNS times with the tools taking turns to go first, and prints the median
# ratio with the min and max over the runs:
#   1. request rate and CPU per request at full speed on a static 196-byte GET from nginx
#      (1 worker, no access log), 64 keep-alive connections: `wrk -tN`, `oha
#      --worker-threads N` and `loadmix run --workers N`, for N = 1 and 2;
#   2. CPU per request at a fixed 20,000 req/s, one thread each: oha `-q 20000` against 64
#      loadmix users paced at 3.2 ms (wrk cannot hold a rate);
#   3. timing: p50 against an endpoint that answers after exactly 10 ms (a separate
#      `loadmix serve`) at 1,000 req/s, two threads each: 20 loadmix users paced at 20 ms
#      against oha `-c 20 -q 1000`; and the start lag of open-model arrivals at 1,000/s
#      against nginx, with what they cost in CPU;
# and, once each: 4. RSS per idle user at 1,000, 10,000 and 100,000 users; 5. coordinated
# omission against a server that stalls 1 s in every 10 s.
# CPU is user + system time from getrusage for the whole process (loadmix's includes its
# start-up and writing its report).
# Installs wrk and nginx (Debian) and oha (crates.io, ~6 min, into .tools/cargo) if missing.
# Usage: bench/generator.sh [SECONDS=8] [RUNS=3]   (KEEP=1 keeps the work folder)
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-8}
RUNS=${2:-3}
command -v wrk >/dev/null && command -v nginx >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk nginx >/dev/null; }
OHA=.tools/cargo/bin/oha
[ -x "$OHA" ] || cargo install oha --locked --root .tools/cargo
cargo build --release --locked -q
LM=target/release/loadmix
WORK=$(mktemp -d)
echo "work folder: $WORK" >&2
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; [ -n "${KEEP:-}" ] || rm -rf "$WORK"; }
trap cleanup EXIT
M="python3 bench/measure.py"
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh

# nginx: one worker, no access log, a 196-byte static file its worker can read.
mkdir -p "$WORK/www"
head -c 196 /dev/zero | tr '\0' 'x' >"$WORK/www/index.html"
chmod 755 "$WORK" "$WORK/www"
chmod 644 "$WORK/www/index.html"
NGINX_PORT=$(free_port)
cat >"$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx.err;
events { worker_connections 1024; }
http { access_log off; server { listen 127.0.0.1:$NGINX_PORT; root $WORK/www; } }
CONF
nginx -c "$WORK/nginx.conf" & PIDS+=($!)
URL="http://127.0.0.1:$NGINX_PORT/index.html"
for _ in $(seq 1 50); do curl -sf "$URL" >/dev/null && break; sleep 0.1; done

# The 10 ms endpoint, in a process of its own.
SERVE_PORT=$(free_port)
"$LM" serve --bind "127.0.0.1:$SERVE_PORT" --no-auth >"$WORK/serve.log" 2>&1 & PIDS+=($!)
DELAY="http://127.0.0.1:$SERVE_PORT"
for _ in $(seq 1 50); do curl -sf "$DELAY/cosmo/_loadmix/delay/0" >/dev/null && break; sleep 0.1; done

cat >"$WORK/get.yaml" <<YAML
name: trivial-get
target: http://127.0.0.1:$NGINX_PORT
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
cat >"$WORK/delay.yaml" <<YAML
name: delay-10ms
run: { duration: ${SECS}s }
connection: keep_alive
users:
  - class: d
    protocol: http
    count: 20
    pacing: 20ms
    mix:
      get: { weight: 1, path: "{context}/_loadmix/delay/10", expect: 200 }
YAML
cat >"$WORK/open.yaml" <<YAML
name: open-1000
target: http://127.0.0.1:$NGINX_PORT
context: ""
run: { duration: ${SECS}s }
users:
  - class: s
    protocol: http
    arrival: { rate: 1000/s, process: constant, max_concurrency: 64, when_full: queue }
    mix:
      get: { weight: 1, path: /index.html, expect: 200 }
YAML

# Each measurement appends "KEY VALUE" to $R; the summary at the end reads it.
R="$WORK/results"
: >"$R"
put() { echo "$1 $2" >>"$R"; }
cpu_of() { python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])['cpu'])" "$1"; }

# wrk at full speed: rate, CPU µs per request.
wrk_full() {
    $M "$WORK/wrk.out" -- wrk -t"$1" -c64 -d"${SECS}s" --timeout 10s "$URL" >"$WORK/wrk.m"
    if grep -q "Non-2xx\|Socket errors" "$WORK/wrk.out"; then cat "$WORK/wrk.out" >&2; exit 1; fi
    python3 - "$WORK/wrk.out" "$(cpu_of "$WORK/wrk.m")" <<'PY'
import re, sys
out = open(sys.argv[1]).read()
rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
reqs = int(re.search(r"(\d+) requests in", out).group(1))
print(rate, float(sys.argv[2]) / reqs * 1e6)
PY
}
# oha: rate, CPU µs per request, p50 ms. Every answer must be a 200.
oha_run() {
    local name=$1
    shift
    $M "$WORK/$name.json" -- "$OHA" --no-tui --output-format json "$@" >"$WORK/$name.m"
    python3 - "$WORK/$name.json" "$(cpu_of "$WORK/$name.m")" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
codes = o.get("statusCodeDistribution", {})
if set(codes) - {"200"}:
    sys.exit(f"oha got answers other than 200: {codes}")
reqs = sum(codes.values())
print(o["summary"]["requestsPerSec"], float(sys.argv[2]) / reqs * 1e6, o["latencyPercentiles"]["p50"] * 1000)
PY
}
# loadmix: rate, CPU µs per request, p50 ms, start lag p99 ms. No failure allowed.
lm_run() {
    local name=$1
    shift
    rm -rf "$WORK/$name"
    $M "$WORK/$name.out" -- "$LM" run "$@" --quiet --out "$WORK/$name" >"$WORK/$name.m"
    python3 - "$WORK/$name/run.json" "$(cpu_of "$WORK/$name.m")" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["summary"]["total"]
if t["failures"]:
    sys.exit(f"loadmix saw {t['failures']} failures")
lag = max(x["generator"]["lag_p99_ms"] for x in r["rounds"])
print(t["ops_per_sec"], float(sys.argv[2]) / t["requests"] * 1e6, t["latency_ms"]["p50"], lag)
PY
}
# Run the commands given as arguments in turn, starting with the K-th (1-based), so the
# tools take turns going first.
rotate() {
    local k=$1
    shift
    local n=$#
    local cmds=("$@")
    for i in $(seq 0 $((n - 1))); do
        eval "${cmds[$(((k - 1 + i) % n))]}"
    done
}

echo "machine: $(nproc) cores, $(uname -r); $(date -u +%Y-%m-%dT%H:%MZ); ${SECS}s per tool, $RUNS runs" >&2
echo "== 1. request rate at equal threads, static GET from nginx, 64 connections" >&2
for N in 1 2; do
    for k in $(seq 1 "$RUNS"); do
        rotate "$k" \
            'read -r W_RATE W_CPU < <(wrk_full "$N")' \
            'read -r O_RATE O_CPU _ < <(oha_run oha -c 64 -z "${SECS}s" --worker-threads "$N" "$URL")' \
            'read -r L_RATE L_CPU _ _ < <(lm_run lm "$WORK/get.yaml" --workers "$N")'
        printf "   threads %s run %s: wrk %.0f req/s %.1f µs/req | oha %.0f req/s %.1f µs/req | loadmix %.0f req/s %.1f µs/req\n" \
            "$N" "$k" "$W_RATE" "$W_CPU" "$O_RATE" "$O_CPU" "$L_RATE" "$L_CPU" >&2
        put "rate_wrk_$N" "$(python3 -c "print($L_RATE / $W_RATE)")"
        put "rate_oha_$N" "$(python3 -c "print($L_RATE / $O_RATE)")"
        put "cpu_wrk_$N" "$(python3 -c "print($L_CPU / $W_CPU)")"
        put "cpu_oha_$N" "$(python3 -c "print($L_CPU / $O_CPU)")"
        put "abs_rate_$N" "$W_RATE $O_RATE $L_RATE"
        put "abs_cpu_$N" "$W_CPU $O_CPU $L_CPU"
    done
done

echo "== 2. CPU per request at 20,000 req/s, one thread each" >&2
for k in $(seq 1 "$RUNS"); do
    rotate "$k" \
        'read -r O_RATE O_CPU _ < <(oha_run oha-q -c 64 -z "${SECS}s" -q 20000 --worker-threads 1 "$URL")' \
        'read -r L_RATE L_CPU _ _ < <(lm_run lm-q "$WORK/get.yaml" --workers 1 --set users.c.pacing=3200us)'
    printf "   run %s: oha %.0f req/s %.2f µs/req | loadmix %.0f req/s %.2f µs/req\n" "$k" "$O_RATE" "$O_CPU" "$L_RATE" "$L_CPU" >&2
    put cpu20k_oha "$(python3 -c "print($L_CPU / $O_CPU)")"
    put abs_cpu20k "$O_CPU $L_CPU"
done

echo "== 3. timing: a 10 ms endpoint at 1,000 req/s, two threads each; open-model start lag" >&2
for k in $(seq 1 "$RUNS"); do
    rotate "$k" \
        'read -r O_RATE _ O_P50 < <(oha_run oha-d -c 20 -z "${SECS}s" -q 1000 --worker-threads 2 "$DELAY/cosmo/_loadmix/delay/10")' \
        'read -r L_RATE _ L_P50 _ < <(lm_run lm-d "$WORK/delay.yaml" --target "$DELAY" --workers 2)'
    read -r _ OPEN_CPU _ OPEN_LAG < <(lm_run lm-open "$WORK/open.yaml" --workers 2)
    printf "   run %s: p50 oha %.3f ms, loadmix %.3f ms | open model: start lag p99 %.3f ms, %.1f µs CPU per request\n" \
        "$k" "$O_P50" "$L_P50" "$OPEN_LAG" "$OPEN_CPU" >&2
    put p50_oha "$(python3 -c "print($O_P50 - 10)")"
    put p50_lm "$(python3 -c "print($L_P50 - 10)")"
    put open_lag "$OPEN_LAG"
    put open_cpu "$OPEN_CPU"
done

echo "== 4. memory per idle user" >&2
# Users alive and idle: each thinks 60 s before its first operation, in a 120 s round that
# SIGINT stops after 8 s (the report is still written). In a round shorter than the think,
# users would end at once and their state would never be held together.
for n in 1 1000 10000 100000; do
    $M "$WORK/mem-$n.out" -- timeout -s INT 8 "$LM" run workloads/queue-sizes.yaml --quiet --out "$WORK/mem-$n" \
        --users "producer=$n,consumer=0" --duration 120s --rounds 1 --set think=60s >"$WORK/mem-$n.m"
    put "rss_$n" "$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])['maxrss_kib'])" "$WORK/mem-$n.m")"
done

echo "== 5. coordinated omission: 1 s stall every 10 s, open model at 1,000/s" >&2
cat >"$WORK/stall.yaml" <<YAML
name: stall
run: { duration: 30s }
users:
  - class: s
    protocol: http
    arrival: { rate: 1000/s, process: constant, max_concurrency: 64, when_full: queue }
    mix:
      get: { weight: 1, path: "{context}/_loadmix/stall/10000/1000", expect: 200 }
YAML
"$LM" run "$WORK/stall.yaml" --target "$DELAY" --quiet --out "$WORK/stall" >/dev/null

python3 - "$R" "$WORK/stall/run.json" <<'PY'
import json, statistics, sys
from collections import defaultdict
vals = defaultdict(list)
for line in open(sys.argv[1]):
    k, *v = line.split()
    vals[k].append([float(x) for x in v] if len(v) > 1 else float(v[0]))
def f(k, fmt="{:.2f}", unit="×"):
    v = vals[k]
    return f"{fmt.format(statistics.median(v))}{unit} ({fmt.format(min(v))}–{fmt.format(max(v))})"
def spread(k, i, fmt="{:.0f}"):
    v = [x[i] for x in vals[k]]
    return f"{fmt.format(min(v))}–{fmt.format(max(v))}"
n = len(vals["rate_wrk_1"])
print(f"\nmedian (min–max) of {n} runs; loadmix against each peer at equal threads\n")
print("1. static GET from nginx, 64 connections, full speed")
for t in (1, 2):
    print(f"   threads {t}: request rate loadmix/wrk {f(f'rate_wrk_{t}')} (goal ≥ 1.0×), loadmix/oha {f(f'rate_oha_{t}')} (goal > 1×)")
    print(f"              CPU per request loadmix/wrk {f(f'cpu_wrk_{t}')} (goal ≤ 1.3×), loadmix/oha {f(f'cpu_oha_{t}')}")
    print(f"              req/s wrk {spread(f'abs_rate_{t}', 0)}, oha {spread(f'abs_rate_{t}', 1)}, loadmix {spread(f'abs_rate_{t}', 2)}; "
          f"µs/req wrk {spread(f'abs_cpu_{t}', 0, '{:.1f}')}, oha {spread(f'abs_cpu_{t}', 1, '{:.1f}')}, loadmix {spread(f'abs_cpu_{t}', 2, '{:.1f}')}")
print("2. CPU per request at 20,000 req/s, one thread each")
print(f"   loadmix/oha {f('cpu20k_oha')} (goal < 1×); µs/req oha {spread('abs_cpu20k', 0, '{:.2f}')}, loadmix {spread('abs_cpu20k', 1, '{:.2f}')}")
print("3. timing at 1,000 req/s")
print(f"   p50 error against the exact 10 ms: loadmix {f('p50_lm', '{:+.3f}', ' ms')} (goal within 0.1 ms), oha {f('p50_oha', '{:+.3f}', ' ms')}")
print(f"   open-model start lag p99 {f('open_lag', '{:.3f}', ' ms')} (goal ≤ 0.1 ms), CPU {f('open_cpu', '{:.1f}', ' µs')} per request")
base = vals["rss_1"][0]
print("4. RSS of idle users (think 60 s), above one user")
for u in (1000, 10000, 100000):
    rss = vals[f"rss_{u}"][0]
    print(f"   {u:>6} users: {rss/1024:7.1f} MiB peak, {(rss-base)/u:5.2f} KiB per user (goal ≤ 6 KiB)")
s = json.load(open(sys.argv[2]))["summary"]["total"]
c = s["latency_corrected_ms"]
print("5. coordinated omission, 1 s stall every 10 s, 1,000 arrivals/s, 64 slots")
print(f"   corrected p99 {c['p99']:.1f} ms, p99.9 {c['p999']:.1f} ms; uncorrected (service time) p50 {s['latency_ms']['p50']:.2f} ms, p99 {s['latency_ms']['p99']:.1f} ms")
PY
