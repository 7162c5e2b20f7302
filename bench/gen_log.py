#!/usr/bin/env python3
"""Write a Combined Log Format access log of about N lines (default 1,000,000) to stdout,
seeded and in time order: sessions of CalDAV clients (PROPFIND, REPORT, now and then a PUT
or GET of an event) and of web visitors (pages, items, searches, static files), each a few
requests seconds apart, arriving over the log's span; each line with Apache's %D (µs) at
the end. Used by bench/infer.sh.

Usage: gen_log.py [LINES] [SEED]
"""
import random
import sys

lines = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 1)
START = 1_764_633_600  # 2026-12-02T00:00:00Z
SPAN = max(3600, lines // 50)  # about 50 requests a second
agents = ['Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0',
          'DAVx5/4.4 (2024/06/01; dav4jvm; okhttp/4.12.0) Android/14',
          'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5) AppleWebKit/605.1.15 Safari/605.1.15']
events = []
n = 0
while n < lines:
    t = START + rng.uniform(0, SPAN)
    u = rng.randrange(5_000)
    ip = f"10.{u // 250 % 256}.{u % 250}.{rng.randrange(1, 3)}"
    dav = rng.random() < 0.5
    k = 1 + int(rng.expovariate(1 / 5))
    for _ in range(k):
        if dav:
            cal = f"/dav/user{u}/calendar/"
            req, status, size = rng.choice([
                (f"PROPFIND {cal}", 207, 900), (f"REPORT {cal}", 207, 2400),
                (f"PUT {cal}{rng.getrandbits(64):016x}.ics", 201, 0),
                (f"GET {cal}{rng.getrandbits(64):016x}.ics", 200, 700)])
            who, agent = f"user{u}", agents[1]
        else:
            req, status, size = rng.choice([
                (f"GET /item/{rng.randrange(100000)}", 200, 5123),
                (f"GET /item/{rng.randrange(100000)}/edit?tab=2", 200, 3311),
                (f"POST /item/{rng.randrange(100000)}", 303, 0),
                ("GET /static/app.css", 200, 18211), ("GET /", 200, 9120),
                (f"GET /search?q={rng.getrandbits(32):x}&page={rng.randrange(9)}", 200, 7311)])
            who, agent = "-", agents[u % 2 * 2]
        events.append((int(t), ip, who, req, status, size, agent, rng.randrange(200, 90000)))
        n += 1
        t += rng.expovariate(1 / 8)
events.sort(key=lambda e: e[0])
MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
out = sys.stdout
w = []
import time
for (sec, ip, who, req, status, size, agent, took) in events[:lines]:
    g = time.gmtime(sec)
    stamp = f"{g.tm_mday:02d}/{MONTHS[g.tm_mon - 1]}/{g.tm_year}:{g.tm_hour:02d}:{g.tm_min:02d}:{g.tm_sec:02d} +0000"
    w.append(f'{ip} - {who} [{stamp}] "{req} HTTP/1.1" {status} {size} "-" "{agent}" {took}\n')
    if len(w) >= 10000:
        out.write("".join(w))
        w.clear()
out.write("".join(w))
