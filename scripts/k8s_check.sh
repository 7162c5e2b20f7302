#!/usr/bin/env bash
# The Kubernetes manifests (deploy/kubernetes), checked without a cluster:
#   1. every manifest validates against Kubernetes' schemas (PyPI's kubernetes-validate,
#      offline, --strict: no unknown field);
#   2. the shard Job's exact container command runs as N local processes, one per index
#      (JOB_COMPLETION_INDEX set, the settings ConfigMap as environment, the workload
#      ConfigMap as the file), against `loadmix serve` in a process of its own; then the
#      merge Job's exact command merges their reports;
#   3. the merged report lists N shards, counts what the server itself counted, request
#      for request, each shard's estimate of the server's clock holds the true offset (0:
#      one machine), and `compare` takes it.
# Installs kubernetes-validate into .tools/venv-k8s when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.tools/venv-k8s
if [ ! -x "$VENV/bin/kubernetes-validate" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check kubernetes-validate
fi
BIN=${CARGO_TARGET_DIR:-target}/debug/loadmix
[ -x "$BIN" ] || cargo build --locked
echo "== 1. manifests against Kubernetes' schemas"
"$VENV/bin/kubernetes-validate" --strict --quiet deploy/kubernetes/*.yaml
echo "   $(ls deploy/kubernetes/*.yaml | wc -l) files valid"

WORK=$(mktemp -d)
SERVE=
cleanup() { [ -n "$SERVE" ] && kill "$SERVE" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
PORT=$("$VENV/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN" serve --bind "127.0.0.1:$PORT" --no-auth >"$WORK/serve.log" 2>&1 &
SERVE=$!
for _ in $(seq 1 100); do
    curl -sf "http://127.0.0.1:$PORT/cosmo/_loadmix/metrics" >/dev/null && break
    sleep 0.1
done
# The manifests' commands, files and settings, as the pods would have them; only the
# paths inside the container and the target are mapped onto this machine.
"$VENV/bin/python" - "$WORK" "http://127.0.0.1:$PORT/cosmo" <<'PY'
import datetime, json, os, sys, yaml
work, target = sys.argv[1:]
docs = {}
for f in ["configmap", "job-shards", "job-merge"]:
    for d in yaml.safe_load_all(open(f"deploy/kubernetes/{f}.yaml")):
        docs[(d["kind"], d["metadata"]["name"])] = d
os.makedirs(f"{work}/etc", exist_ok=True)
open(f"{work}/etc/workload.yaml", "w").write(docs[("ConfigMap", "loadmix-workload")]["data"]["workload.yaml"])
settings = dict(docs[("ConfigMap", "loadmix-settings")]["data"])
settings["TARGET"] = target
# Shards on one machine cannot share a port: each takes a free one, and none lingers.
settings["METRICS_ADDR"] = "127.0.0.1:0"
settings["METRICS_LINGER"] = "0s"
start = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=5)
settings["START_AT"] = start.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
shards = docs[("Job", "loadmix-shards")]["spec"]
if not (shards["completions"] == shards["parallelism"] == int(settings["SHARDS"])):
    sys.exit(f"the shard Job's completions/parallelism {shards['completions']}/{shards['parallelism']} differ from SHARDS {settings['SHARDS']}")
def command(job):
    c = docs[("Job", job)]["spec"]["template"]["spec"]["containers"][0]
    assert c["command"] == ["/bin/sh", "-c"], c["command"]
    return c["args"][0].replace("/etc/loadmix/", f"{work}/etc/").replace("/reports/", f"{work}/reports/")
# The PodMonitor (a CRD, so not in the schemas above) selects the shard pods and names
# their metrics port.
pm = yaml.safe_load(open("deploy/kubernetes/monitoring/podmonitor.yaml"))
tmpl = shards["template"]
want = pm["spec"]["selector"]["matchLabels"]
if any(tmpl["metadata"]["labels"].get(k) != v for k, v in want.items()):
    sys.exit(f"the PodMonitor selects {want}, not the shard pods' labels {tmpl['metadata']['labels']}")
ports = {p["name"]: p["containerPort"] for p in tmpl["spec"]["containers"][0].get("ports", [])}
for ep in pm["spec"]["podMetricsEndpoints"]:
    if ep["port"] not in ports:
        sys.exit(f"the PodMonitor scrapes port {ep['port']!r}; the shard container has {sorted(ports)}")
ann = tmpl["metadata"].get("annotations", {})
if ann.get("prometheus.io/port") != str(ports.get("metrics")):
    sys.exit(f"the scrape annotation's port {ann.get('prometheus.io/port')} is not the metrics port {ports.get('metrics')}")
json.dump({"env": settings, "shard": command("loadmix-shards"), "merge": command("loadmix-merge")},
          open(f"{work}/plan.json", "w"))
PY
count() { curl -sf "http://127.0.0.1:$PORT/cosmo/_loadmix/metrics" | awk '/^loadmix_server_requests_total/ {s += $2} END {print s + 0}'; }
BEFORE=$(count)
plan() { "$VENV/bin/python" -c "import json,sys; print(json.load(open('$WORK/plan.json'))$1)"; }
N=$(plan "['env']['SHARDS']")
ENVS=$("$VENV/bin/python" -c "import json,shlex; print(' '.join(f'{k}={shlex.quote(v)}' for k, v in json.load(open('$WORK/plan.json'))['env'].items()))")
echo "== 2. the shard Job's command as $N local processes, then the merge Job's"
BINDIR=$(cd "$(dirname "$BIN")" && pwd)
PIDS=()
for i in $(seq 0 $((N - 1))); do
    env PATH="$BINDIR:$PATH" JOB_COMPLETION_INDEX="$i" $ENVS sh -c "$(plan "['shard']")" >"$WORK/shard-$i.log" 2>&1 &
    PIDS+=($!)
done
for i in "${!PIDS[@]}"; do
    wait "${PIDS[$i]}" || { cat "$WORK/shard-$i.log"; echo "shard $i failed"; exit 1; }
done
AFTER=$(count)
env PATH="$BINDIR:$PATH" $ENVS sh -c "$(plan "['merge']")" >"$WORK/merge.log" 2>&1 || { cat "$WORK/merge.log"; echo "the merge failed"; exit 1; }
RUN=$(plan "['env']['RUN']")
echo "== 3. the merged report against the server's own count"
"$VENV/bin/python" - "$WORK/reports/$RUN/merged/run.json" "$N" "$((AFTER - BEFORE))" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
n, served = int(sys.argv[2]), int(sys.argv[3])
t = r["summary"]["total"]
cleanup = sum(x["cleanup"]["requests"] for x in r["rounds"])
sent = t["requests"] + sum(x["warmup_requests"] for x in r["rounds"]) + cleanup
problems = []
if len(r["shards"]) != n:
    problems.append(f"{len(r['shards'])} shards merged, not {n}")
if t["failures"]:
    problems.append(f"{t['failures']} failures: {r['failures'][:3]}")
if sent != served:
    problems.append(f"the merged report counts {sent} requests, the server {served}")
late = [x.get("start_late_ms") for x in r["rounds"]]
# Server and shards share this machine's clock: every shard's bounds must hold 0.
for s in r["shards"]:
    c = s.get("target_clock")
    if not c or abs(c["offset_ms"]) > c["plus_minus_ms"] or c["plus_minus_ms"] > 500:
        problems.append(f"shard {s['index']}: clock against the target {c}")
if problems:
    print("kubernetes: " + "; ".join(problems)); sys.exit(1)
widest = max(s["target_clock"]["plus_minus_ms"] for s in r["shards"])
print(f"   {n} shards merged: {t['requests']} requests, as the server counted; rounds began at most {max(l or 0 for l in late):.0f} ms after their slots; clocks within ±{widest:.0f} ms of the server's")
PY
"$BIN" compare "$WORK/reports/$RUN/shard-0/run.json" "$WORK/reports/$RUN/merged/run.json" --force >"$WORK/compare.txt" \
    || { cat "$WORK/compare.txt"; echo "compare refused the merged run"; exit 1; }
echo "== k8s_check: all passed"
