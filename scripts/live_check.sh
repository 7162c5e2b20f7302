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
# shellcheck source=scripts/lib/ports.sh
. scripts/lib/ports.sh
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
"$BIN" run workloads/cosmo-0.7.yaml --target "http://127.0.0.1:$SPORT/cosmo" \
    --duration 5s --rounds 2 --set run.warmup=1s \
    --metrics "127.0.0.1:$MPORT" --dashboard "127.0.0.1:$DPORT" --linger 4s \
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
wait "$RUN"
RUN=
AFTER=$(served)
echo "   run: $(grep -c 'round [0-9]/2' "$OUT/run.err") rounds, report in $OUT/run"

# What Prometheus stored. Every counter starts at 0 with the process, so its last value in
# the TSDB is its increase over the run (PromQL's increase() extrapolates to the window's
# edges and is not exact).
python3 - "$PROM_URL" "$OUT/run/run.json" "$((AFTER - BEFORE))" <<'EOPY'
import json, sys, urllib.parse, urllib.request

prom, report, served = sys.argv[1], json.load(open(sys.argv[2])), int(sys.argv[3])

def query(q):
    url = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": q})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    return body["data"]["result"]

total = report["summary"]["total"]["requests"]
q = 'sum(last_over_time(loadmix_requests_total{phase="measured"}[10m]))'
got = int(float(query(q)[0]["value"][1]))
print(f"   prometheus: {q} = {got}; run.json: {total}")
assert got == total, f"FAIL: Prometheus counted {got} requests, the report {total}"
warm = sum(r["warmup_requests"] for r in report["rounds"])
q = 'sum(last_over_time(loadmix_requests_total{phase="warmup"}[10m]))'
got = int(float(query(q)[0]["value"][1]))
print(f"   prometheus: warm-up requests {got}; run.json: {warm}")
assert got == warm, f"FAIL: warm-up requests {got} against {warm}"
# Off the clock, step by step, as the report counts them; and everything the series say
# was sent is what the server counted, request for request.
want = {
    "preflight": report["preflight"]["requests"],
    "setup": sum(r["setup"]["requests"] for r in report["rounds"]),
    "cleanup": sum(r["cleanup"]["requests"] for r in report["rounds"]),
}
untimed = {}
for step, n in want.items():
    q = f'sum(last_over_time(loadmix_untimed_requests_total{{step="{step}"}}[10m]))'
    untimed[step] = int(float(query(q)[0]["value"][1]))
print(f"   prometheus: off the clock {untimed}; run.json: {want}")
assert untimed == want, f"FAIL: untimed requests {untimed} against {want}"
sent = total + warm + sum(untimed.values())
print(f"   prometheus: {sent} requests sent in all; loadmix serve counted {served}")
assert sent == served, f"FAIL: the series say {sent} requests were sent, the server counted {served}"
fails = report["summary"]["total"]["failures"]
q = 'sum(last_over_time(loadmix_failures_total{phase="measured"}[10m]))'
got = int(float(query(q)[0]["value"][1]))
assert got == fails, f"FAIL: failures {got} against {fails}"

bounds = [100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
          1e6, 2.5e6, 5e6, 1e7, 3e7, 6e7]
def bucket(ms):
    us = ms * 1000
    return next((i for i, b in enumerate(bounds) if us <= b), len(bounds))
for op in report["summary"]["ops"]:
    if op["successes"] < 100:
        continue
    cls, label = op["op"].split(".", 1)
    q = ('histogram_quantile(0.99, sum by (le) (last_over_time(loadmix_latency_seconds_bucket'
         f'{{phase="measured",class="{cls}",operation="{label}"}}[10m])))')
    p99 = float(query(q)[0]["value"][1]) * 1000
    want = op["latency_ms"]["p99"]
    print(f"   prometheus: {op['op']} p99 {p99:.3f} ms (bucket {bucket(p99)}); report {want:.3f} ms (bucket {bucket(want)})")
    assert abs(bucket(p99) - bucket(want)) <= 1, f"FAIL: {op['op']} p99 more than one bucket off"

# Every query of the Grafana dashboard (deploy/grafana/) parses in this Prometheus and
# finds series, evaluated in the middle of round 2.
import datetime
dash = json.load(open("deploy/grafana/loadmix.json"))
mid = report["rounds"][1]["started_at"]
at = datetime.datetime.fromisoformat(mid.replace("Z", "+00:00")).timestamp() + 2.5
n = 0
for panel in dash["panels"]:
    for t in panel["targets"]:
        e = t["expr"].replace("$__rate_interval", "4s").replace('"$run_id"', '".*"')
        url = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": e, "time": at})
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success" and body["data"]["result"], f"FAIL: Grafana panel {panel['title']!r}: {e} gives {body}"
        n += 1
print(f"   grafana: all {n} panel queries parse and find series in the run")
EOPY
echo "   live figures agree with the report"
