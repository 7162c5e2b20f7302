#!/usr/bin/env python3
"""Run a command and print, as JSON on the last line: wall seconds, user+system CPU seconds,
and the peak RSS (KiB) of the command and its children. Used by bench/generator.sh.

Usage: measure.py OUTFILE -- COMMAND ARGS...   (the command's stdout goes to OUTFILE)
"""
import json
import resource
import subprocess
import sys
import time

out, cmd = sys.argv[1], sys.argv[sys.argv.index("--") + 1:]
t0 = time.monotonic()
with open(out, "w") as f:
    rc = subprocess.call(cmd, stdout=f, stderr=subprocess.DEVNULL)
wall = time.monotonic() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": rc, "wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "maxrss_kib": ru.ru_maxrss}))
