#!/usr/bin/env bash
# Stops what setup.sh WORKDIR started: the brokers, the delaying proxy, PostgreSQL.
set -uo pipefail
WORK=${1:?usage: stop.sh WORKDIR}
PG=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -f "$WORK/pids" ] && xargs kill <"$WORK/pids" 2>/dev/null
[ -d "$WORK/pg" ] && su postgres -c "$PG/pg_ctl -D $WORK/pg -m fast stop" >/dev/null 2>&1
exit 0
