#!/usr/bin/env python3
"""A real, independent CalDAV client against loadmix's embedded server.

Uses the `caldav` library from PyPI: discover the calendar home, create a calendar, save
events (one recurring), search by time range (the recurring one must be found in a later
week), fetch, delete, and check the deletions. Exits non-zero with a message on the first
thing that does not work.

Usage: caldav_client_check.py BASE ADMIN:PASSWORD   (BASE like http://127.0.0.1:8080/cosmo)
It waits for the server, creates its own account through CMP as the admin, then checks.
"""
import base64
import socket
import sys
import time
import urllib.parse
import urllib.request
import uuid
from datetime import datetime, timezone

import caldav


def wait_for(base):
    u = urllib.parse.urlsplit(base)
    for _ in range(100):
        try:
            socket.create_connection((u.hostname, u.port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing answers at {base}")


def create_account(base, admin, user, password):
    body = (
        '<user xmlns="http://osafoundation.org/cosmo/CMP">'
        f"<username>{user}</username><password>{password}</password>"
        "<firstName>C</firstName><lastName>K</lastName><email>c@k</email></user>"
    ).encode()
    req = urllib.request.Request(f"{base}/cmp/user/{user}", data=body, method="PUT")
    req.add_header("Content-Type", "text/xml")
    req.add_header("Authorization", "Basic " + base64.b64encode(admin.encode()).decode())
    with urllib.request.urlopen(req) as r:
        if r.status != 201:
            raise RuntimeError(f"account creation answered {r.status}")


def main():
    base, admin = sys.argv[1].rstrip("/"), sys.argv[2]
    wait_for(base)
    user, password = "checker", "pw"
    create_account(base, admin, user, password)
    url = f"{base}/dav/"
    client = caldav.DAVClient(url=url, username=user, password=password)
    principal = client.principal()
    home = principal.calendar_home_set
    print(f"principal {principal.url} home {home.url}")
    name = f"check-{uuid.uuid4().hex[:8]}"
    cal = principal.make_calendar(name=name)
    assert any(c.url == cal.url for c in principal.calendars()), "new calendar not listed"
    print(f"calendar {cal.url}")

    def ics(uid, start, summary, rrule=None):
        lines = [
            "BEGIN:VCALENDAR", "VERSION:2.0", "PRODID:-//loadmix check//EN", "BEGIN:VEVENT",
            f"UID:{uid}", "DTSTAMP:20070712T182145Z", f"DTSTART:{start}", "DURATION:PT1H",
            f"SUMMARY:{summary}",
        ]
        if rrule:
            lines.append(f"RRULE:{rrule}")
        lines += ["END:VEVENT", "END:VCALENDAR", ""]
        return "\r\n".join(lines)

    once = cal.save_event(ics("once-" + name, "20070521T100000Z", "Planning"))
    weekly = cal.save_event(ics("weekly-" + name, "20070522T090000Z", "Standup", "FREQ=WEEKLY"))
    cal.save_event(ics("other-" + name, "20070801T090000Z", "Holiday"))

    def search(start, end):
        found = cal.search(start=start, end=end, event=True, expand=False)
        return sorted(str(e.icalendar_component["SUMMARY"]) for e in found)

    week = search(datetime(2007, 5, 21, tzinfo=timezone.utc), datetime(2007, 5, 28, tzinfo=timezone.utc))
    assert week == ["Planning", "Standup"], f"week of May 21: {week}"
    later = search(datetime(2007, 6, 18, tzinfo=timezone.utc), datetime(2007, 6, 25, tzinfo=timezone.utc))
    assert later == ["Standup"], f"recurrence not expanded in the week of June 18: {later}"
    print(f"time-range search ok: {week}, {later}")

    fetched = cal.event_by_uid("once-" + name)
    assert "Planning" in fetched.data, "fetched event lacks its summary"
    once.delete()
    weekly.delete()
    left = [str(e.icalendar_component["SUMMARY"]) for e in cal.events()]
    assert left == ["Holiday"], f"after deleting two events: {left}"
    cal.delete()
    print("caldav client check passed")


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # report any failure as one clear line
        print(f"caldav client check FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
