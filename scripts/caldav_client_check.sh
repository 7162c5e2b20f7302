#!/usr/bin/env bash
# Installs the Python `caldav` client library and `caldav-server-tester` in a venv under
# .tools/ and runs, against `loadmix serve` once per store (memory, SQLite),
# scripts/caldav_client_check.py and the tester's scheduling (RFC 6638) checks with two
# accounts, every one of which must find full support.
# Fails (not skips) when anything cannot be installed or started.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${CARGO_TARGET_DIR:-target}/debug/loadmix
[ -x "$BIN" ] || cargo build --locked
WORK=$(mktemp -d)
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
caldav_venv

# An account through CMP, as the admin.
make_account() {
    local base=$1 user=$2
    curl -sf -o /dev/null -u root:secret -X PUT -H 'Content-Type: text/xml' \
        --data "<user xmlns=\"http://osafoundation.org/cosmo/CMP\"><username>$user</username><password>pw</password><firstName>S</firstName><lastName>T</lastName><email>$user@k</email></user>" \
        "$base/cmp/user/$user"
}

# The tester's RFC 6638 checks, an organizer and an attendee account: each of the nine
# scheduling features it reports must be found fully supported.
scheduling_checks() {
    local base=$1 found
    make_account "$base" organizer && make_account "$base" attendee
    scheduling_features "$base/dav/" organizer attendee pw "$WORK/scheduling" || return 1
    cat "$WORK/scheduling"
    found=$(cut -f2 "$WORK/scheduling" | sort | uniq -c | tr -s ' ')
    if [ "$found" != " 9 full" ]; then
        echo "caldav-server-tester: scheduling features found:$found (9 full expected)"
        cat "$WORK/scheduling.log"
        return 1
    fi
}

for STORE in memory "sqlite:$WORK/check.db"; do
    PORT=$(free_port)
    "$BIN" serve --bind "127.0.0.1:$PORT" --store "$STORE" --admin-password secret >"$WORK/serve.log" 2>&1 &
    PID=$!
    echo "== caldav client against the $STORE store"
    "$CALDAV_VENV/bin/python" scripts/caldav_client_check.py "http://127.0.0.1:$PORT/cosmo" root:secret \
        || { cat "$WORK/serve.log"; exit 1; }
    echo "== caldav-server-tester's scheduling checks against the $STORE store"
    scheduling_checks "http://127.0.0.1:$PORT/cosmo" || { cat "$WORK/serve.log"; exit 1; }
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
done
