#!/usr/bin/env bash
# The two broker studies in one command, against ActiveMQ Classic 5.17 on four stores
# (setup.sh: KahaDB; KahaDB without concurrent store and dispatch; JDBC on a local
# PostgreSQL; JDBC on that PostgreSQL 45 ms away), over STOMP, rounds interleaved across
# the brokers in balanced order, a warm-up round each, every broker's JVM and PostgreSQL
# watched, then torn down:
#   1. the WebLogic grid: 1, 4, 16 and 64 KiB persistent messages with receipts, 4
#      producers x 250 each, a fresh queue per round (jms-persistent.yaml);
#   2. read/write: 10 writers and 10 readers at once, KahaDB with and without concurrent
#      store and dispatch against the local database;
#   3. the ActiveMQ writer sweep: 3, 5, 10, 15, 20 and 25 writers for DURATION per round
#      (broker-threads.yaml), in messages per minute. Write-only: what a round writes is
#      drained after it, untimed, so every round starts on an empty store.
# Usage: examples/activemq-stores/run.sh [OUT=reports/activemq-stores] [ROUNDS=3] [DURATION=10s] [MESSAGES=250] [WRITERS=3,5,10,15,20,25]
# The tables are OUT/grid/sweep.txt, OUT/readwrite/compare.txt and OUT/writers/sweep.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-reports/activemq-stores}
ROUNDS=${2:-3}
DURATION=${3:-10s}
MESSAGES=${4:-250}
WRITERS=${5:-3,5,10,15,20,25}
BIN=${LOADMIX_BIN:-target/release/loadmix}
[ -x "$BIN" ] || cargo build --release --locked -q
WORK=$(mktemp -d)
trap 'examples/activemq-stores/stop.sh "$WORK"; rm -rf "$WORK"' EXIT
examples/activemq-stores/setup.sh "$WORK" >/dev/null
# shellcheck disable=SC1091
. "$WORK/targets.env"
mkdir -p "$OUT"
cp "$WORK/settings.txt" "$OUT/settings.txt"
# Each broker's JVM by its PID, for its own target; PostgreSQL by name, for all.
WATCH=(--monitor-process "$PID_KAHADB@kahadb" --monitor-process "$PID_JDBC@jdbc"
    --monitor-process "$PID_REMOTE@remote" --monitor-process postgres)
COMMON=(--set run.warmup_rounds=1 --rounds "$ROUNDS" --quiet)

echo "== 1. the WebLogic grid: message size x store, 4 producers x $MESSAGES persistent messages"
"$BIN" run workloads/jms-persistent.yaml \
    --target "kahadb=$URL_KAHADB" --target "jdbc=$URL_JDBC" --target "remote=$URL_REMOTE" \
    --sweep users.producer.mix.send.params.size=1KiB,4KiB,16KiB,64KiB \
    --set "run.iterations=$MESSAGES" "${COMMON[@]}" "${WATCH[@]}" \
    --note "ActiveMQ 5.17: KahaDB vs JDBC on local PostgreSQL vs JDBC 45 ms away" \
    --out "$OUT/grid" >/dev/null
cat "$OUT/grid/sweep.txt"

echo "== 2. read/write: 10 writers and 10 readers, concurrent store and dispatch on and off"
"$BIN" run workloads/broker-threads.yaml \
    --target "kahadb=$URL_KAHADB" --target "kahadb-sync=$URL_KAHADB_SYNC" --target "jdbc=$URL_JDBC" \
    --users writer=10,reader=10 \
    --set "run.duration=$DURATION" --set run.warmup=1s "${COMMON[@]}" \
    --monitor-process "$PID_KAHADB@kahadb" --monitor-process "$PID_KAHADB_SYNC@kahadb-sync" \
    --monitor-process "$PID_JDBC@jdbc" --monitor-process postgres \
    --out "$OUT/readwrite" >/dev/null
cat "$OUT/readwrite/compare.txt"

echo "== 3. the ActiveMQ writer sweep: $WRITERS writers, write-only, $DURATION per round"
"$BIN" run workloads/broker-threads.yaml \
    --target "kahadb=$URL_KAHADB" --target "jdbc=$URL_JDBC" \
    --sweep "users.writer.count=$WRITERS" \
    --set "run.duration=$DURATION" --set run.warmup=1s "${COMMON[@]}" \
    --monitor-process "$PID_KAHADB@kahadb" --monitor-process "$PID_JDBC@jdbc" --monitor-process postgres \
    --out "$OUT/writers" >/dev/null
cat "$OUT/writers/sweep.txt"
