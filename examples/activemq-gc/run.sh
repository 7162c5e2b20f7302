#!/usr/bin/env bash
# The Cosmo study's shape (JVMs x databases) on a Java server this machine runs: ActiveMQ
# Classic 5.17 under two garbage collectors (G1, Parallel) x two stores (KahaDB; JDBC on a
# local PostgreSQL), four configurations that loadmix itself starts (--start, each from a
# scratch folder beside its report, its process group watched: CPU, the JVM's collections)
# and stops. One command asks how many persistent 1 KiB messages a second each sustains
# at a service level (workloads/broker-rate.yaml: returning producers with receipts,
# readers taking messages as they come), and what a message costs the server there.
# Usage: examples/activemq-gc/run.sh [OUT=reports/activemq-gc] [STEP=10s] [LEVEL=...] [OPTION...]
# (any further options go to loadmix run, e.g. --set users.writer.arrival.rate=100/s to
# start the search lower)
# The answer is OUT/capacity.txt (and capacity.html, capacity.json).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-reports/activemq-gc}
STEP=${2:-10s}
LEVEL=${3:-sent p99 < 50ms, reader.receive.e2e p99 < 500ms, errors < 1%}
BIN=${LOADMIX_BIN:-target/release/loadmix}
[ -x "$BIN" ] || cargo build --release --locked -q
HERE=$(pwd)/examples/activemq-gc
WORK=$(mktemp -d)
PG=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
trap 'su postgres -c "$PG/pg_ctl -D $WORK/pg -m fast stop" >/dev/null 2>&1; rm -rf "$WORK"' EXIT
"$HERE/prepare.sh" "$WORK" >/dev/null
# shellcheck disable=SC1091
. "$WORK/targets.env"
declare -A GC=([g1]=-XX:+UseG1GC [parallel]=-XX:+UseParallelGC)
CONFIGS=()
for gc in g1 parallel; do
    for store in kahadb jdbc; do
        name="$gc-$store"
        var=PORT_${name^^}
        var=${var//-/_}
        port=${!var}
        CONFIGS+=(--target "$name=stomp://127.0.0.1:$port"
            --start "$name=exec $HERE/broker.sh $WORK/$name"
            --start-env "$name:JAVA_GC=${GC[$gc]}"
            --ready "$name=tcp://127.0.0.1:$port"
            --label "gc=${GC[$gc]}@$name" --label "store=$store@$name")
    done
done
"$BIN" run workloads/broker-rate.yaml --capacity "$LEVEL" "${CONFIGS[@]}" \
    --monitor-process postgres --set "run.duration=$STEP" --set run.warmup_rounds=1 \
    --note "ActiveMQ 5.17, 512 MiB heap: G1 and Parallel GC x KahaDB and JDBC on PostgreSQL 15" \
    --quiet --out "$OUT" "${@:4}" >/dev/null
# The brokers' stores are not part of the report.
rm -rf "$OUT"/*/server/data
cat "$OUT/capacity.txt"
