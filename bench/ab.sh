#!/usr/bin/env bash
# Two builds of loadmix against each other and against `wrk -t1` on the request path, for
# a change that touches it (issue 20's transport split): a static 196-byte GET from nginx
# (1 worker, no access log), 64 keep-alive connections, one worker thread each. The three
# take turns going first; every run prints each one's rate and CPU per request, and the end
# prints the medians with the min and max over the runs, and B against A.
# CPU is user + system time from getrusage for the whole process.
# With FORM `chain`, B runs the same GET written as a behaviour model of one state that
# loops on itself instead of a `mix:` table (A and B may then be one binary): what the
# behaviour-model mechanism costs on the request path (issue 23).
# Installs wrk and nginx (Debian) if missing.
# Usage: bench/ab.sh A_BINARY B_BINARY [SECONDS=8] [RUNS=3] [FORM=mix|chain]
set -euo pipefail
cd "$(dirname "$0")/.."
A=$(realpath "$1")
B=$(realpath "$2")
SECS=${3:-8}
RUNS=${4:-3}
FORM=${5:-mix}
command -v wrk >/dev/null && command -v nginx >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk nginx >/dev/null; }
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
M="python3 bench/measure.py"
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh

mkdir -p "$WORK/www"
head -c 196 /dev/zero | tr '\0' 'x' >"$WORK/www/index.html"
chmod 755 "$WORK" "$WORK/www"
chmod 644 "$WORK/www/index.html"
PORT=$(free_port)
cat >"$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx.err;
events { worker_connections 1024; }
http { access_log off; server { listen 127.0.0.1:$PORT; root $WORK/www; } }
CONF
nginx -c "$WORK/nginx.conf" & PIDS+=($!)
URL="http://127.0.0.1:$PORT/index.html"
for _ in $(seq 1 50); do curl -sf "$URL" >/dev/null && break; sleep 0.1; done
# The same users, as a table or as a one-state chain.
{
    cat <<YAML
name: trivial-get
target: http://127.0.0.1:$PORT
context: ""
run: { duration: ${SECS}s, timeout: 10s }
connection: keep_alive
users:
  - class: c
    protocol: http
    count: 64
YAML
} >"$WORK/head.yaml"
{ cat "$WORK/head.yaml"; echo "    mix:"; echo "      get: { weight: 1, path: /index.html, expect: 200 }"; } >"$WORK/get.yaml"
if [ "$FORM" = chain ]; then
    { cat "$WORK/head.yaml"; echo "    ops:"; echo "      get: { path: /index.html, expect: 200 }"
      echo "    behaviours:"; echo "      one: { weight: 1, start: get, states: { get: { get: 1 } } }"; } >"$WORK/get-b.yaml"
else
    cp "$WORK/get.yaml" "$WORK/get-b.yaml"
fi
cpu_of() { python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])['cpu'])" "$1"; }

# rate and CPU µs per request of `wrk -t1`
wrk_run() {
    $M "$WORK/wrk.out" -- wrk -t1 -c64 -d"${SECS}s" --timeout 10s "$URL" >"$WORK/wrk.m"
    if grep -q "Non-2xx\|Socket errors" "$WORK/wrk.out"; then cat "$WORK/wrk.out" >&2; exit 1; fi
    python3 - "$WORK/wrk.out" "$(cpu_of "$WORK/wrk.m")" <<'PY'
import re, sys
out = open(sys.argv[1]).read()
rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
reqs = int(re.search(r"(\d+) requests in", out).group(1))
print(rate, float(sys.argv[2]) / reqs * 1e6)
PY
}
# rate and CPU µs per request of one loadmix binary; no failure allowed
lm_run() {
    rm -rf "$WORK/lm"
    $M "$WORK/lm.out" -- "$1" run "$WORK/$2" --workers 1 --quiet --out "$WORK/lm" >"$WORK/lm.m"
    python3 - "$WORK/lm/run.json" "$(cpu_of "$WORK/lm.m")" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["summary"]["total"]
if t["failures"]:
    sys.exit(f"loadmix saw {t['failures']} failures")
print(t["ops_per_sec"], float(sys.argv[2]) / t["requests"] * 1e6)
PY
}

R="$WORK/results"
: >"$R"
echo "machine: $(nproc) cores, $(uname -r); ${SECS}s per tool, $RUNS runs; A=$A B=$B ($FORM)" >&2
for k in $(seq 1 "$RUNS"); do
    cmds=('read -r W_RATE W_CPU < <(wrk_run)' \
          'read -r A_RATE A_CPU < <(lm_run "$A" get.yaml)' \
          'read -r B_RATE B_CPU < <(lm_run "$B" get-b.yaml)')
    for i in 0 1 2; do eval "${cmds[$(((k - 1 + i) % 3))]}"; done
    printf "   run %s: wrk %.0f req/s %.2f µs/req | A %.0f req/s %.2f µs/req | B %.0f req/s %.2f µs/req\n" \
        "$k" "$W_RATE" "$W_CPU" "$A_RATE" "$A_CPU" "$B_RATE" "$B_CPU" >&2
    echo "$W_RATE $W_CPU $A_RATE $A_CPU $B_RATE $B_CPU" >>"$R"
done
python3 - "$R" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
col = lambda i: [r[i] for r in rows]
def show(name, xs, unit):
    print(f"{name:28} median {statistics.median(xs):10.2f} {unit}  (min {min(xs):.2f}, max {max(xs):.2f})")
show("wrk -t1 rate", col(0), "req/s")
show("A rate", col(2), "req/s")
show("B rate", col(4), "req/s")
show("wrk -t1 CPU", col(1), "µs/req")
show("A CPU", col(3), "µs/req")
show("B CPU", col(5), "µs/req")
show("B/A rate", [r[4] / r[2] for r in rows], "×")
show("B/A CPU per request", [r[5] / r[3] for r in rows], "×")
show("B/wrk rate", [r[4] / r[0] for r in rows], "×")
show("B/wrk CPU per request", [r[5] / r[1] for r in rows], "×")
PY
