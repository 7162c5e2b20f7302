#!/usr/bin/env bash
# The generator against its peers, side by side in one run on this machine (issue 6):
#   1. request rate on a trivial GET from nginx (1 worker, static file), 64 connections:
#      loadmix (generic http, keep-alive, no think) vs wrk vs oha;
#   2. CPU time per request at one fixed rate (20,000 req/s): loadmix (paced users) vs oha
#      (-q); wrk cannot hold a rate, so its figure is at full speed;
#   3. memory: RSS per idle user with 1,000, 10,000 and 100,000 users (long think time);
#   4. timing accuracy: reported p50 and p99 against an endpoint that answers after 10 ms,
#      at 1,000 req/s;
#   5. coordinated omission: a server that stalls 1 s every 10 s (the embedded server's stall
#      endpoint), measured open-model at a fixed rate: corrected p99 against uncorrected.
# Installs wrk and nginx (Debian) and oha (crates.io, ~6 min, into .tools/cargo) if missing.
# Usage: bench/generator.sh [SECONDS=10]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-10}
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

# nginx: one worker, no access log, a 196-byte static file.
mkdir -p "$WORK/www"
head -c 196 /dev/zero | tr '\0' 'x' > "$WORK/www/index.html"
# nginx's worker runs unprivileged: it must be able to read the file (mktemp -d is 0700).
chmod 755 "$WORK" "$WORK/www"
chmod 644 "$WORK/www/index.html"
cat > "$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx.err;
events { worker_connections 1024; }
http { access_log off; server { listen 127.0.0.1:18090; root $WORK/www; } }
CONF
nginx -c "$WORK/nginx.conf" & PIDS+=($!)
sleep 0.5
URL=http://127.0.0.1:18090/index.html

cat > "$WORK/get.yaml" <<YAML
name: trivial-get
target: http://127.0.0.1:18090
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
field() { python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])[sys.argv[2]])" "$1" "$2"; }
lm_rate() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['summary']['total']['ops_per_sec'])" "$1"; }
lm_reqs() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['summary']['total']['requests'])" "$1"; }

echo "== 1. request rate, trivial GET from nginx, 64 connections, ${SECS}s" >&2
$M "$WORK/wrk.out" -- wrk -t1 -c64 -d"${SECS}s" --timeout 10s "$URL" > "$WORK/wrk.m"
if grep -q "Non-2xx" "$WORK/wrk.out"; then cat "$WORK/wrk.out"; echo "wrk got error answers: fix the server set-up first"; exit 1; fi
WRK_RATE=$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.out")
WRK_REQS=$(awk '/requests in/ {print $1}' "$WORK/wrk.out")
$M "$WORK/oha.out" -- "$OHA" -c 64 -z "${SECS}s" --no-tui --output-format json "$URL" > "$WORK/oha.m"
OHA_RATE=$(python3 -c "import json; print(json.load(open('$WORK/oha.out'))['summary']['requestsPerSec'])")
$M "$WORK/lm.out" -- "$LM" run "$WORK/get.yaml" --quiet --out "$WORK/lm" > "$WORK/lm.m"
LM_RATE=$(lm_rate "$WORK/lm/run.json")
python3 -c "import json,sys; t=json.load(open(sys.argv[1]))['summary']['total']; sys.exit(f'loadmix saw {t[\"failures\"]} failures' if t['failures'] else 0)" "$WORK/lm/run.json"

echo "== 2. CPU per request at 20,000 req/s" >&2
$M "$WORK/oha-q.out" -- "$OHA" -c 64 -z "${SECS}s" -q 20000 --no-tui --output-format json "$URL" > "$WORK/oha-q.m"
OHA_Q_REQS=$(python3 -c "import json; s=json.load(open('$WORK/oha-q.out'))['summary']; print(s['requestsPerSec']*s['total'])")
$M "$WORK/lm-q.out" -- "$LM" run "$WORK/get.yaml" --quiet --out "$WORK/lm-q" --set users.c.pacing=3200us > "$WORK/lm-q.m"
LM_Q_REQS=$(lm_reqs "$WORK/lm-q/run.json")
LM_Q_RATE=$(lm_rate "$WORK/lm-q/run.json")

echo "== 3. memory per idle user" >&2
for n in 1 1000 10000 100000; do
    $M "$WORK/mem-$n.out" -- "$LM" run workloads/queue-sizes.yaml --quiet --out "$WORK/mem-$n" \
        --users "producer=$n,consumer=0" --duration 5s --rounds 1 --set think=60s > "$WORK/mem-$n.m"
done

echo "== 4. timing accuracy against a 10 ms endpoint at 1,000 req/s" >&2
cat > "$WORK/delay.yaml" <<YAML
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
# The 10 ms endpoint runs in a separate `loadmix serve`, so the generators measured do not
# share its process; oha measures the same endpoint at the same rate for reference.
"$LM" serve --bind 127.0.0.1:18091 --no-auth >"$WORK/serve.log" 2>&1 & PIDS+=($!)
sleep 0.5
"$LM" run "$WORK/delay.yaml" --target http://127.0.0.1:18091 --quiet --out "$WORK/delay" > /dev/null
"$OHA" -c 20 -z "${SECS}s" -q 1000 --no-tui --output-format json http://127.0.0.1:18091/cosmo/_loadmix/delay/10 > "$WORK/oha-delay.json"

echo "== 5. coordinated omission: 1 s stall every 10 s, open model at 1,000/s" >&2
cat > "$WORK/stall.yaml" <<YAML
name: stall
run: { duration: 30s }
users:
  - class: s
    protocol: http
    arrival: { rate: 1000/s, process: constant, max_concurrency: 64, when_full: queue }
    mix:
      get: { weight: 1, path: "{context}/_loadmix/stall/10000/1000", expect: 200 }
YAML
"$LM" run "$WORK/stall.yaml" --quiet --out "$WORK/stall" > /dev/null

python3 - "$WORK" "$WRK_RATE" "$WRK_REQS" "$OHA_RATE" "$LM_RATE" "$OHA_Q_REQS" "$LM_Q_REQS" "$LM_Q_RATE" "$SECS" <<'PY'
import json, sys
W, wrk_rate, wrk_reqs, oha_rate, lm_rate, oha_q_reqs, lm_q_reqs, lm_q_rate, secs = sys.argv[1:]
m = lambda name: json.loads(open(f"{W}/{name}.m").read().splitlines()[-1])
f = float
print(f"\nside by side, {secs} s each, generator and server sharing this machine's cores\n")
print("1. trivial GET from nginx (1 worker), 64 connections")
print(f"   wrk     {f(wrk_rate):>10.0f} req/s   CPU {m('wrk')['cpu']/m('wrk')['wall']*100:4.0f}%")
print(f"   oha     {f(oha_rate):>10.0f} req/s   CPU {m('oha')['cpu']/m('oha')['wall']*100:4.0f}%")
print(f"   loadmix {f(lm_rate):>10.0f} req/s   CPU {m('lm')['cpu']/m('lm')['wall']*100:4.0f}%")
print(f"   loadmix / wrk = {f(lm_rate)/f(wrk_rate):.2f}x   loadmix / oha = {f(lm_rate)/f(oha_rate):.2f}x   (goal: >= 0.9x wrk, above oha)")
wrk_cpu = m('wrk')['cpu'] / f(wrk_reqs) * 1e6
oha_cpu = m('oha-q')['cpu'] / f(oha_q_reqs) * 1e6
lm_cpu = m('lm-q')['cpu'] / f(lm_q_reqs) * 1e6
print("2. CPU time per request")
print(f"   wrk     {wrk_cpu:6.2f} us/req (at full speed: wrk cannot hold a rate)")
print(f"   oha     {oha_cpu:6.2f} us/req at 20,000 req/s")
print(f"   loadmix {lm_cpu:6.2f} us/req at {f(lm_q_rate):.0f} req/s (64 users paced at 3.2 ms)")
print(f"   loadmix / wrk = {lm_cpu/wrk_cpu:.2f}x   loadmix / oha = {lm_cpu/oha_cpu:.2f}x   (goal: <= 1.5x wrk)")
base = m('mem-1')['maxrss_kib']
print("3. memory of idle users (think 60 s), RSS above one user")
for n in (1000, 10000, 100000):
    rss = m(f'mem-{n}')['maxrss_kib']
    print(f"   {n:>6} users: {rss/1024:7.1f} MiB peak, {(rss-base)/n:5.2f} KiB per user   (goal: <= 10 KiB)")
d = json.load(open(f"{W}/delay/run.json"))["summary"]["total"]
print("4. timing accuracy, endpoint answering after exactly 10 ms, 1,000 req/s")
od = json.load(open(f"{W}/oha-delay.json"))
op50, op99 = od["latencyPercentiles"]["p50"] * 1000, od["latencyPercentiles"]["p99"] * 1000
print(f"   loadmix p50 {d['latency_ms']['p50']:.3f} ms (error {d['latency_ms']['p50']-10:+.3f} ms, goal within 0.3)   p99 {d['latency_ms']['p99']:.3f} ms   {d['ops_per_sec']:.0f} req/s")
print(f"   oha     p50 {op50:.3f} ms (error {op50-10:+.3f} ms)   p99 {op99:.3f} ms   {od['summary']['requestsPerSec']:.0f} req/s")
s = json.load(open(f"{W}/stall/run.json"))["summary"]["total"]
c = s["latency_corrected_ms"]
print("5. coordinated omission, 1 s stall every 10 s, 1,000 arrivals/s, 64 slots")
print(f"   corrected p99 {c['p99']:.1f} ms, p99.9 {c['p999']:.1f} ms   uncorrected (service time) p50 {s['latency_ms']['p50']:.2f} ms, p99 {s['latency_ms']['p99']:.1f} ms")
PY
