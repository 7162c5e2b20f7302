#!/usr/bin/env bash
# Stops what setup.sh WORKDIR started and removes its DAViCal configuration files.
set -uo pipefail
WORK=${1:?usage: stop.sh WORKDIR}
PG=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
for variant in on off; do
    D="$WORK/$variant"
    [ -f "$D/apache/httpd.pid" ] && kill "$(cat "$D/apache/httpd.pid")" 2>/dev/null
    [ -f "$D/exporter.pid" ] && kill "$(cat "$D/exporter.pid")" 2>/dev/null
    [ -d "$D/pg" ] && su postgres -c "$PG/pg_ctl -D $D/pg -m fast stop" >/dev/null 2>&1
done
[ -f "$WORK/conf-files" ] && xargs rm -f <"$WORK/conf-files"
exit 0
