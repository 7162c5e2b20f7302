#!/usr/bin/env bash
# Renders a run's page, a comparison page and a sweep page, then opens each in headless
# Chromium (scripts/html_check.mjs): no console errors, no request leaving the file, every
# chart present. Installs Debian's chromium and npm's playwright-core when missing.
# Screenshots land in target/html-check/ for a reviewer to look at.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/browser_setup.sh
BIN=${CARGO_TARGET_DIR:-target}/debug/loadmix
[ -x "$BIN" ] || cargo build --locked
OUT=target/html-check
rm -rf "$OUT"
mkdir -p "$OUT"
# Two targets (so a comparison page is written) and a sweep.
"$BIN" run workloads/queue-sizes.yaml --quiet --iterations 60 --rounds 2 \
    --target memory=embedded:memory --target sqlite=embedded:sqlite --out "$OUT/pair" >/dev/null
"$BIN" run workloads/queue-sizes.yaml --quiet --iterations 40 --rounds 2 \
    --sweep users.producer.count=1,2,4 --out "$OUT/sweep" >/dev/null
"$BIN" report reports/example/run.json --html "$OUT/example.html" >/dev/null
cp "$OUT/pair/memory/report.html" "$OUT/memory.html"
cp "$OUT/pair/compare.html" "$OUT/compare.html"
cp "$OUT/sweep/sweep.html" "$OUT/sweep.html"
cp scripts/html_check.mjs "$NODE_DIR/html_check.mjs"
node "$NODE_DIR/html_check.mjs" \
    "$OUT/example.html:throughput,latency-over-time,latency-heat,concurrency,errors-over-time,latency,spectrum,rounds,errors" \
    "$OUT/memory.html:throughput,latency-over-time,latency-heat,concurrency,errors-over-time,latency,spectrum,rounds,errors" \
    "$OUT/compare.html:compare-throughput,compare-throughput-over-time,compare-p99-over-time,compare-spectrum-1,compare-spectrum-2,compare-spectrum-3" \
    "$OUT/sweep.html:sweep-throughput,sweep-p99"
