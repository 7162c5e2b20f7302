#!/usr/bin/env bash
# Cyrus IMAP (Debian's cyrus-imapd with cyrus-caldav: Fastmail's server, CalDAV and
# CardDAV) as a staging server: a scratch instance on loopback made by
# examples/cyrus/setup.sh (which installs the packages when they are missing), handed to
# the Rust checks of tests/real/cyrus.rs: workloads/caldav-sync.yaml and carddav-sync.yaml
# with only the URL and a user, every request held against Cyrus's own telemetry log of
# that user; then its recipe, examples/cyrus/run.sh, briefly. Fails, never skips, when
# Cyrus cannot be installed or started.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh

BIN=${CARGO_TARGET_DIR:-target}/debug/loadmix
[ -x "$BIN" ] || cargo build --locked
WORK=$(mktemp -d)
cleanup() {
    if [ -s "$WORK/cyrus/conf/master.pid" ]; then
        kill "$(cat "$WORK/cyrus/conf/master.pid")" 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
# The cyrus user must reach its folder.
chmod 755 "$WORK"
HTTP_PORT=$(free_port)
IMAP_PORT=$(free_port)
examples/cyrus/setup.sh "$WORK/cyrus" "$HTTP_PORT" "$IMAP_PORT" loadmix >"$WORK/setup.log" 2>&1 \
    || { cat "$WORK/setup.log"; echo "Cyrus could not be set up"; exit 1; }
cat "$WORK/setup.log"

export LOADMIX_REAL_CYRUS="http://127.0.0.1:$HTTP_PORT"
export LOADMIX_REAL_CYRUS_PASSWORD_FILE="$WORK/cyrus/password"
export LOADMIX_REAL_CYRUS_LOG="$WORK/cyrus/conf/log/loadmix"
real_checks cyrus::

# The recipe (examples/cyrus/run.sh), briefly: two instances, the spool on disk and on
# tmpfs, compared on address books of 60 contacts.
LOADMIX_BIN="$BIN" examples/cyrus/run.sh "$WORK/recipe" 2 3s 60 >"$WORK/recipe.log" 2>&1 \
    || { cat "$WORK/recipe.log"; echo "examples/cyrus/run.sh failed"; exit 1; }
LOADMIX_REAL_CYRUS_RECIPE="$WORK/recipe" real_checks recipes::cyrus_spool::
