#!/usr/bin/env bash
# Installs the Python `caldav` client library, `caldav-server-tester` and vdirsyncer in a
# venv under .tools/ and runs, against `loadmix serve` once per store (memory, SQLite),
# scripts/caldav_client_check.py, the tester's scheduling (RFC 6638) checks with two
# accounts, every one of which must find full support, and vdirsyncer syncing an address
# book both ways over CardDAV.
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

# vdirsyncer, a CardDAV client people use, syncs a folder of vCards with an address book
# of the embedded server: it discovers the home and makes the book, then every kind of
# change goes across in each direction (made, changed, deleted on either side).
vdirsyncer_check() {
    local base=$1 dir="$WORK/vdirsyncer" v="$CALDAV_VENV/bin/vdirsyncer"
    make_account "$base" syncer
    rm -rf "$dir"; mkdir -p "$dir/local/friends" "$dir/status"
    cat >"$dir/config" <<CONF
[general]
status_path = "$dir/status/"
[pair contacts]
a = "local"
b = "server"
collections = ["from a", "from b"]
conflict_resolution = "a wins"
[storage local]
type = "filesystem"
path = "$dir/local/"
fileext = ".vcf"
[storage server]
type = "carddav"
url = "$base/dav/"
username = "syncer"
password.fetch = ["command", "cat", "$dir/password"]
CONF
    printf pw >"$dir/password"
    export VDIRSYNCER_CONFIG="$dir/config"
    local card='BEGIN:VCARD\r\nVERSION:3.0\r\nUID:%s\r\nFN:%s\r\nN:%s;;;;\r\nEMAIL:%s@example.org\r\nEND:VCARD\r\n'
    # shellcheck disable=SC2059
    for who in ann cyd; do printf "$card" "vd-$who" "$who" "$who" "$who" >"$dir/local/friends/vd-$who.vcf"; done
    yes | "$v" discover contacts >"$dir/log" 2>&1
    "$v" sync >>"$dir/log" 2>&1
    local book="$base/dav/syncer/friends"
    curl -sf -u syncer:pw "$book/vd-ann.vcf" | grep -q "FN:ann" || { echo "vdirsyncer: vd-ann.vcf did not reach the server"; cat "$dir/log"; return 1; }
    # shellcheck disable=SC2059
    printf "$card" srv-bob bob bob bob | curl -sf -o /dev/null -u syncer:pw -X PUT -H 'Content-Type: text/vcard' --data-binary @- "$book/srv-bob.vcf"
    sed -i 's/FN:ann/FN:ann lee/' "$dir/local/friends/vd-ann.vcf"
    rm "$dir/local/friends/vd-cyd.vcf"
    "$v" sync >>"$dir/log" 2>&1
    grep -q "FN:bob" "$dir/local/friends/srv-bob.vcf" || { echo "vdirsyncer: the server's srv-bob did not reach the folder"; cat "$dir/log"; return 1; }
    curl -sf -u syncer:pw "$book/vd-ann.vcf" | grep -q "FN:ann lee" || { echo "vdirsyncer: the change to vd-ann did not reach the server"; cat "$dir/log"; return 1; }
    [ "$(curl -s -o /dev/null -w '%{http_code}' -u syncer:pw "$book/vd-cyd.vcf")" = 404 ] || { echo "vdirsyncer: vd-cyd deleted in the folder is still on the server"; cat "$dir/log"; return 1; }
    curl -sf -o /dev/null -u syncer:pw -X DELETE "$book/srv-bob.vcf"
    "$v" sync >>"$dir/log" 2>&1
    [ ! -e "$dir/local/friends/srv-bob.vcf" ] || { echo "vdirsyncer: srv-bob deleted on the server is still in the folder"; cat "$dir/log"; return 1; }
    echo "vdirsyncer: made, changed and deleted contacts synced both ways"
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
    echo "== vdirsyncer syncs an address book both ways against the $STORE store"
    vdirsyncer_check "http://127.0.0.1:$PORT/cosmo" || { cat "$WORK/serve.log"; exit 1; }
    kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
done
