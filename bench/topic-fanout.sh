#!/usr/bin/env bash
# What one message to a topic with many durable subscribers costs the embedded broker on
# its SQLite store, and what it costs the HTTP side meanwhile: N durable subscriptions
# (64 to a connection, as a broker allows), then one receipted SEND to the topic while a
# client asks /metrics every 5 ms; the SEND's time to its receipt and the slowest
# /metrics answer during it.
# Usage: bench/topic-fanout.sh [SUBSCRIBERS=20000]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20000}
# shellcheck source=bench/lib/serve.sh
. bench/lib/serve.sh
serve_embedded --store "sqlite:$WORK/broker.db"
python3 - "$STOMP" "$HTTP" "$N" <<'PY'
import socket, sys, threading, time, urllib.request
stomp, http, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])

def connect(client):
    s = socket.create_connection(("127.0.0.1", stomp))
    s.sendall(f"CONNECT\naccept-version:1.2\nclient-id:{client}\n\n\0".encode())
    until(s, b"CONNECTED")
    return s

def until(s, token):
    got = b""
    while token not in got:
        d = s.recv(65536)
        if not d:
            sys.exit("the broker closed the connection")
        got += d

for first in range(0, n, 64):
    s = connect(f"c{first}")
    frames = "".join(
        f"SUBSCRIBE\nid:{i}\ndestination:/topic/fan\nactivemq.subscriptionName:s{i}\n\n\0"
        for i in range(first, min(first + 64, n))
    )
    s.sendall((frames + "DISCONNECT\nreceipt:bye\n\n\0").encode())
    until(s, b"receipt-id:bye")
    s.close()

worst, stop = [0.0], threading.Event()
def probe():
    while not stop.is_set():
        t = time.perf_counter()
        urllib.request.urlopen(f"http://127.0.0.1:{http}/cosmo/_loadmix/metrics").read()
        worst[0] = max(worst[0], time.perf_counter() - t)
        time.sleep(0.005)
watcher = threading.Thread(target=probe)
watcher.start()
time.sleep(0.3)
s = connect("publisher")
t = time.perf_counter()
s.sendall(b"SEND\ndestination:/topic/fan\nreceipt:r\n\nhello\0")
until(s, b"receipt-id:r")
took = time.perf_counter() - t
time.sleep(0.3)
stop.set()
watcher.join()
print(f"{n} subscribers: SEND to receipt {took * 1000:.1f} ms, slowest /metrics meanwhile {worst[0] * 1000:.1f} ms")
PY
