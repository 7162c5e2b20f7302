#!/usr/bin/env bash
# Stops the Tomcats setup.sh WORKDIR started.
set -uo pipefail
WORK=${1:?usage: stop.sh WORKDIR}
for variant in small large; do
    P="$WORK/$variant/tomcat.pid"
    if [ -f "$P" ]; then
        pid=$(cat "$P")
        kill "$pid" 2>/dev/null
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null
    fi
done
exit 0
