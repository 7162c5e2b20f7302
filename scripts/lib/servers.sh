# What the scripts that start servers share (the checks, recipes and benches): sourced,
# not run.
#   free_port                 a TCP port on 127.0.0.1 that nothing listens on now
#   wait_port PORT [NAME [LOG]]
#                             wait (up to $WAIT_PORT_SECONDS, 60 by default) until
#                             something accepts on PORT; else say so, print the tail of
#                             LOG when given, and fail
#   real_checks FILTER        the Rust checks of tests/real/ whose names hold FILTER,
#                             one at a time (they share the server they are handed
#                             through LOADMIX_REAL_* variables), their figures printed

free_port() {
    local port
    # Below Linux's ephemeral range (32768-60999), so no client socket holds it.
    for _ in $(seq 1 200); do
        port=$((20000 + RANDOM % 12000))
        if ! (: <"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    echo "no free port on 127.0.0.1" >&2
    return 1
}

wait_port() {
    local port=$1 name=${2:-something} log=${3:-}
    local tries=$(( ${WAIT_PORT_SECONDS:-60} * 10 ))
    for _ in $(seq 1 "$tries"); do
        # Connect and close without writing a byte: a server that logs what it reads
        # (nginx logs a stray newline on its TLS port as a 400) sees no request.
        (: <"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "$name did not start on port $port" >&2
    if [ -n "$log" ] && [ -f "$log" ]; then
        tail -30 "$log" >&2
    fi
    return 1
}

real_checks() {
    cargo test --locked --test real -- --ignored --test-threads=1 --nocapture "$1"
}
