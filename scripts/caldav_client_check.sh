#!/usr/bin/env bash
# Installs the Python `caldav` client library in a venv under .tools/ and runs
# scripts/caldav_client_check.py against `loadmix serve`, once per store (memory, SQLite).
# Fails (not skips) when anything cannot be installed or started.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.tools/venv-caldav
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import caldav" 2>/dev/null; then
    echo "installing the caldav client library into $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check caldav
fi

BIN=${CARGO_TARGET_DIR:-target}/debug/loadmix
[ -x "$BIN" ] || cargo build --locked
WORK=$(mktemp -d)
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh

for STORE in memory "sqlite:$WORK/check.db"; do
    PORT=$(free_port)
    "$BIN" serve --bind "127.0.0.1:$PORT" --store "$STORE" --admin-password secret >"$WORK/serve.log" 2>&1 &
    PID=$!
    echo "== caldav client against the $STORE store"
    "$VENV/bin/python" scripts/caldav_client_check.py "http://127.0.0.1:$PORT/cosmo" root:secret \
        || { cat "$WORK/serve.log"; exit 1; }
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
done
