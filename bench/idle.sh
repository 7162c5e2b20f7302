#!/usr/bin/env bash
# Memory per idle user: STOMP consumers subscribed and waiting for a message that does not
# come, against HTTP users that made one request on a kept connection and then think (the
# think before each request is 8 s: all of them send theirs 8 s in, then wait), both
# against one `loadmix serve` (memory store, STOMP broker) in a process of its own. Each is
# run with a few users and with N, and the generator's resident memory while they wait
# (VmRSS, mid-round) gives what each added user costs: (RSS at N - RSS at the few) /
# (N - the few).
# Usage: bench/idle.sh [USERS=10000]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-10000}
SECS=30
FEW=100
BIN=${LOADMIX_BIN:-target/release/loadmix}
[ -x "$BIN" ] || cargo build --release --locked -q
ulimit -n 65536 2>/dev/null || true
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
HTTP=$(free_port)
STOMP=$(free_port)
"$BIN" serve --bind "127.0.0.1:$HTTP" --stomp-bind "127.0.0.1:$STOMP" --no-auth >"$WORK/serve.log" 2>&1 &
PIDS+=($!)
wait_port "$HTTP" && wait_port "$STOMP"

cat >"$WORK/stomp.yaml" <<YAML
name: idle-stomp
run: { duration: ${SECS}s, rounds: 1, timeout: 60s }
users:
  - class: consumer
    protocol: stomp
    count: 100
    params: { subscribe: "/queue/idle-{run_id}", prefetch: 1 }
    mix:
      receive: { weight: 1, params: { timeout: 60s } }
YAML
cat >"$WORK/http.yaml" <<YAML
name: idle-http
run: { duration: ${SECS}s, rounds: 1, timeout: 60s }
connection: keep_alive
users:
  - class: reader
    protocol: http
    count: 100
    think: 8s
    mix:
      poll: { weight: 1, method: GET, path: "/cosmo/queue/idle", expect: [200, 204] }
YAML
rss() { # WORKLOAD TARGET CLASS USERS -> resident KiB while the users are idle
    "$BIN" run "$1" --target "$2" --set "users.$3.count=$4" \
        --quiet --no-preflight --keep-data --out "$WORK/run" >/dev/null &
    local pid=$! kib
    # Every user set up and waiting (the HTTP users' first request made, 8 s in).
    sleep 11
    kib=$(awk "/^VmRSS:/ {print \$2}" "/proc/$pid/status")
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" || true
    echo "$kib"
}
per_user() { # WORKLOAD TARGET CLASS -> KiB per added user
    local a b
    a=$(rss "$1" "$2" "$3" "$FEW")
    b=$(rss "$1" "$2" "$3" "$N")
    python3 -c "print(f'{($b - $a) / ($N - $FEW):.1f}')"
}
S=$(per_user "$WORK/stomp.yaml" "stomp://127.0.0.1:$STOMP" consumer)
H=$(per_user "$WORK/http.yaml" "http://127.0.0.1:$HTTP" reader)
echo "memory per idle user at $N users: STOMP consumer ${S} KiB, HTTP user ${H} KiB, ratio $(python3 -c "print(f'{$S / $H:.2f}')")x"
