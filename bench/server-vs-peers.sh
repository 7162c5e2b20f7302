#!/usr/bin/env bash
# The embedded server (memory and SQLite stores) against Radicale and Xandikos on the same
# CalDAV requests, measured with wrk, side by side in one run; prints req/s and ratios.
#   1. GET one event;
#   2. calendar-query REPORT over one month of a 500-event calendar.
# Installs wrk (Debian) and the two servers (PyPI, venvs under .tools/) when missing.
# Usage: bench/server-vs-peers.sh [SECONDS=10] [CONNECTIONS=8]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-10}
CONNS=${2:-8}
EVENTS=500

command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
for p in radicale xandikos; do
    if [ ! -x ".tools/venv-$p/bin/$p" ]; then
        python3 -m venv ".tools/venv-$p"
        ".tools/venv-$p/bin/pip" install --quiet --disable-pip-version-check "$p"
    fi
done
cargo build --release --locked -q

WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh

# Ports: loadmix memory 18180, loadmix sqlite 18181, Radicale 18182, Xandikos 18183.
target/release/loadmix serve --bind 127.0.0.1:18180 --store memory --no-auth >"$WORK/mem.log" 2>&1 & PIDS+=($!)
target/release/loadmix serve --bind 127.0.0.1:18181 --store "sqlite:$WORK/bench.db" --no-auth >"$WORK/sql.log" 2>&1 & PIDS+=($!)
cat >"$WORK/radicale.conf" <<CONF
[server]
hosts = 127.0.0.1:18182
[auth]
type = none
[storage]
filesystem_folder = $WORK/radicale
[logging]
level = warning
CONF
.tools/venv-radicale/bin/radicale -C "$WORK/radicale.conf" >"$WORK/radicale.log" 2>&1 & PIDS+=($!)
.tools/venv-xandikos/bin/xandikos serve -d "$WORK/xandikos" --defaults -l 127.0.0.1 -p 18183 >"$WORK/xandikos.log" 2>&1 & PIDS+=($!)
for p in 18180 18181 18182 18183; do wait_port $p; done

declare -A CAL=(
    [loadmix-memory]=http://127.0.0.1:18180/cosmo/dav/bench/cal/
    [loadmix-sqlite]=http://127.0.0.1:18181/cosmo/dav/bench/cal/
    [radicale]=http://127.0.0.1:18182/bench/cal/
    [xandikos]=http://127.0.0.1:18183/user/calendars/calendar/
)
NAMES=(loadmix-memory loadmix-sqlite radicale xandikos)
declare -A EVENT
for n in "${NAMES[@]}"; do
    mk=--mkcalendar; [ "$n" = xandikos ] && mk=""
    echo "populating $n with $EVENTS events" >&2
    EVENT[$n]=$(python3 bench/populate.py "${CAL[$n]}" $EVENTS $mk)
done

rate() { wrk -t1 -c"$CONNS" -d"${SECS}s" --timeout 10s "$@" 2>"$WORK/wrk.err" | awk '/Requests\/sec/ {print $2}'; }
declare -A GET REPORT
for n in "${NAMES[@]}"; do
    GET[$n]=$(rate "${EVENT[$n]}")
    REPORT[$n]=$(rate -s bench/report.lua "${CAL[$n]}")
    if [ -s "$WORK/wrk.err" ]; then cat "$WORK/wrk.err" >&2; fi
done

echo
echo "wrk -t1 -c$CONNS -d${SECS}s, $(nproc) cores shared by server and wrk, $(date -u +%F)"
printf "%-16s %14s %18s\n" server "GET event/s" "month REPORT/s"
for n in "${NAMES[@]}"; do printf "%-16s %14s %18s\n" "$n" "${GET[$n]}" "${REPORT[$n]}"; done
echo
ratio() { python3 -c "print(f'{float($1)/float($2):.1f}x')"; }
for s in loadmix-memory loadmix-sqlite; do
    for p in xandikos radicale; do
        printf "%-16s vs %-9s GET %7s   REPORT %7s\n" "$s" "$p" "$(ratio "${GET[$s]}" "${GET[$p]}")" "$(ratio "${REPORT[$s]}" "${REPORT[$p]}")"
    done
done
