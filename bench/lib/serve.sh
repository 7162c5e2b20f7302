# Sourced by the benchmarks that measure `loadmix serve`: the binary (release, built when
# missing), a scratch folder removed at exit with every process listed in PIDS, and
#   serve_embedded [ARGS...]   starts `loadmix serve --no-auth ARGS` on free ports and
#                              waits for both; sets HTTP and STOMP to them.
BIN=${LOADMIX_BIN:-target/release/loadmix}
[ -x "$BIN" ] || cargo build --release --locked -q
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh

serve_embedded() {
    HTTP=$(free_port)
    STOMP=$(free_port)
    "$BIN" serve --bind "127.0.0.1:$HTTP" --stomp-bind "127.0.0.1:$STOMP" --no-auth "$@" \
        >"$WORK/serve.log" 2>&1 &
    PIDS+=($!)
    wait_port "$HTTP" && wait_port "$STOMP"
}
