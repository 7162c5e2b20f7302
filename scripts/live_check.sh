#!/usr/bin/env bash
# Watching a run live, checked against what the run reports:
#   1. a real Prometheus server (Debian's, on loopback, scraping every second) scrapes
#      `loadmix run --metrics` during a run against `loadmix serve`; afterwards its TSDB's
#      requests counter equals the report's request count, its warm-up and off-the-clock
#      (preflight, set-up, cleanup) counters the report's, and all of them together what
#      the server counted; histogram_quantile of its latency buckets lands in the report's
#      p99 bucket or the next one;
#   2. the same run's `--dashboard` opens in headless Chromium while the run goes: its
#      charts gain points as seconds pass, it makes no request beyond its own server, and at
#      the end its totals equal run.json's and it links the report;
#   3. promtool accepts the metrics page as the text format.
# Installs Debian's prometheus when missing (chromium and playwright-core come with
# scripts/html_check.sh). The screenshot lands in target/live-check/ for a reviewer.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x /usr/bin/prometheus ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    (apt-get install -y -qq --no-install-recommends prometheus ||
        (apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus)) >/dev/null
    rm -f /usr/sbin/policy-rc.d
fi
. scripts/browser_setup.sh
BIN=${CARGO_TARGET_DIR:-target}/debug/loadmix
[ -x "$BIN" ] || cargo build --locked
OUT=target/live-check
rm -rf "$OUT"
mkdir -p "$OUT"
WORK=$(mktemp -d)
PROM= RUN= SERVE=
cleanup() {
    [ -n "$RUN" ] && kill "$RUN" 2>/dev/null
    [ -n "$SERVE" ] && kill "$SERVE" 2>/dev/null
    [ -n "$PROM" ] && kill "$PROM" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
MPORT=$(free_port) DPORT=$(free_port) PPORT=$(free_port) SPORT=$(free_port)

# The server in a process of its own, so that what it counted can be held against what
# the run's series say it sent.
"$BIN" serve --bind "127.0.0.1:$SPORT" --no-auth >"$WORK/serve.log" 2>&1 &
SERVE=$!
SERVED="http://127.0.0.1:$SPORT/cosmo/_loadmix/metrics"
until curl -sf "$SERVED" >/dev/null; do
    kill -0 "$SERVE" 2>/dev/null || { cat "$WORK/serve.log"; echo "FAIL: loadmix serve did not start"; exit 1; }
    sleep 0.1
done
served() { curl -sf "$SERVED" | awk '/^loadmix_server_requests_total/ {s += $2} END {print s + 0}'; }
BEFORE=$(served)

cat >"$WORK/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: loadmix
    static_configs:
      - targets: ["127.0.0.1:$MPORT"]
YAML
/usr/bin/prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
    --web.listen-address="127.0.0.1:$PPORT" >"$WORK/prometheus.log" 2>&1 &
PROM=$!
PROM_URL="http://127.0.0.1:$PPORT"
until curl -sf "$PROM_URL/-/ready" >/dev/null; do
    kill -0 "$PROM" 2>/dev/null || { cat "$WORK/prometheus.log"; echo "FAIL: prometheus did not start"; exit 1; }
    sleep 0.2
done
echo "   prometheus $(/usr/bin/prometheus --version 2>&1 | head -1 | awk '{print $3}') ready on $PROM_URL"

# Two 5 s rounds with a 1 s warm-up window each: the measured and warm-up phases both count.
# Three thresholds, one broken on purpose, which the dashboard judges as the report does;
# the server's process watched, which the dashboard charts; a 1 ms latency fault from 2 s
# to 3 s of each round (through loadmix's proxy, which counts nothing itself), which the
# dashboard shades.
W="$OUT/cosmo-thresholds.yaml"
cat workloads/cosmo-0.7.yaml - >"$W" <<'YAML'
thresholds:
  - { op: total, errors: "< 50%" }
  - { op: total, ops_per_sec: "> 1" }
  - { op: total, p50: "< 0.001ms" }
YAML
"$BIN" run "$W" --target "http://127.0.0.1:$SPORT/cosmo" \
    --duration 5s --rounds 2 --set run.warmup=1s --monitor-process "$SERVE" \
    --fault 'fault=latency,at=2s,for=1s,delay=1ms' --set recovery.hold=1s \
    --metrics "127.0.0.1:$MPORT" --dashboard "127.0.0.1:$DPORT" --linger 8s \
    --out "$OUT/run" >"$OUT/run.txt" 2>"$OUT/run.err" &
RUN=$!
until curl -sf "http://127.0.0.1:$DPORT/live.json" >/dev/null; do
    kill -0 "$RUN" 2>/dev/null || { cat "$OUT/run.err"; echo "FAIL: the run ended before its dashboard answered"; exit 1; }
    sleep 0.1
done
curl -sf "http://127.0.0.1:$MPORT/metrics" >"$OUT/metrics.txt"
# promtool lints too (names, units, help): the page must pass it clean.
promtool check metrics <"$OUT/metrics.txt" || { echo "FAIL: promtool check metrics"; exit 1; }
echo "   promtool check metrics: clean ($(grep -vc '^#' "$OUT/metrics.txt") series)"
cp scripts/live_check.mjs "$NODE_DIR/live_check.mjs"
node "$NODE_DIR/live_check.mjs" "http://127.0.0.1:$DPORT/" "$OUT/run/run.json" "$OUT/dashboard.png"
# Exit 1: the threshold broken on purpose.
status=0
wait "$RUN" || status=$?
RUN=
[ "$status" -eq 1 ] || { cat "$OUT/run.err"; echo "FAIL: the run exited $status, not 1 for its broken threshold"; exit 1; }
echo "   run: $(grep -c 'round [0-9]/2' "$OUT/run.err") rounds, report in $OUT/run"

# What Prometheus stored, against the report and the server's count: tests/real/live.rs.
export LOADMIX_REAL_PROMETHEUS="$PROM_URL" LOADMIX_REAL_LIVE_RUN="$OUT/run"
export LOADMIX_REAL_LIVE_SERVED_URL="$SERVED" LOADMIX_REAL_LIVE_SERVED_BEFORE="$BEFORE"
real_checks live::
echo "   live figures agree with the report"
