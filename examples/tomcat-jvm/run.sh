#!/usr/bin/env bash
# The recipe in one command: two Tomcat 10 WebDAV servers that differ only in their JVM's
# heap and collector (setup.sh), compared by loadmix over interleaved, balanced rounds with
# a warm-up round each (a cold JVM is still compiling), each JVM's process watched (CPU,
# memory, and its collections and heap from its perf data), then torn down.
#
# Usage: examples/tomcat-jvm/run.sh [OUT=reports/tomcat-jvm] [ROUNDS=6] [DURATION=20s]
# The report is OUT/compare.txt (and one folder per configuration).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-reports/tomcat-jvm}
ROUNDS=${2:-6}
DURATION=${3:-20s}
export LOADMIX_PASSWORD=${LOADMIX_PASSWORD:-loadmix-recipe-$$}
export JVM_SMALL=${JVM_SMALL:--Xms64m -Xmx64m -XX:+UseSerialGC}
export JVM_LARGE=${JVM_LARGE:--Xms512m -Xmx512m -XX:+UseParallelGC}
BIN=${LOADMIX_BIN:-target/release/loadmix}
[ -x "$BIN" ] || cargo build --release --locked -q
WORK=$(mktemp -d)
trap 'examples/tomcat-jvm/stop.sh "$WORK"; rm -rf "$WORK"' EXIT
examples/tomcat-jvm/setup.sh "$WORK" >/dev/null
# shellcheck disable=SC1091
. "$WORK/targets.env"
# webdav.yaml without think time and with 64 KiB uploads: the JVMs are kept busy and make
# garbage, so their heap and collector are what differs.
"$BIN" run workloads/webdav.yaml \
    --target "small=$URL_SMALL" --target "large=$URL_LARGE" --user loadmix \
    --set think=0ms --set users.dav.mix.put.body.random=64KiB \
    --set run.warmup=2s --set run.warmup_rounds=1 \
    --rounds "$ROUNDS" --duration "$DURATION" \
    --monitor-process "$PID_SMALL@small" --monitor-process "$PID_LARGE@large" \
    --note "Tomcat 10 WebDAV, small heap + SerialGC vs large heap + ParallelGC" \
    --label "jvm=$JVM_SMALL@small" --label "jvm=$JVM_LARGE@large" \
    --quiet --out "$OUT" >/dev/null
cat "$OUT/compare.txt"
