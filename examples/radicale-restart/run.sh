#!/usr/bin/env bash
# Radicale (PyPI, in .tools/venv-radicale) started by loadmix on loopback from a scratch
# folder, CalDAV clients syncing their calendars (workloads/caldav-sync.yaml), and Radicale
# restarted under them mid-round (SIGTERM, then the same command started again and
# waited for): what the users saw (the failures, by class), when they first saw it, how
# long until the calendars answered as before, and the operations it cost.
# Usage: examples/radicale-restart/run.sh [OUT=reports/radicale-restart] [ROUNDS=3] [DURATION=30s] [AT=12s] [USERS=8]
# The table is OUT/report.txt: its fault table and its failures.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-reports/radicale-restart}
ROUNDS=${2:-3}
DURATION=${3:-30s}
AT=${4:-12s}
USERS=${5:-8}
BIN=${LOADMIX_BIN:-target/release/loadmix}
[ -x "$BIN" ] || cargo build --release --locked -q
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
radicale_scratch
"$BIN" run workloads/caldav-sync.yaml \
    --target "radicale=http://127.0.0.1:$PORT" --user loadmix \
    --start "radicale=$RADICALE_START" \
    --ready "radicale=tcp://127.0.0.1:$PORT" \
    --set "users.caldav.count=$USERS" --set run.warmup=2s \
    --rounds "$ROUNDS" --duration "$DURATION" \
    --fault "fault=restart,at=$AT" --quiet \
    --note "Radicale restarted at $AT under $USERS CalDAV users" \
    --out "$OUT" >/dev/null || [ $? -eq 1 ]
awk '/^faults/ {on = 1} on {print} on && /^  detect:/ {exit}' "$OUT/report.txt"
sed -n '/^failures:/,$p' "$OUT/report.txt"
