#!/usr/bin/env bash
# What TLS costs loadmix (issue 11), against one nginx (1 worker, a 196-byte static file)
# serving the same file over http and https (certificate from `loadmix cert`):
#   1. keep-alive request rate, https against http, 64 users, no think time, with the CPU
#      each request cost loadmix and nginx's worker; beside it `wrk -t1 -c64` on the same
#      server, and the ceiling the server's own TLS cost puts on the ratio (both share the
#      machine's cores: a client whose TLS cost nothing would still pay for nginx's);
#   2. a `per_request` class over https (a new connection for every request, as the 2007
#      client did), with and without TLS session resumption: requests per second, the
#      handshake's p50, and loadmix's CPU time per request.
# Runs alternate between the variants, RUNS times each (default 3); the medians and the
# spread (min-max) are printed. Installs nginx (Debian) when missing.
# Usage: bench/tls.sh [SECONDS=5] [RUNS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-5}
RUNS=${2:-3}
command -v nginx >/dev/null && command -v wrk >/dev/null ||
    { apt-get update -qq && apt-get install -y -qq nginx wrk >/dev/null; }
cargo build --release --locked -q
LM=target/release/loadmix
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

"$LM" cert --out "$WORK/certs" --name 127.0.0.1 2>/dev/null
mkdir -p "$WORK/www"
head -c 196 /dev/zero | tr '\0' 'x' >"$WORK/www/index.html"
chmod 755 "$WORK" "$WORK/www" && chmod 644 "$WORK/www/index.html" "$WORK/certs/"*.pem
HTTP=18091
HTTPS=18092
cat >"$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx.err;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  ssl_session_cache shared:SSL:10m;
  ssl_session_tickets on;
  server { listen 127.0.0.1:$HTTP; root $WORK/www; }
  server {
    listen 127.0.0.1:$HTTPS ssl;
    ssl_certificate $WORK/certs/cert.pem;
    ssl_certificate_key $WORK/certs/key.pem;
    root $WORK/www;
  }
}
CONF
nginx -c "$WORK/nginx.conf" &
PIDS+=($!)
NGINX_WORKER=
for _ in $(seq 100); do
    NGINX_WORKER=$(pgrep -P "${PIDS[0]}" | head -1) && [ -n "$NGINX_WORKER" ] && break
    sleep 0.05
done
HZ=$(getconf CLK_TCK)
# CPU seconds nginx's worker has used so far.
nginx_cpu() { awk -v hz="$HZ" '{print ($14 + $15) / hz}' "/proc/$NGINX_WORKER/stat"; }

# $1 name, $2 users, $3 connection, $4 tls_resumption
workload() {
    cat >"$WORK/$1.yaml" <<YAML
name: tls-$1
context: ""
run: { duration: ${SECS}s, warmup: 1s, timeout: 10s }
connection: $3
users:
  - class: c
    protocol: http
    count: $2
    tls_resumption: $4
    mix:
      get: { weight: 1, path: /index.html, expect: [200] }
YAML
}
workload keepalive 64 keep_alive true
workload fresh 16 per_request false
workload resumed 16 per_request true

# One run: prints "ops_per_sec cpu_seconds requests tls_p50_ms resumed nginx_cpu_seconds".
one() {
    local name=$1 url=$2 out="$WORK/out-$1-$RANDOM"
    local m n0
    n0=$(nginx_cpu)
    m=$(python3 bench/measure.py "$WORK/stdout" -- "$LM" run "$WORK/$name.yaml" --target "$url" \
        --ca-cert "$WORK/certs/ca.pem" --rounds 1 --quiet --out "$out")
    python3 - "$out/run.json" "$m" "$n0" "$(nginx_cpu)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
m = json.loads(sys.argv[2])
t = r["summary"]["total"]
tls = t.get("tls_handshake_ms") or {}
print(t["ops_per_sec"], m["cpu"], t["requests"] + r["rounds"][0]["warmup_requests"],
      tls.get("p50", 0), t.get("tls_resumed", 0), float(sys.argv[4]) - float(sys.argv[3]))
PY
}

# wrk's keep-alive rate on the same file: one thread, 64 connections as loadmix's users.
wrk_rate() {
    wrk -t1 -c64 -d"${SECS}s" "$1/index.html" | awk '/^Requests\/sec/ {print $2}'
}

median_spread() { python3 -c "
import statistics, sys
v = sorted(float(x) for x in sys.argv[1:])
print(f'{statistics.median(v):.1f} ({v[0]:.1f}-{v[-1]:.1f})')" "$@"; }

declare -A RATE CPU P50 RES NGINX WRK
for i in $(seq 1 "$RUNS"); do
    for v in "keepalive http://127.0.0.1:$HTTP" "keepalive-tls https://127.0.0.1:$HTTPS" \
             "fresh https://127.0.0.1:$HTTPS" "resumed https://127.0.0.1:$HTTPS"; do
        set -- $v
        name=${1%-tls}
        read -r rate cpu reqs p50 res ncpu < <(one "$name" "$2")
        RATE[$1]+="$rate "
        CPU[$1]+="$(python3 -c "print($cpu / $reqs * 1e6)") "
        NGINX[$1]+="$(python3 -c "print($ncpu / $reqs * 1e6)") "
        P50[$1]+="$p50 "
        RES[$1]+="$res/$reqs "
        echo "run $i $1: $rate req/s, $(python3 -c "print(round($cpu / $reqs * 1e6, 1))") µs CPU per request (nginx $(python3 -c "print(round($ncpu / $reqs * 1e6, 1))")), TLS p50 $p50 ms, resumed $res" >&2
    done
    for v in "http http://127.0.0.1:$HTTP" "https https://127.0.0.1:$HTTPS"; do
        set -- $v
        rate=$(wrk_rate "$2")
        WRK[$1]+="$rate "
        echo "run $i wrk $1: $rate req/s" >&2
    done
done

echo
echo "keep-alive, 64 users, ${SECS}s, median of $RUNS (min-max):"
echo "  http  $(median_spread ${RATE[keepalive]}) req/s, $(median_spread ${CPU[keepalive]}) µs CPU/request, nginx $(median_spread ${NGINX[keepalive]}) µs"
echo "  https $(median_spread ${RATE[keepalive-tls]}) req/s, $(median_spread ${CPU[keepalive-tls]}) µs CPU/request, nginx $(median_spread ${NGINX[keepalive-tls]}) µs"
ratio() { python3 -c "
import statistics, sys
a = [float(x) for x in sys.argv[1].split()]; b = [float(x) for x in sys.argv[2].split()]
print(f'{statistics.median(b) / statistics.median(a):.2f}x (per run: ' +
      ', '.join(f'{y / x:.2f}' for x, y in zip(a, b)) + ')')" "$1" "$2"; }
echo "  https / http: $(ratio "${RATE[keepalive]}" "${RATE[keepalive-tls]}")"
echo "  wrk -t1: http $(median_spread ${WRK[http]}) req/s, https $(median_spread ${WRK[https]}) req/s, $(ratio "${WRK[http]}" "${WRK[https]}")"
python3 -c "
import statistics, sys
m = lambda s: statistics.median(float(x) for x in s.split())
lh, nh, ns = m(sys.argv[1]), m(sys.argv[2]), m(sys.argv[3])
print(f'  ceiling set by nginx alone (a client whose TLS cost nothing, on the same cores): {(lh + nh) / (lh + ns):.2f}x')
" "${CPU[keepalive]}" "${NGINX[keepalive]}" "${NGINX[keepalive-tls]}"
echo "per_request over https, 16 users:"
echo "  full handshakes  $(median_spread ${RATE[fresh]}) req/s, TLS p50 $(median_spread ${P50[fresh]}) ms, $(median_spread ${CPU[fresh]}) µs CPU/request"
echo "  resumed sessions $(median_spread ${RATE[resumed]}) req/s, TLS p50 $(median_spread ${P50[resumed]}) ms, $(median_spread ${CPU[resumed]}) µs CPU/request (resumed/requests: ${RES[resumed]})"
