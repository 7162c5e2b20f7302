#!/usr/bin/env bash
# What a SEND costs the embedded broker's SQLite store as its queue grows: receipted 64 B
# SENDs to one queue that nothing consumes, written 500 at a time with a receipt on the
# last (the broker handles a connection's frames in order), and the rate over each
# 20,000. A send whose cost grew with the queue's depth shows as a falling rate.
# Usage: bench/broker-depth.sh [MESSAGES=120000]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-120000}
# shellcheck source=bench/lib/serve.sh
. bench/lib/serve.sh
serve_embedded --store "sqlite:$WORK/broker.db"
python3 - "$STOMP" "$N" <<'PY'
import socket, sys, time
port, total = int(sys.argv[1]), int(sys.argv[2])
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"CONNECT\naccept-version:1.2\n\n\0")
buf = b""
def until(token):
    global buf
    while token not in buf:
        d = s.recv(65536)
        if not d:
            sys.exit("the broker closed the connection")
        buf += d
    buf = buf[buf.index(token) + len(token):]
until(b"CONNECTED")
sent, mark = 0, time.time()
while sent < total:
    frames = b"".join(
        b"SEND\ndestination:/queue/deep\n"
        + (b"receipt:r%d\n" % (sent + i) if i == 499 else b"")
        + b"\n" + b"x" * 64 + b"\0"
        for i in range(500))
    s.sendall(frames)
    sent += 500
    until(b"receipt-id:r%d\n" % (sent - 1))
    if sent % 20000 == 0:
        now = time.time()
        print(f"{sent - 20000:>7}-{sent:<7} {20000 / (now - mark):>8.0f} sends/s", flush=True)
        mark = now
PY
