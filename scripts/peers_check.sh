#!/usr/bin/env bash
# Starts two real CalDAV and CardDAV servers from PyPI, Radicale and Xandikos (venvs under
# .tools/), on loopback without authentication, and hands them to the Rust checks of
# tests/real/peers.rs: workloads/caldav-sync.yaml, caldav-clients.yaml (behaviour models)
# and carddav-sync.yaml against each (Xandikos's own access log against loadmix's count),
# and the starter `loadmix new` writes for Radicale; then examples/radicale-restart briefly
# (Radicale restarted under CalDAV users) and examples/radicale-photos (a sweep of address
# books with photos), both held by tests/real/recipes.rs. Fails, never skips, when
# they cannot be installed or started.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh

pypi_venv radicale
pypi_venv xandikos
BIN=${CARGO_TARGET_DIR:-target}/debug/loadmix
[ -x "$BIN" ] || cargo build --locked

WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

RPORT=$(free_port)
radicale_open_conf "$WORK/radicale.conf" "$RPORT" "$WORK/radicale-data"
.tools/venv-radicale/bin/radicale -C "$WORK/radicale.conf" >"$WORK/radicale.log" 2>&1 &
PIDS+=($!)
XPORT=$(free_port)
.tools/venv-xandikos/bin/xandikos serve -d "$WORK/xandikos-data" --defaults -l 127.0.0.1 -p "$XPORT" >"$WORK/xandikos.log" 2>&1 &
PIDS+=($!)
wait_port "$RPORT" radicale "$WORK/radicale.log"
wait_port "$XPORT" xandikos "$WORK/xandikos.log"

export LOADMIX_REAL_PEER_RADICALE="http://127.0.0.1:$RPORT" LOADMIX_REAL_PEER_XANDIKOS="http://127.0.0.1:$XPORT"
# Xandikos writes its access log (Common Log Format) with the rest of what it says.
export LOADMIX_REAL_PEER_XANDIKOS_LOG="$WORK/xandikos.log"
real_checks peers::
kill "${PIDS[@]}" 2>/dev/null || true
PIDS=()

echo "== Radicale restarted under CalDAV users (examples/radicale-restart, briefly)"
LOADMIX_BIN="$BIN" examples/radicale-restart/run.sh "$WORK/restart" 1 12s 5s 4 >"$WORK/restart.txt"
LOADMIX_REAL_RADICALE_RESTART="$WORK/restart" real_checks recipes::radicale_restart

echo "== Radicale's address books with photos, a size sweep (examples/radicale-photos, briefly)"
LOADMIX_BIN="$BIN" examples/radicale-photos/run.sh "$WORK/photos" 3,6 8s >"$WORK/photos.txt"
LOADMIX_REAL_RADICALE_PHOTOS="$WORK/photos" real_checks recipes::radicale_photos
