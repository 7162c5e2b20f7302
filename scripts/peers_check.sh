#!/usr/bin/env bash
# Runs workloads/caldav-sync.yaml and caldav-clients.yaml (behaviour models) against two
# real CalDAV servers, Radicale and Xandikos
# (PyPI, venvs under .tools/), started here on loopback. Fails (never skips) when they cannot
# be installed or started, when any operation fails, or when the mix is implausible.
set -euo pipefail
cd "$(dirname "$0")/.."

for p in radicale xandikos; do
    if [ ! -x ".tools/venv-$p/bin/$p" ]; then
        echo "installing $p into .tools/venv-$p"
        python3 -m venv ".tools/venv-$p"
        ".tools/venv-$p/bin/pip" install --quiet --disable-pip-version-check "$p"
    fi
done
BIN=${CARGO_TARGET_DIR:-target}/debug/loadmix
[ -x "$BIN" ] || cargo build --locked

WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
# shellcheck source=scripts/lib/ports.sh
. scripts/lib/ports.sh

RPORT=$(free_port)
cat >"$WORK/radicale.conf" <<CONF
[server]
hosts = 127.0.0.1:$RPORT
[auth]
type = none
[storage]
filesystem_folder = $WORK/radicale-data
[logging]
level = warning
CONF
.tools/venv-radicale/bin/radicale -C "$WORK/radicale.conf" >"$WORK/radicale.log" 2>&1 &
PIDS+=($!)
XPORT=$(free_port)
.tools/venv-xandikos/bin/xandikos serve -d "$WORK/xandikos-data" --defaults -l 127.0.0.1 -p "$XPORT" >"$WORK/xandikos.log" 2>&1 &
PIDS+=($!)
wait_port "$RPORT" radicale "$WORK/radicale.log"
wait_port "$XPORT" xandikos "$WORK/xandikos.log"

for peer in "radicale $RPORT" "xandikos $XPORT"; do
    set -- $peer
    echo "== caldav-sync.yaml against $1"
    # Only the server's URL and a user name: discovery finds the rest (RFC 6764).
    "$BIN" run workloads/caldav-sync.yaml --target "http://127.0.0.1:$2" --user loadmix \
        --duration 5s --rounds 1 --quiet \
        --out "$WORK/$1" >"$WORK/$1.txt" || { cat "$WORK/$1.txt"; echo "loadmix failed against $1"; exit 1; }
    python3 - "$WORK/$1/run.json" "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
peer = sys.argv[2]
ops = {o["op"]: o for o in r["summary"]["ops"]}
total = r["summary"]["total"]
problems = []
if total["failures"]:
    problems.append(f"{total['failures']} failures: {r['failures'][:3]}")
for name in ["caldav.sync_collection", "caldav.time_range_report", "caldav.put_event", "caldav.get_event",
             "caldav.multiget", "caldav.propfind", "caldav.create_calendar"]:
    if ops.get(name, {}).get("requests", 0) == 0:
        problems.append(f"{name} never ran")
req = {k: v["requests"] for k, v in ops.items()}
if max(req, key=req.get) != "caldav.sync_collection":
    problems.append(f"sync_collection should dominate the mix: {req}")
if problems:
    print(f"{peer}: " + "; ".join(problems)); sys.exit(1)
print(f"{peer}: {total['requests']} requests, 0 failures, mix {req}")
PY
done

# The behaviour models of workloads/caldav-clients.yaml against the same servers: every
# session started ends or is cut, every operation its behaviours reach ran, nothing failed.
for peer in "radicale $RPORT" "xandikos $XPORT"; do
    set -- $peer
    echo "== caldav-clients.yaml against $1"
    "$BIN" run workloads/caldav-clients.yaml --target "http://127.0.0.1:$2" --user loadmix \
        --duration 5s --rounds 1 --quiet \
        --out "$WORK/clients-$1" >"$WORK/clients-$1.txt" ||
        { cat "$WORK/clients-$1.txt"; echo "loadmix failed against $1"; exit 1; }
    python3 - "$WORK/clients-$1/run.json" "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
peer = sys.argv[2]
total = r["summary"]["total"]
ops = {o["op"]: o["requests"] for o in r["summary"]["ops"]}
problems = []
if total["failures"]:
    problems.append(f"{total['failures']} failures: {r['failures'][:3]}")
for name in ["poller.propfind", "poller.sync_collection", "editor.time_range_report",
             "editor.put_event", "editor.get_event"]:
    if ops.get(name, 0) == 0:
        problems.append(f"{name} never ran")
sessions = {}
for c in r["rounds"][0].get("sessions", []):
    for b in c["behaviours"]:
        ended = b["exited"] + b["max_ops"] + b["dead_ends"]
        if ended + b["cut"] != b["started"]:
            problems.append(f"{c['class']}.{b['behaviour']}: {b}")
        sessions[f"{c['class']}.{b['behaviour']}"] = (b["started"], ended)
for name in ["poller.poll", "editor.planner"]:
    if sessions.get(name, (0, 0))[1] == 0:
        problems.append(f"no session of {name} ended: {sessions}")
if problems:
    print(f"{peer}: " + "; ".join(problems)); sys.exit(1)
print(f"{peer}: {total['requests']} requests, 0 failures, sessions (started, ended) {sessions}")
PY
done

# `loadmix new` against Radicale: it finds CalDAV (and not Cosmo's protocols), and the
# starter it writes runs there with no failure.
echo "== loadmix new against radicale"
"$BIN" new --target "http://127.0.0.1:$RPORT" --user loadmix --quiet -o "$WORK/starter-radicale.yaml"
grep -q "class: caldav" "$WORK/starter-radicale.yaml" || { cat "$WORK/starter-radicale.yaml"; echo "no CalDAV class"; exit 1; }
"$BIN" run "$WORK/starter-radicale.yaml" --user loadmix --duration 4s --rounds 1 --quiet \
    --out "$WORK/starter-radicale" >/dev/null
python3 - "$WORK/starter-radicale/run.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["summary"]["total"]
assert t["failures"] == 0 and t["requests"] > 0, (t, r["failures"][:3])
print(f"radicale: the starter of loadmix new ran {t['requests']} operations, 0 failed")
PY
