#!/usr/bin/env python3
"""Create a calendar of N events on a CalDAV server (for bench/server-vs-peers.sh).

Usage: populate.py CALENDAR_URL N [--mkcalendar]
Events are spread over 2007 (deterministic), 30 or 60 minutes, one in twenty weekly, as the
2007 stress client made them. Prints the href of one event, for the GET benchmark.
"""
import random
import sys
import urllib.request


def request(method, url, body=b"", headers=None):
    req = urllib.request.Request(url, data=body, method=method)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def main():
    cal, n = sys.argv[1].rstrip("/") + "/", int(sys.argv[2])
    if "--mkcalendar" in sys.argv:
        status = request("MKCALENDAR", cal)
        if status == 409:
            # Radicale wants the parent (the user's collection) to exist first.
            parent = cal.rstrip("/").rsplit("/", 1)[0] + "/"
            request("MKCOL", parent)
            status = request("MKCALENDAR", cal)
        if status not in (201, 405):
            sys.exit(f"MKCALENDAR {cal} answered {status}")
    rnd = random.Random(2007)
    first = None
    for i in range(n):
        uid = f"bench-{i:04d}"
        month, day, hour = rnd.randint(1, 12), rnd.randint(1, 28), rnd.randint(1, 22)
        rrule = "RRULE:FREQ=WEEKLY\r\n" if rnd.random() < 0.05 else ""
        ics = (
            "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//loadmix bench//EN\r\nBEGIN:VEVENT\r\n"
            f"UID:{uid}\r\nDTSTAMP:20070712T182145Z\r\nDTSTART:2007{month:02d}{day:02d}T{hour:02d}0000Z\r\n"
            f"DURATION:PT{rnd.choice([30, 60])}M\r\n{rrule}SUMMARY:{'x' * 50}\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
        )
        status = request("PUT", f"{cal}{uid}.ics", ics.encode(), {"Content-Type": "text/calendar"})
        if status not in (201, 204):
            sys.exit(f"PUT {cal}{uid}.ics answered {status}")
        first = first or f"{cal}{uid}.ics"
    print(first)


if __name__ == "__main__":
    main()
