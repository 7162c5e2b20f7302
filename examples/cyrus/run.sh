#!/usr/bin/env bash
# The recipe in one command: two Cyrus IMAP instances (examples/cyrus/setup.sh) that
# differ in one thing, where their mailboxes live: `disk` keeps the spool (every contact's
# message file and the mailbox indexes) on the machine's disk, `tmpfs` in memory
# (/dev/shm). Address book clients (workloads/carddav-sync.yaml) of a large address book
# with photos, 8 users with no think time (the server sets the pace: its capacity),
# compared by loadmix over interleaved, balanced rounds with a
# warm-up round each, each user's book made and filled once per configuration
# (run.keep_state), Cyrus's httpd processes watched for their CPU per operation.
#
# Usage: examples/cyrus/run.sh [OUT=reports/cyrus-spool] [ROUNDS=6] [DURATION=20s] [CONTACTS=1000]
# The report is OUT/compare.txt (and one folder per configuration).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-reports/cyrus-spool}
ROUNDS=${2:-6}
DURATION=${3:-20s}
CONTACTS=${4:-1000}
BIN=${LOADMIX_BIN:-target/release/loadmix}
[ -x "$BIN" ] || cargo build --release --locked -q
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
WORK=$(mktemp -d)
SHM=$(mktemp -d /dev/shm/loadmix-cyrus.XXXXXX)
stop() {
    for c in disk tmpfs; do
        if [ -s "$WORK/$c/conf/master.pid" ]; then
            kill "$(cat "$WORK/$c/conf/master.pid")" 2>/dev/null || true
        fi
    done
    rm -rf "$WORK" "$SHM"
}
trap stop EXIT
chmod 755 "$WORK" "$SHM"
# One password for both, made here, read by loadmix from the environment.
head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$WORK/password"
PORTS=()
for c in disk tmpfs; do
    mkdir -p "$WORK/$c"
    cp "$WORK/password" "$WORK/$c/password"
    http=$(free_port)
    imap=$(free_port)
    PORTS+=("$http")
    spool="$WORK/$c/spool"
    [ "$c" = tmpfs ] && spool="$SHM/spool"
    CYRUS_SPOOL="$spool" examples/cyrus/setup.sh "$WORK/$c" "$http" "$imap" loadmix >"$WORK/$c.log" 2>&1 \
        || { cat "$WORK/$c.log"; echo "Cyrus ($c) could not be set up"; exit 1; }
done
LOADMIX_PASSWORD=$(cat "$WORK/password") "$BIN" run workloads/carddav-sync.yaml \
    --target "disk=http://127.0.0.1:${PORTS[0]}" --target "tmpfs=http://127.0.0.1:${PORTS[1]}" \
    --user loadmix \
    --set "users.book.params.initial_contacts=$CONTACTS" --set run.keep_state=true --set think=0ms \
    --set run.warmup=2s --set run.warmup_rounds=1 \
    --rounds "$ROUNDS" --duration "$DURATION" \
    --monitor-process httpd \
    --note "Cyrus IMAP 3.6, CardDAV: the spool on disk vs on tmpfs, $CONTACTS contacts a book" \
    --quiet --out "$OUT" >/dev/null
cat "$OUT/compare.txt"
