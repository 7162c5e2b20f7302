#!/usr/bin/env bash
# loadmix against the message brokers users own, each started here on loopback from Debian's
# packages (installed when missing) in a scratch folder of its own, no system instance:
#
#   1. ActiveMQ Classic 5.17 on KahaDB, with a STOMP connector and JMX on loopback:
#      fixtures/workloads/broker-check.yaml (4 producers, 2 consumers, 2 rounds), 0
#      failures, and for each round's queue the broker's own EnqueueCount and DequeueCount
#      (read with ActiveMQ's `query` command over JMX) equal to loadmix's receipts and
#      received messages; the same in transactions; request-reply; a topic with two
#      durable subscribers, drained and removed by the teardown.
#   2. RabbitMQ 3.10 with rabbitmq_stomp and rabbitmq_prometheus: the same workload, 0
#      failures; the broker's messages received, acknowledged and left in its queues (read
#      from its Prometheus endpoint, per queue) equal to loadmix's; request-reply; a topic
#      with durable subscribers, their subscriptions removed by the teardown.
#   3. A login the broker refuses: exit 3 at preflight with ActiveMQ's own words.
#   4. RabbitMQ over AMQP 0-9-1 (lapin): fixtures/workloads/broker-check-amqp.yaml with
#      publisher confirms on a classic and then a quorum queue, on a classic one with 32
#      publishes unconfirmed at once and every fifth delivery acknowledged, and in
#      transactions of 10: 0 failures, and the broker's published, confirmed and
#      acknowledged messages (Prometheus) equal to loadmix's confirms and deliveries.
#      Request-reply over RabbitMQ's direct reply-to. A queue declared with another type
#      is counted in RabbitMQ's words (406 PRECONDITION_FAILED); a refused login is exit 3
#      with ACCESS_REFUSED. The same over amqps:// (the broker's certificate checked
#      against --ca-cert; an untrusted one stops the run at preflight). RabbitMQ
#      restarted under a run is counted and classified, the users reconnect, the run goes
#      on, and no message it confirmed is lost.
#   5. ActiveMQ on the JDBC store (PostgreSQL, set up by examples/activemq-stores): the
#      same workload, its counts against JMX, and the store's message table empty after.
#   6. The recipe examples/activemq-stores (KahaDB, KahaDB without concurrent store and
#      dispatch, JDBC on PostgreSQL, JDBC 45 ms away), briefly: every part runs, 0 failures,
#      and the remote database store is the slowest of the grid.
#   7. The recipe examples/rabbitmq-queues (classic against quorum queues), briefly: both
#      runs without a failure, compared, the Erlang VM's CPU per operation filled in.
# Fails, never skips, when a broker cannot be started.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
[ -f /usr/share/activemq/bin/activemq.jar ] || need+=(activemq)
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || need+=(rabbitmq-server)
if [ ${#need[@]} -gt 0 ]; then
    echo "installing ${need[*]}"
    # Packages must not start their system services.
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    (apt-get install -y -qq --no-install-recommends "${need[@]}" ||
        (apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}")) >/dev/null
    rm -f /usr/sbin/policy-rc.d
fi
BIN=${CARGO_TARGET_DIR:-target}/debug/loadmix
[ -x "$BIN" ] || cargo build --locked

WORK=$(mktemp -d)
PIDS=()
EPMD_BEFORE=$(pgrep -x epmd || true)
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    if [ -n "${RMQ_NODE:-}" ]; then
        HOME="$WORK/rabbitmq" /usr/lib/rabbitmq/bin/rabbitmqctl -n "$RMQ_NODE" stop >/dev/null 2>&1 || true
    fi
    # RabbitMQ starts an epmd of its own; end that one, not one that was there before.
    for p in $(pgrep -x epmd || true); do
        grep -qx "$p" <<<"$EPMD_BEFORE" || kill "$p" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap cleanup EXIT
[ -n "${KEEP_WORK:-}" ] && trap - EXIT
# shellcheck source=scripts/lib/ports.sh
. scripts/lib/ports.sh
# The report's counts: the run id, receipts of sends (or confirms), messages received,
# failures, messages the drain took after the rounds; and the ledger must say that every
# destination was drained, nothing lost, nothing twice, nothing foreign.
counts() {
    python3 - "$1/run.json" "$2" "$3" "$4" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
def named(op, name):
    o = next(x for x in r["summary"]["ops"] if x["op"] == op)
    return sum(a["count"] for a in o.get("answers", []) if a["name"] == name)
drained = sum(x["cleanup"].get("drained_messages", 0) for x in r["rounds"])
l = r["ledger"]
assert l["drained"], l["destinations"]
for d in l["destinations"]:
    assert d["lost"] == d["duplicated"] == d["foreign"] == 0, d
    assert d["sent"] == d["received"] + d["drained"], d
    # A consumer that ends its iterations hands back what it had prefetched (at most 10,
    # the prefetch of the AMQP check), and the other takes those after later ones; not
    # every broker flags them redelivered. Anything more is a broker out of order.
    assert d["out_of_order"] <= 2 * 10, d
recv = sys.argv[4].split(":")
print(r["run_id"], named(sys.argv[2], sys.argv[3]), named(recv[0], recv[1]),
      r["summary"]["total"]["failures"], drained)
PY
}

echo "== 1. ActiveMQ 5.17 (KahaDB) over STOMP, counts against the broker's JMX counters"
AMQ="$WORK/activemq"
mkdir -p "$AMQ/conf" "$AMQ/data" "$AMQ/tmp"
cp /etc/activemq/instances-available/main/log4j2.properties "$AMQ/conf/"
STOMP_PORT=$(free_port)
OPENWIRE_PORT=$(free_port)
JMX_PORT=$(free_port)
cat >"$AMQ/conf/activemq.xml" <<XML
<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <bean class="org.springframework.beans.factory.config.PropertyPlaceholderConfigurer"/>
  <broker xmlns="http://activemq.apache.org/schema/core" useJmx="true" brokerName="check"
          dataDirectory="\${activemq.base}/data">
    <managementContext>
      <managementContext createConnector="true" connectorHost="127.0.0.1" connectorPort="$JMX_PORT"/>
    </managementContext>
    <persistenceAdapter><kahaDB directory="\${activemq.base}/data/kahadb"/></persistenceAdapter>
    <plugins>
      <simpleAuthenticationPlugin anonymousAccessAllowed="true">
        <users><authenticationUser username="loadmix" password="right-passcode" groups="users"/></users>
      </simpleAuthenticationPlugin>
    </plugins>
    <transportConnectors>
      <transportConnector name="openwire" uri="tcp://127.0.0.1:$OPENWIRE_PORT"/>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:$STOMP_PORT"/>
    </transportConnectors>
  </broker>
</beans>
XML
amq_java() {
    java -Djava.io.tmpdir="$AMQ/tmp" -Dactivemq.home=/usr/share/activemq -Dactivemq.base="$AMQ" \
        -Dactivemq.conf="$AMQ/conf" -Dactivemq.data="$AMQ/data" "$@"
}
# ActiveMQ's own counts of run RUN's queues (those PATTERN names, check-RUN-* by
# default), over JMX (at URL, the first broker's by default): queues, enqueued, dequeued,
# left.
amq_counts() {
    amq_java -jar /usr/share/activemq/bin/activemq.jar query \
        --jmxurl "${2:-service:jmx:rmi:///jndi/rmi://127.0.0.1:$JMX_PORT/jmxrmi}" \
        "-Q${4:-Queue}=${3:-check-$1-*}" --view Name,EnqueueCount,DequeueCount,QueueSize >"$WORK/amq-query.txt" 2>&1
    python3 - "$WORK/amq-query.txt" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
get = lambda k: [int(x) for x in re.findall(rf"^{k} = (\d+)$", t, re.M)]
print(len(get("EnqueueCount")), sum(get("EnqueueCount")), sum(get("DequeueCount")), sum(get("QueueSize")))
PY
}
(cd "$AMQ" && exec java -Xms256m -Xmx256m -Djava.io.tmpdir="$AMQ/tmp" -Dactivemq.home=/usr/share/activemq \
    -Dactivemq.base="$AMQ" -Dactivemq.conf="$AMQ/conf" -Dactivemq.data="$AMQ/data" \
    -jar /usr/share/activemq/bin/activemq.jar start "xbean:file:$AMQ/conf/activemq.xml" >"$AMQ/out.log" 2>&1) &
PIDS+=($!)
wait_port "$STOMP_PORT" || { tail -20 "$AMQ/out.log"; exit 1; }
wait_port "$JMX_PORT"
"$BIN" run fixtures/workloads/broker-check.yaml --target "stomp://127.0.0.1:$STOMP_PORT" \
    --quiet --out "$WORK/amq-run" >/dev/null
read -r RUN SENT RECEIVED FAILED DRAINED < <(counts "$WORK/amq-run" producer.send RECEIPT consumer.receive:MESSAGE)
[ "$FAILED" = 0 ] || { echo "ActiveMQ: $FAILED failures" >&2; exit 1; }
# The broker's own counts of this run's queues.
read -r QUEUES ENQ DEQ LEFT < <(amq_counts "$RUN")
echo "   loadmix: $SENT receipts, $RECEIVED messages received, $DRAINED drained · ActiveMQ: $QUEUES queues, $ENQ enqueued, $DEQ dequeued, $LEFT left"
[ "$QUEUES" = 2 ] || { cat "$WORK/amq-query.txt" >&2; exit 1; }
[ "$SENT" = 400 ] && [ "$RECEIVED" = 320 ] && [ "$ENQ" = "$SENT" ] && [ "$DEQ" = $((RECEIVED + DRAINED)) ] &&
    [ "$LEFT" = 0 ] && [ "$DRAINED" = 80 ] || {
    echo "ActiveMQ's counts differ from loadmix's" >&2
    exit 1
}

# The same with the producers' sends in transactions of 10: 40 commits, all 400 enqueued.
"$BIN" run fixtures/workloads/broker-check.yaml --target "stomp://127.0.0.1:$STOMP_PORT" \
    --set users.producer.params.transaction=10 --quiet --out "$WORK/amq-tx" >/dev/null
read -r RUN COMMITS RECEIVED FAILED DRAINED < <(counts "$WORK/amq-tx" producer.send.commit RECEIPT consumer.receive:MESSAGE)
read -r QUEUES ENQ DEQ LEFT < <(amq_counts "$RUN")
echo "   in transactions: loadmix $COMMITS commits, $RECEIVED received, $DRAINED drained · ActiveMQ: $ENQ enqueued, $DEQ dequeued, $LEFT left"
[ "$FAILED" = 0 ] && [ "$COMMITS" = 40 ] && [ "$ENQ" = 400 ] && [ "$DEQ" = $((RECEIVED + DRAINED)) ] && [ "$LEFT" = 0 ] || {
    echo "ActiveMQ's counts of transactional sends differ from loadmix's" >&2
    exit 1
}

# Request-reply: 40 requests answered by a service to their reply-to, each taken once.
"$BIN" run fixtures/workloads/broker-request-reply.yaml --target "stomp://127.0.0.1:$STOMP_PORT" \
    --quiet --out "$WORK/amq-rr" >/dev/null
read -r RUN REPLIED SERVED FAILED DRAINED < <(counts "$WORK/amq-rr" client.request MESSAGE service.reply:MESSAGE)
read -r QUEUES ENQ DEQ LEFT < <(amq_counts "$RUN" "" "*$RUN*")
echo "   request-reply: loadmix $REPLIED replies, $SERVED requests served · ActiveMQ: $QUEUES queues, $ENQ enqueued, $DEQ dequeued, $LEFT left"
[ "$FAILED" = 0 ] && [ "$REPLIED" = 40 ] && [ "$SERVED" = 40 ] && [ "$QUEUES" = 3 ] && [ "$ENQ" = 80 ] &&
    [ "$DEQ" = 80 ] && [ "$LEFT" = 0 ] || { echo "ActiveMQ's request-reply counts differ from loadmix's" >&2; exit 1; }

# A topic with two durable subscribers that take 60 of their 100 copies each: the
# teardown drains the other 40 of each as its subscriber and removes the subscriptions.
"$BIN" run fixtures/workloads/broker-topic.yaml --target "stomp://127.0.0.1:$STOMP_PORT" \
    --quiet --out "$WORK/amq-topic" >/dev/null
topic_check() {
    python3 - "$1/run.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["summary"]["total"]["failures"] == 0, r["failures"][:3]
l = r["ledger"]
assert l["drained"], l
rows = {d["name"].split("#")[1] if "#" in d["name"] else "topic": d for d in l["destinations"]}
assert rows["topic"]["sent"] == 100 and rows["topic"]["lost"] == 0, rows
for sub in ("sub-0", "sub-1"):
    d = rows[sub]
    assert (d["received"], d["drained"], d["duplicated"]) == (60, 40, 0), d
deleted = sum(x["cleanup"].get("deleted_queues", 0) for x in r["rounds"])
assert deleted == 2, deleted
print(r["run_id"], sum(rows[s]["received"] + rows[s]["drained"] for s in ("sub-0", "sub-1")))
PY
}
read -r RUN COPIES < <(topic_check "$WORK/amq-topic")
read -r QUEUES ENQ DEQ LEFT < <(amq_counts "$RUN" "" "news-$RUN" Topic)
SUBS=$(amq_java -jar /usr/share/activemq/bin/activemq.jar query \
    --jmxurl "service:jmx:rmi:///jndi/rmi://127.0.0.1:$JMX_PORT/jmxrmi" --objname "type=Broker,brokerName=check,*" \
    --view SubscriptionName 2>&1 | grep -c "SubscriptionName = sub-" || true)
echo "   topic: loadmix 100 sent, $COPIES copies taken by 2 durable subscribers · ActiveMQ: $ENQ enqueued, $DEQ dequeued, $SUBS durable subscriptions left"
[ "$ENQ" = 100 ] && [ "$DEQ" = 200 ] && [ "$COPIES" = 200 ] && [ "$SUBS" = 0 ] ||
    { echo "ActiveMQ's topic counts differ from loadmix's" >&2; exit 1; }

echo "== 3. a login ActiveMQ refuses stops the run at preflight, in the broker's words"
set +e
LOADMIX_PASSWORD=wrong-passcode "$BIN" run fixtures/workloads/broker-check.yaml \
    --target "stomp://127.0.0.1:$STOMP_PORT" --user loadmix --quiet --out "$WORK/amq-refused" \
    >/dev/null 2>"$WORK/refused.err"
CODE=$?
set -e
[ "$CODE" = 3 ] && grep -q "User name \[loadmix\] or password is invalid" "$WORK/refused.err" || {
    echo "expected exit 3 with ActiveMQ's reason, got $CODE:" >&2
    cat "$WORK/refused.err" >&2
    exit 1
}
! grep -q wrong-passcode "$WORK/refused.err"
kill "${PIDS[0]}" 2>/dev/null || true

echo "== 2. RabbitMQ 3.10 over STOMP, counts against its Prometheus endpoint"
RMQ="$WORK/rabbitmq"
mkdir -p "$RMQ"
AMQP_PORT=$(free_port)
RSTOMP_PORT=$(free_port)
PROM_PORT=$(free_port)
DIST_PORT=$(free_port)
AMQPS_PORT=$(free_port)
RMQ_NODE="loadmix-check-$$@localhost"
# A loopback CA and certificate of loadmix's own for the amqps:// listener.
"$BIN" cert --out "$RMQ/tls" >/dev/null 2>&1
cat >"$RMQ/rabbitmq.conf" <<CONF
listeners.tcp.default = 127.0.0.1:$AMQP_PORT
listeners.ssl.default = 127.0.0.1:$AMQPS_PORT
ssl_options.cacertfile = $RMQ/tls/ca.pem
ssl_options.certfile = $RMQ/tls/cert.pem
ssl_options.keyfile = $RMQ/tls/key.pem
ssl_options.verify = verify_none
ssl_options.fail_if_no_peer_cert = false
stomp.listeners.tcp.1 = 127.0.0.1:$RSTOMP_PORT
prometheus.tcp.ip = 127.0.0.1
prometheus.tcp.port = $PROM_PORT
prometheus.return_per_object_metrics = true
loopback_users = none
CONF
echo '[rabbitmq_stomp,rabbitmq_prometheus].' >"$RMQ/enabled_plugins"
(cd "$RMQ" && exec env RABBITMQ_CONFIG_FILE="$RMQ/rabbitmq" RABBITMQ_ENABLED_PLUGINS_FILE="$RMQ/enabled_plugins" \
    RABBITMQ_MNESIA_BASE="$RMQ/mnesia" RABBITMQ_LOG_BASE="$RMQ/log" RABBITMQ_NODENAME="$RMQ_NODE" \
    RABBITMQ_NODE_PORT="$AMQP_PORT" RABBITMQ_DIST_PORT="$DIST_PORT" HOME="$RMQ" \
    /usr/lib/rabbitmq/bin/rabbitmq-server >"$RMQ/out.log" 2>&1) &
PIDS+=($!)
wait_port "$RSTOMP_PORT" || { tail -20 "$RMQ/out.log"; exit 1; }
wait_port "$PROM_PORT"
"$BIN" run fixtures/workloads/broker-check.yaml --target "stomp://127.0.0.1:$RSTOMP_PORT" \
    --quiet --out "$WORK/rmq-run" >/dev/null
read -r RUN SENT RECEIVED FAILED DRAINED < <(counts "$WORK/rmq-run" producer.send RECEIPT consumer.receive:MESSAGE)
[ "$FAILED" = 0 ] || { echo "RabbitMQ: $FAILED failures" >&2; exit 1; }
# RabbitMQ refreshes its figures every few seconds: read until they settle on loadmix's
# or a minute has passed, then compare what was read.
for _ in $(seq 1 60); do
    curl -sf "http://127.0.0.1:$PROM_PORT/metrics" >"$WORK/rmq.prom"
    read -r RCVD ACKED AUTO LEFT QUEUES < <(python3 - "$WORK/rmq.prom" "$RUN" <<'PY'
import re, sys
text, run = open(sys.argv[1]).read(), sys.argv[2]
def total(name):
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))
left = [float(v) for q, v in re.findall(r'^rabbitmq_queue_messages\{[^}]*queue="([^"]+)"[^}]*\} (\S+)$', text, re.M)
        if q.startswith(f"check-{run}-")]
print(int(total("rabbitmq_global_messages_received_total")), int(total("rabbitmq_global_messages_acknowledged_total")),
      int(total("rabbitmq_global_messages_delivered_consume_auto_ack_total")), int(sum(left)), len(left))
PY
)
    [ "$RCVD" = "$SENT" ] && [ "$ACKED" = "$RECEIVED" ] && [ "$AUTO" = "$DRAINED" ] && [ "$LEFT" = 0 ] && break
    sleep 1
done
echo "   loadmix: $SENT receipts, $RECEIVED messages received, $DRAINED drained · RabbitMQ: $QUEUES queues, $RCVD received, $ACKED acknowledged, $AUTO taken by the drain (auto ack), $LEFT left"
[ "$QUEUES" = 2 ] && [ "$SENT" = 400 ] && [ "$RCVD" = "$SENT" ] && [ "$ACKED" = "$RECEIVED" ] &&
    [ "$AUTO" = "$DRAINED" ] && [ "$DRAINED" = 80 ] && [ "$LEFT" = 0 ] || {
    echo "RabbitMQ's counts differ from loadmix's" >&2
    exit 1
}
"$BIN" run fixtures/workloads/broker-request-reply.yaml --target "stomp://127.0.0.1:$RSTOMP_PORT" \
    --quiet --out "$WORK/rmq-rr" >/dev/null
read -r RUN REPLIED SERVED FAILED DRAINED < <(counts "$WORK/rmq-rr" client.request MESSAGE service.reply:MESSAGE)
echo "   request-reply: loadmix $REPLIED replies, $SERVED requests served, $FAILED failed"
[ "$FAILED" = 0 ] && [ "$REPLIED" = 40 ] && [ "$SERVED" = 40 ] || { echo "RabbitMQ request-reply failed" >&2; exit 1; }
"$BIN" run fixtures/workloads/broker-topic.yaml --target "stomp://127.0.0.1:$RSTOMP_PORT" \
    --quiet --out "$WORK/rmq-topic" >/dev/null
read -r RUN COPIES < <(topic_check "$WORK/rmq-topic")
# The broker's own list, not its metrics, which lag by seconds.
SUBS=$(HOME="$WORK/rabbitmq" /usr/lib/rabbitmq/bin/rabbitmqctl -n "$RMQ_NODE" list_queues name -q |
    grep -c '^stomp-subscription-' || true)
echo "   topic: loadmix 100 sent, $COPIES copies taken by 2 durable subscribers · RabbitMQ: $SUBS subscription queues left"
[ "$COPIES" = 200 ] && [ "$SUBS" = 0 ] || { echo "RabbitMQ's durable subscriptions were not removed" >&2; exit 1; }
echo "== 4. RabbitMQ over AMQP 0-9-1: classic and quorum queues, confirms, counts against its own"
# The global counters carry both STOMP's and AMQP's messages: compare what each run adds.
prom_totals() {
    curl -sf "http://127.0.0.1:$PROM_PORT/metrics" | python3 -c '
import re, sys
t = sys.stdin.read()
tot = lambda n: int(sum(float(v) for v in re.findall(rf"^{n}(?:{{[^}}]*}})? (\S+)$", t, re.M)))
print(tot("rabbitmq_global_messages_received_total"), tot("rabbitmq_global_messages_confirmed_total"),
      tot("rabbitmq_global_messages_acknowledged_total"), tot("rabbitmq_global_messages_delivered_consume_auto_ack_total"))'
}
# The run's queues still on the broker (the drain deletes what the run declared).
queues_left() {
    curl -sf "http://127.0.0.1:$PROM_PORT/metrics" |
        grep -c "^rabbitmq_queue_messages{.*queue=\"check-$1-" || true
}
# classic, quorum, and classic with 32 publishes unconfirmed at once (each confirm then
# timed apart, as publish.confirm) and consumers acknowledging every fifth delivery.
for TYPE in classic quorum window; do
    read -r R0 C0 A0 U0 < <(prom_totals)
    QTYPE=$TYPE CONFIRMS=producer.publish EXTRA=()
    if [ "$TYPE" = window ]; then
        QTYPE=classic CONFIRMS=producer.publish.confirm
        EXTRA=(--set users.producer.params.max_pending=32 --set users.consumer.params.ack_every=5)
    fi
    "$BIN" run fixtures/workloads/broker-check-amqp.yaml --target "amqp://127.0.0.1:$AMQP_PORT" \
        --set "users.producer.params.queue_type=$QTYPE" --set "users.consumer.params.queue_type=$QTYPE" "${EXTRA[@]}" \
        --quiet --out "$WORK/amqp-$TYPE" >/dev/null
    read -r RUN CONFIRMED DELIVERED FAILED DRAINED < <(counts "$WORK/amqp-$TYPE" "$CONFIRMS" basic.ack consumer.consume:basic.deliver)
    [ "$FAILED" = 0 ] || { echo "RabbitMQ AMQP ($TYPE): $FAILED failures" >&2; exit 1; }
    for _ in $(seq 1 60); do
        read -r R1 C1 A1 U1 < <(prom_totals)
        [ $((R1 - R0)) = "$CONFIRMED" ] && [ $((C1 - C0)) = "$CONFIRMED" ] && [ $((A1 - A0)) = "$DELIVERED" ] &&
            [ $((U1 - U0)) = "$DRAINED" ] && break
        sleep 1
    done
    LEFT=$(queues_left "$RUN")
    echo "   $TYPE: loadmix $CONFIRMED confirmed, $DELIVERED delivered, $DRAINED drained · RabbitMQ $((R1 - R0)) received, $((C1 - C0)) confirmed, $((A1 - A0)) acknowledged, $((U1 - U0)) taken by the drain, $LEFT of the run's queues left"
    [ "$CONFIRMED" = 400 ] && [ "$DELIVERED" = 320 ] && [ $((R1 - R0)) = "$CONFIRMED" ] && [ $((C1 - C0)) = "$CONFIRMED" ] &&
        [ $((A1 - A0)) = "$DELIVERED" ] && [ $((U1 - U0)) = "$DRAINED" ] && [ "$DRAINED" = 80 ] && [ "$LEFT" = 0 ] ||
        { echo "RabbitMQ's AMQP counts differ from loadmix's" >&2; exit 1; }
done
# Publishes in transactions of 10 (tx.select, no confirms): 40 commits, every message on
# the broker once committed.
read -r R0 C0 A0 U0 < <(prom_totals)
"$BIN" run fixtures/workloads/broker-check-amqp.yaml --target "amqp://127.0.0.1:$AMQP_PORT" \
    --set users.producer.params.transaction=10 --set users.producer.mix.publish.params.confirm=false \
    --quiet --out "$WORK/amqp-tx" >/dev/null
read -r RUN COMMITS DELIVERED FAILED DRAINED < <(counts "$WORK/amqp-tx" producer.publish.commit tx.commit-ok consumer.consume:basic.deliver)
for _ in $(seq 1 60); do
    read -r R1 C1 A1 U1 < <(prom_totals)
    [ $((R1 - R0)) = 400 ] && [ $((A1 - A0)) = "$DELIVERED" ] && [ $((U1 - U0)) = "$DRAINED" ] && break
    sleep 1
done
echo "   transactions: loadmix $COMMITS commits, $DELIVERED delivered, $DRAINED drained · RabbitMQ $((R1 - R0)) received, $((C1 - C0)) confirmed, $((A1 - A0)) acknowledged, $((U1 - U0)) taken by the drain"
[ "$FAILED" = 0 ] && [ "$COMMITS" = 40 ] && [ $((R1 - R0)) = 400 ] && [ $((C1 - C0)) = 0 ] &&
    [ $((A1 - A0)) = "$DELIVERED" ] && [ $((U1 - U0)) = "$DRAINED" ] && [ $((DELIVERED + DRAINED)) = 400 ] ||
    { echo "RabbitMQ's counts of transactional publishes differ from loadmix's" >&2; exit 1; }
# Request-reply over AMQP: RabbitMQ's direct reply-to, 40 requests each answered once.
"$BIN" run fixtures/workloads/broker-request-reply-amqp.yaml --target "amqp://127.0.0.1:$AMQP_PORT" \
    --quiet --out "$WORK/amqp-rr" >/dev/null
python3 - "$WORK/amqp-rr/run.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ops = {o["op"]: o for o in r["summary"]["ops"]}
req, rep = ops["client.request"], ops["service.reply"]
assert r["summary"]["total"]["failures"] == 0, r["failures"][:3]
assert (req["successes"], rep["successes"]) == (40, 40), (req["successes"], rep["successes"])
rows = {d["name"]: d for d in r["ledger"]["destinations"]}
replies = rows["amq.rabbitmq.reply-to"]
assert (replies["sent"], replies["received"], replies["lost"], replies["duplicated"]) == (40, 40, 0, 0), replies
svc = next(d for n, d in rows.items() if n.startswith("svc-"))
assert (svc["sent"], svc["received"], svc["lost"]) == (40, 40, 0), svc
print("   request-reply (direct reply-to): 40 requests answered, each reply taken once; p50 %.2f ms" % req["latency_ms"]["p50"])
PY
# amqps://: the same workload over TLS, the broker's certificate checked against the CA
# given; without it, the run stops at preflight saying why.
wait_port "$AMQPS_PORT"
"$BIN" run fixtures/workloads/broker-check-amqp.yaml --target "amqps://127.0.0.1:$AMQPS_PORT" \
    --ca-cert "$RMQ/tls/ca.pem" --quiet --out "$WORK/amqps" >/dev/null
read -r RUN CONFIRMED DELIVERED FAILED DRAINED < <(counts "$WORK/amqps" producer.publish basic.ack consumer.consume:basic.deliver)
set +e
"$BIN" run fixtures/workloads/broker-check-amqp.yaml --target "amqps://127.0.0.1:$AMQPS_PORT" \
    --quiet --out "$WORK/amqps-untrusted" >/dev/null 2>"$WORK/amqps.err"
CODE=$?
set -e
echo "   amqps: loadmix $CONFIRMED confirmed, $DELIVERED delivered, $DRAINED drained, $FAILED failed; untrusted: exit $CODE"
[ "$FAILED" = 0 ] && [ "$CONFIRMED" = 400 ] && [ $((DELIVERED + DRAINED)) = 400 ] && [ "$CODE" = 3 ] &&
    grep -qi "certificate\|unknown\|issuer" "$WORK/amqps.err" || {
    echo "amqps:// failed:" >&2
    cat "$WORK/amqps.err" >&2
    exit 1
}
# RabbitMQ restarted under a run: counted and classified, every user reconnects, the run
# goes on to its end, and no message the broker confirmed is lost.
rmqctl() { HOME="$WORK/rabbitmq" /usr/lib/rabbitmq/bin/rabbitmqctl -n "$RMQ_NODE" "$@" >/dev/null; }
"$BIN" run fixtures/workloads/broker-restart.yaml --target "amqp://127.0.0.1:$AMQP_PORT" \
    --quiet --out "$WORK/amqp-restart" >/dev/null &
RUN_PID=$!
# Restart once the run's four users are connected, and a second of their traffic (a fixed sleep restarted
# the broker before they were, on a slow machine, so no user had to reconnect).
connections() {
    HOME="$WORK/rabbitmq" /usr/lib/rabbitmq/bin/rabbitmqctl -n "$RMQ_NODE" -q list_connections \
        --no-table-headers name 2>/dev/null | grep -c . || true
}
for _ in $(seq 1 300); do
    [ "$(connections)" -ge 4 ] && break
    sleep 0.1
done
[ "$(connections)" -ge 4 ] || { echo "the restart run's users never connected" >&2; exit 1; }
sleep 1
rmqctl stop_app
rmqctl start_app
wait_port "$AMQP_PORT"
wait "$RUN_PID" || true
python3 - "$WORK/amqp-restart/run.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["summary"]["total"]
errors = {k for o in r["summary"]["ops"] for k in o.get("errors", {})}
assert t["failures"] > 0, "the restart was not seen"
assert errors <= {"reset", "connect", "timeout", "status"}, errors
rnd = r["rounds"][0]
assert rnd["connections_opened"] > 4, rnd["connections_opened"]
# The run went on after the restart: successes in its last seconds.
late = sum(b["successes"] for o in rnd["ops"] for b in o.get("timeline", [])[-3:])
assert late > 0, "nothing succeeded after the restart"
for d in r["ledger"]["destinations"]:
    assert d["lost"] == d["lost_failed"], ("a confirmed message was lost", d)
    # At least once: a delivery whose ack the restart cut off comes again, flagged as
    # redelivered. A copy that is not so flagged is a real duplicate.
    assert d["duplicated"] <= d["redelivered"], d
print("   restarted mid-run: %d ok, %d failed (%s), %d connections, %d sends failed unconfirmed and %d of those lost"
      % (t["successes"], t["failures"], ", ".join(sorted(errors)), rnd["connections_opened"],
         sum(d["send_failed"] for d in r["ledger"]["destinations"]),
         sum(d["lost_failed"] for d in r["ledger"]["destinations"])))
PY
# A queue that exists with another type: RabbitMQ's refusal, in its words, counted.
cat >"$WORK/clash.yaml" <<'YAML'
run: { iterations: 3, timeout: 5s }
users:
  - class: first
    protocol: amqp
    count: 1
    params: { queue: "clash-{run_id}", queue_type: quorum }
    mix:
      publish: { weight: 1 }
  - class: second
    protocol: amqp
    count: 1
    params: { queue: "clash-{run_id}", queue_type: classic }
    mix:
      publish: { weight: 1 }
YAML
"$BIN" run "$WORK/clash.yaml" --target "amqp://127.0.0.1:$AMQP_PORT" --quiet --out "$WORK/clash" >/dev/null || true
python3 - "$WORK/clash/run.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
words = [a for o in r["summary"]["ops"] for a in o.get("answers", []) if a.get("code") == 406]
assert words and "PRECONDITION_FAILED" in words[0].get("reason", ""), r["summary"]["ops"]
print("   a queue of another type: amqp close 406", words[0]["reason"][:60], "...", "x", words[0]["count"])
PY
# `loadmix new` against RabbitMQ: the starter it writes (producers with confirms,
# consumers) runs there with no failure.
"$BIN" new --target "amqp://127.0.0.1:$AMQP_PORT" --quiet -o "$WORK/starter-amqp.yaml"
"$BIN" run "$WORK/starter-amqp.yaml" --duration 3s --rounds 1 --quiet --out "$WORK/starter-amqp" >/dev/null
python3 - "$WORK/starter-amqp/run.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["summary"]["total"]
ops = {o["op"]: o["successes"] for o in r["summary"]["ops"]}
assert t["failures"] == 0 and ops.get("producer.publish") and ops.get("consumer.consume"), (t, r["failures"][:3])
print(f"   loadmix new against RabbitMQ: the starter ran {t['requests']} operations, 0 failed")
PY
set +e
LOADMIX_PASSWORD=wrong "$BIN" run fixtures/workloads/broker-check-amqp.yaml \
    --target "amqp://127.0.0.1:$AMQP_PORT" --user nobody --quiet --out "$WORK/amqp-refused" >/dev/null 2>"$WORK/amqp-refused.err"
CODE=$?
set -e
[ "$CODE" = 3 ] && grep -q "ACCESS_REFUSED" "$WORK/amqp-refused.err" || {
    echo "expected exit 3 with ACCESS_REFUSED, got $CODE:" >&2
    cat "$WORK/amqp-refused.err" >&2
    exit 1
}
kill "${PIDS[1]}" 2>/dev/null || true
HOME="$WORK/rabbitmq" /usr/lib/rabbitmq/bin/rabbitmqctl -n "$RMQ_NODE" stop >/dev/null 2>&1 || true
RMQ_NODE=
echo "== 5. ActiveMQ on the JDBC store (PostgreSQL): counts against JMX, and its message table emptied"
# A folder of its own, outside $WORK: PostgreSQL's user must reach it.
STORES=$(mktemp -d)
trap 'examples/activemq-stores/stop.sh "$STORES"; rm -rf "$STORES"; cleanup' EXIT
examples/activemq-stores/setup.sh "$STORES" >/dev/null || { tail -20 "$STORES"/*.log >&2; exit 1; }
# shellcheck disable=SC1091
. "$STORES/targets.env"
"$BIN" run fixtures/workloads/broker-check.yaml --target "$URL_JDBC" --quiet --out "$WORK/jdbc-run" >/dev/null
read -r RUN SENT RECEIVED FAILED DRAINED < <(counts "$WORK/jdbc-run" producer.send RECEIPT consumer.receive:MESSAGE)
read -r QUEUES ENQ DEQ LEFT < <(amq_counts "$RUN" "$JMX_JDBC")
PG=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
ROWS=$(su postgres -c "$PG/psql -h 127.0.0.1 -p $PGPORT -U postgres -d activemq_jdbc -tAc 'SELECT count(*) FROM activemq_msgs'")
echo "   loadmix: $SENT receipts, $RECEIVED received, $DRAINED drained · ActiveMQ (JDBC): $QUEUES queues, $ENQ enqueued, $DEQ dequeued, $LEFT left, $ROWS rows in activemq_msgs"
[ "$FAILED" = 0 ] && [ "$QUEUES" = 2 ] && [ "$SENT" = 400 ] && [ "$ENQ" = "$SENT" ] && [ "$DEQ" = $((RECEIVED + DRAINED)) ] &&
    [ "$LEFT" = 0 ] && [ "$ROWS" = 0 ] || {
    echo "ActiveMQ's JDBC counts differ from loadmix's" >&2
    exit 1
}
examples/activemq-stores/stop.sh "$STORES"
rm -rf "$STORES"
trap cleanup EXIT
echo "== 6. examples/activemq-stores, briefly"
LOADMIX_BIN="$BIN" examples/activemq-stores/run.sh "$WORK/recipe" 1 2s 10 3,10 >"$WORK/recipe.txt"
python3 - "$WORK/recipe" <<'PY'
import json, pathlib, sys
root = pathlib.Path(sys.argv[1])
runs = list(root.rglob("run.json"))
assert len(runs) >= 4 * 3 + 2 * 2 + 3, [str(r) for r in runs]
for r in runs:
    rep = json.loads(r.read_text())
    assert rep["summary"]["total"]["failures"] == 0, (str(r), rep["failures"][:3])
grid = {p.parent.name: json.loads(p.read_text())["summary"]["total"]["ops_per_sec"]
        for p in (root / "grid" / "users.producer.mix.send.params.size=1KiB").glob("*/run.json")}
assert grid["remote"] < grid["kahadb"] and grid["remote"] < grid["jdbc"], grid
print("   grid at 1 KiB, msg/s:", {k: round(v) for k, v in sorted(grid.items())})
PY
echo "== 7. examples/rabbitmq-queues, briefly"
LOADMIX_BIN="$BIN" examples/rabbitmq-queues/run.sh "$WORK/rabbit-recipe" 1 4s >"$WORK/rabbit-recipe.txt"
python3 - "$WORK/rabbit-recipe" <<'PY'
import json, pathlib, sys
root = pathlib.Path(sys.argv[1])
for t in ("classic", "quorum"):
    r = json.loads((root / t / "run.json").read_text())
    assert r["summary"]["total"]["failures"] == 0, (t, r["failures"][:3])
    assert r["summary"]["total"]["successes"] > 0, t
    assert any(p["cpu_ms_per_op"] > 0 for p in r["summary"]["server"]), r["summary"]["server"]
assert "quorum" in (root / "compare.txt").read_text()
print("   classic and quorum runs compared")
PY
echo "== brokers_check: all passed"
