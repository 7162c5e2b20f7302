#!/usr/bin/env bash
# Radicale (PyPI, in .tools/venv-radicale) started by loadmix on loopback from a scratch
# folder, afresh at each point of a sweep of the address book's size; one CardDAV user
# whose contacts carry photos (workload.yaml) syncs, queries and fetches them with a 45 s
# client timeout. Radicale's process is watched, so each point gives its CPU per operation.
# Usage: examples/radicale-photos/run.sh [OUT=reports/radicale-photos] [SIZES=100,200,400] [DURATION=90s]
# The table is OUT/sweep.txt; each point's report (timed_out_for_client by operation) is in
# its folder.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-reports/radicale-photos}
SIZES=${2:-100,200,400}
DURATION=${3:-90s}
BIN=${LOADMIX_BIN:-target/release/loadmix}
[ -x "$BIN" ] || cargo build --release --locked -q
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
radicale_scratch
"$BIN" run examples/radicale-photos/workload.yaml \
    --target "radicale=http://127.0.0.1:$PORT" --user loadmix \
    --start "radicale=$RADICALE_START" \
    --ready "radicale=tcp://127.0.0.1:$PORT" \
    --duration "$DURATION" --sweep "users.book.params.initial_contacts=$SIZES" \
    --note "Radicale, address books with photos" \
    --out "$OUT" >/dev/null || [ $? -eq 1 ]
cat "$OUT/sweep.txt"
