#!/usr/bin/env bash
# loadmix's STOMP producers against ActiveMQ's own Java client (`activemq producer`, shipped
# in the Debian package: OpenWire, synchronous persistent sends), on one ActiveMQ 5.17
# broker on KahaDB started here on loopback: the same message size and count, 4 and then
# 16 producer threads. loadmix sends persistent 1 KiB messages and waits for each one's
# receipt (JMS's synchronous persistent send over STOMP), and keeps what it sent on the
# broker (--keep-data), as the Java client does: neither drains. The two take turns going
# first; the end prints the medians with the min and max over the runs.
#
# Per run: the message rate (messages / the sending phase: loadmix's measured seconds, the
# Java client's own "Elapsed time"), the client's CPU per message (user + system time of the
# whole process, getrusage), the broker JVM's CPU per message (/proc), and the client's CPU
# against the broker's. The Java client's CPU includes its JVM's start: a run of 0 messages
# measures that, and it is taken off.
# Usage: bench/brokers.sh [MESSAGES_PER_THREAD=2500] [RUNS=3] [THREADS=4,16]
set -euo pipefail
cd "$(dirname "$0")/.."
PER=${1:-2500}
RUNS=${2:-3}
THREADS=${3:-4,16}
BIN=${LOADMIX_BIN:-target/release/loadmix}
[ -x "$BIN" ] || cargo build --release --locked -q
[ -f /usr/share/activemq/bin/activemq.jar ] || { apt-get update -qq && apt-get install -y -qq --no-install-recommends activemq >/dev/null; }
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"; }
trap cleanup EXIT
M="python3 bench/measure.py"
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh

AMQ="$WORK/activemq"
mkdir -p "$AMQ/conf" "$AMQ/data" "$AMQ/tmp"
cp /etc/activemq/instances-available/main/log4j2.properties "$AMQ/conf/"
STOMP=$(free_port)
OPENWIRE=$(free_port)
cat >"$AMQ/conf/activemq.xml" <<XML
<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" useJmx="false" brokerName="bench"
          dataDirectory="\${activemq.base}/data">
    <persistenceAdapter><kahaDB directory="\${activemq.base}/data/kahadb"/></persistenceAdapter>
    <transportConnectors>
      <transportConnector name="openwire" uri="tcp://127.0.0.1:$OPENWIRE"/>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:$STOMP"/>
    </transportConnectors>
  </broker>
</beans>
XML
(cd "$AMQ" && exec java -Xms512m -Xmx512m -Djava.io.tmpdir="$AMQ/tmp" -Dactivemq.home=/usr/share/activemq \
    -Dactivemq.base="$AMQ" -Dactivemq.conf="$AMQ/conf" -Dactivemq.data="$AMQ/data" \
    -jar /usr/share/activemq/bin/activemq.jar start "xbean:file:$AMQ/conf/activemq.xml" >"$AMQ/out.log" 2>&1) &
BROKER=$!
PIDS+=("$BROKER")
wait_port "$STOMP" || { tail -20 "$AMQ/out.log"; exit 1; }
wait_port "$OPENWIRE"
broker_cpu() { awk '{print ($14 + $15) / 100}' "/proc/$BROKER/stat"; }

cat >"$WORK/producers.yaml" <<'YAML'
name: bench-producers
run: { iterations: 2500, rounds: 1, timeout: 30s }
think: 0ms
users:
  - class: producer
    protocol: stomp
    count: 4
    mix:
      send:
        weight: 1
        params: { destination: "/queue/bench-{run_id}", size: 1KiB, persistent: true, receipt: true }
YAML
# The producer command logs its counts and times through log4j 1.x, which has no
# configuration of its own here: to stdout, the message only.
printf '%s\n' 'log4j.rootLogger=INFO, out' 'log4j.appender.out=org.apache.log4j.ConsoleAppender' \
    'log4j.appender.out.layout=org.apache.log4j.PatternLayout' 'log4j.appender.out.layout.ConversionPattern=%m%n' \
    >"$AMQ/conf/log4j.properties"
java_producer() {
    java -Djava.io.tmpdir="$AMQ/tmp" -Dactivemq.home=/usr/share/activemq -Dactivemq.base="$AMQ" \
        -Dlog4j.configuration="file:$AMQ/conf/log4j.properties" \
        -jar /usr/share/activemq/bin/activemq.jar producer --brokerUrl "tcp://127.0.0.1:$OPENWIRE" \
        --destination "queue://java-bench-$1" --persistent true --messageSize 1024 \
        --messageCount "$2" --parallelThreads "$3" 2>&1
}
# The Java client's start and stop alone: its CPU with nothing to send.
$M "$WORK/java0.txt" -- bash -c "$(declare -f java_producer); AMQ=$AMQ OPENWIRE=$OPENWIRE java_producer 0 0 1" >"$WORK/java0.json"
JVM_CPU=$(python3 -c "import json; print(json.load(open('$WORK/java0.json'))['cpu'])")
echo "the Java client's start and stop alone: ${JVM_CPU}s of CPU, taken off its runs"

RESULTS="$WORK/results.jsonl"
one() { # TOOL THREADS RUN
    local tool=$1 t=$2 k=$3 b0 b1
    b0=$(broker_cpu)
    if [ "$tool" = loadmix ]; then
        $M "$WORK/out.txt" -- "$BIN" run "$WORK/producers.yaml" --target "stomp://127.0.0.1:$STOMP" \
            --users "producer=$t" --set "run.iterations=$PER" --keep-data --quiet --out "$WORK/lm-$t-$k" >"$WORK/m.json"
    else
        $M "$WORK/out.txt" -- bash -c "$(declare -f java_producer); AMQ=$AMQ OPENWIRE=$OPENWIRE java_producer $t-$k $PER $t" >"$WORK/m.json"
    fi
    b1=$(broker_cpu)
    python3 - "$tool" "$t" "$WORK/m.json" "$WORK/out.txt" "$WORK/lm-$t-$k/run.json" "$b0" "$b1" "$PER" "$JVM_CPU" <<'PY' | tee -a "$RESULTS"
import json, re, sys
tool, t, mfile, out, run, b0, b1, per, jvm = sys.argv[1:]
t, per = int(t), int(per)
m = json.load(open(mfile))
assert m["rc"] == 0, (tool, m, open(out).read()[-2000:])
n = t * per
if tool == "loadmix":
    r = json.load(open(run))
    send = next(o for o in r["summary"]["ops"] if o["op"] == "producer.send")
    assert send["successes"] == n and send["failures"] == 0, send
    secs = r["summary"]["measured_s"]
    cpu = m["cpu"]
else:
    text = open(out).read()
    # Each thread reports its own elapsed time; the sending phase is the longest.
    secs = max(float(x) for x in re.findall(r"Elapsed time in milli second : (\d+)", text)) / 1000
    produced = sum(int(x) for x in re.findall(r"Produced: (\d+) messages", text))
    assert produced == n, (produced, n, text[-2000:])
    cpu = max(m["cpu"] - float(jvm), 0.0)
broker = float(b1) - float(b0)
print(json.dumps({"tool": tool, "threads": t, "msgs": n, "rate": n / secs,
                  "cpu_us_per_msg": cpu / n * 1e6, "broker_us_per_msg": broker / n * 1e6,
                  "client_vs_broker": cpu / broker if broker > 0 else None}))
PY
}
IFS=, read -ra TS <<<"$THREADS"
for t in "${TS[@]}"; do
    for k in $(seq 1 "$RUNS"); do
        if [ $((k % 2)) = 1 ]; then one loadmix "$t" "$k"; one java "$t" "$k"; else one java "$t" "$k"; one loadmix "$t" "$k"; fi
    done
done
python3 - "$RESULTS" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def fig(tool, t, key):
    v = sorted(r[key] for r in rows if r["tool"] == tool and r["threads"] == t)
    return statistics.median(v), v[0], v[-1]
print("\nmedian (min-max) over the runs")
for t in sorted({r["threads"] for r in rows}):
    for tool in ("loadmix", "java"):
        rate, cpu, br = fig(tool, t, "rate"), fig(tool, t, "cpu_us_per_msg"), fig(tool, t, "client_vs_broker")
        print(f"  {t:>2} threads {tool:>7}: {rate[0]:8.0f} msg/s ({rate[1]:.0f}-{rate[2]:.0f}) · CPU {cpu[0]:6.1f} µs/msg ({cpu[1]:.1f}-{cpu[2]:.1f}) · client/broker CPU {br[0]:.2f} ({br[1]:.2f}-{br[2]:.2f})")
    lr, jr = fig("loadmix", t, "rate")[0], fig("java", t, "rate")[0]
    lc, jc = fig("loadmix", t, "cpu_us_per_msg")[0], fig("java", t, "cpu_us_per_msg")[0]
    print(f"  {t:>2} threads loadmix/java: rate {lr / jr:.2f}x, CPU per message {lc / jc:.2f}x")
PY
