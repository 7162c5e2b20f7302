#!/usr/bin/env bash
# How fast `loadmix infer` reads a log (issue 23), against GoAccess (Debian's goaccess, a
# C log analyser) on the same file: a generated Combined Log Format log of LINES lines
# (default 1,000,000; bench/gen_log.py, seeded), CalDAV clients and web visitors mixed.
# GoAccess parses it into its JSON report; loadmix infers a workload from it, which is
# more: both of its passes (the gaps, then the sessions), the classification, the
# clustering and the fits. Lines per second of the whole command, its CPU and peak RSS;
# runs alternate, RUNS times each (default 3), and the medians and spread are printed.
# The workload inferred from the default log is held to its golden (bench/infer.golden,
# its SHA-256): a change that makes infer faster must not change what it infers.
# Installs goaccess when missing.
# Usage: bench/infer.sh [LINES=1000000] [RUNS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
LINES=${1:-1000000}
RUNS=${2:-3}
command -v goaccess >/dev/null ||
    { apt-get update -qq && apt-get install -y -qq goaccess >/dev/null; }
cargo build --release --locked -q
LM=target/release/loadmix
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
python3 bench/gen_log.py "$LINES" 1 >"$WORK/access.log"
echo "log: $LINES lines, $(du -h "$WORK/access.log" | cut -f1)"
for r in $(seq "$RUNS"); do
    for tool in goaccess loadmix; do
        # Alternate which goes first.
        if [ $((r % 2)) -eq 0 ]; then tool=$([ "$tool" = goaccess ] && echo loadmix || echo goaccess); fi
        case $tool in
        goaccess) cmd=(goaccess "$WORK/access.log" --log-format=COMBINED --no-progress -o "$WORK/ga.json") ;;
        loadmix) cmd=("$LM" infer "$WORK/access.log" -o "$WORK/inferred.yaml") ;;
        esac
        m=$(python3 bench/measure.py /dev/null -- "${cmd[@]}" | tail -1)
        echo "$tool $m" | tee -a "$WORK/runs"
    done
done
python3 - "$WORK/runs" "$LINES" <<'PY'
import json, statistics, sys
lines = int(sys.argv[2])
by = {}
for l in open(sys.argv[1]):
    tool, j = l.split(" ", 1)
    m = json.loads(j)
    assert m["rc"] == 0, l
    by.setdefault(tool, []).append(m)
med = lambda xs: statistics.median(xs)
rate = {}
for tool, ms in by.items():
    r = [lines / m["wall"] for m in ms]
    rate[tool] = med(r)
    print(f"{tool:9} {med(r):>10,.0f} lines/s ({min(r):,.0f}-{max(r):,.0f}), "
          f"CPU {med([m['cpu'] for m in ms]):.2f} s, peak RSS {med([m['maxrss_kib'] for m in ms]) / 1024:.0f} MiB")
print(f"loadmix / goaccess: {rate['loadmix'] / rate['goaccess']:.2f}x lines per second (goal >= 5x, issue 54)")
PY
if [ "$LINES" = 1000000 ]; then
    # The file names the log it came from: the scratch folder's name left out.
    got=$(sed "s#$WORK/##g" "$WORK/inferred.yaml" | sha256sum | cut -d' ' -f1)
    if [ "$got" = "$(cat bench/infer.golden)" ]; then
        echo "workload inferred: the golden's, byte for byte"
    else
        echo "workload inferred: NOT the golden's (sha256 $got)" >&2
        exit 1
    fi
fi
