#!/usr/bin/env bash
# The recipe in one command: two DAViCal servers that differ only in PostgreSQL's
# synchronous_commit (setup.sh), compared by loadmix over interleaved, balanced rounds with
# a warm-up round each, PostgreSQL's and Apache's processes watched, then torn down.
#
# Then the same two servers with teams of calendar users who share calendars and invite
# each other (workloads/caldav-team.yaml): how long a change takes to reach the others.
#
# Usage: examples/davical-postgres/run.sh [OUT=reports/davical-postgres] [ROUNDS=6] [DURATION=20s]
# The reports are OUT/compare.txt and OUT/team/compare.txt (and one folder per
# configuration in each).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-reports/davical-postgres}
ROUNDS=${2:-6}
DURATION=${3:-20s}
export LOADMIX_PASSWORD=${LOADMIX_PASSWORD:-loadmix-recipe-$$}
BIN=${LOADMIX_BIN:-target/release/loadmix}
[ -x "$BIN" ] || cargo build --release --locked -q
WORK=$(mktemp -d)
trap 'examples/davical-postgres/stop.sh "$WORK"; rm -rf "$WORK"' EXIT
examples/davical-postgres/setup.sh "$WORK" >/dev/null
# shellcheck disable=SC1091
. "$WORK/targets.env"
# From each cluster's own exporter: commits and rows inserted (per 1,000 operations), and
# the backends connected (a gauge).
PG_SERIES=pg_stat_database_xact_commit,pg_stat_database_tup_inserted,pg_stat_activity_count
"$BIN" run workloads/caldav-saturate.yaml \
    --target "sync-on=$URL_ON" --target "sync-off=$URL_OFF" --user admin \
    --set users.caldav.count=4 --set run.warmup=2s --set run.warmup_rounds=1 \
    --rounds "$ROUNDS" --duration "$DURATION" \
    --monitor-process postgres --monitor-process apache2 \
    --monitor-prometheus "$METRICS_ON#$PG_SERIES@sync-on" \
    --monitor-prometheus "$METRICS_OFF#$PG_SERIES@sync-off" \
    --note "DAViCal on PostgreSQL, synchronous_commit on vs off" \
    --label postgres.shared_buffers=128MB \
    --quiet --out "$OUT" >/dev/null
cat "$OUT/compare.txt"
# 28 accounts in each database, one per user of the team workload.
for cluster in "$PGSOCK_ON:$PGPORT_ON" "$PGSOCK_OFF:$PGPORT_OFF"; do
    examples/davical-postgres/team-accounts.sh "${cluster%%:*}" "${cluster##*:}" 28 "$WORK/team-accounts"
done
"$BIN" run workloads/caldav-team.yaml \
    --target "sync-on=$URL_ON" --target "sync-off=$URL_OFF" \
    --set accounts.create=existing --set "accounts.file=$WORK/team-accounts" \
    --set run.warmup=2s --set run.warmup_rounds=1 \
    --rounds "$ROUNDS" --duration "$DURATION" \
    --monitor-process postgres --monitor-process apache2 \
    --monitor-prometheus "$METRICS_ON#$PG_SERIES@sync-on" \
    --monitor-prometheus "$METRICS_OFF#$PG_SERIES@sync-off" \
    --note "DAViCal on PostgreSQL, synchronous_commit on vs off, teams that share and invite" \
    --label postgres.shared_buffers=128MB \
    --quiet --out "$OUT/team" >/dev/null
cat "$OUT/team/compare.txt"
