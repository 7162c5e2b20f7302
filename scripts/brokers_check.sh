#!/usr/bin/env bash
# Starts the message brokers users own on loopback from Debian's packages (installed when
# missing), each in a scratch folder of its own with no system instance, and hands each
# to the Rust checks of tests/real/ (activemq.rs, rabbitmq.rs, recipes.rs), which hold
# loadmix's typed report against the broker's own counts:
#
#   1. ActiveMQ Classic 5.17 on KahaDB with a STOMP connector and JMX on loopback
#      (counted with ActiveMQ's `query` command);
#   2. RabbitMQ 3.10 with rabbitmq_stomp and rabbitmq_prometheus, over STOMP, AMQP 0-9-1
#      and amqps:// (a CA of loadmix's own), restarted under a run by `rabbitmqctl`;
#   3. ActiveMQ on the JDBC store (PostgreSQL, set up by examples/activemq-stores);
#   4. the recipes examples/activemq-stores, examples/activemq-failover, examples/activemq-gc and
#      examples/rabbitmq-queues, briefly.
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
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
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
# ActiveMQ's `query` command, as the checks call it: `$WORK/amq-query --jmxurl URL ...`.
cat >"$WORK/amq-query" <<SH
#!/bin/sh
exec java -Djava.io.tmpdir="$AMQ/tmp" -Dactivemq.home=/usr/share/activemq -Dactivemq.base="$AMQ" \\
    -Dactivemq.conf="$AMQ/conf" -Dactivemq.data="$AMQ/data" -jar /usr/share/activemq/bin/activemq.jar query "\$@"
SH
chmod +x "$WORK/amq-query"
export LOADMIX_REAL_ACTIVEMQ_QUERY="$WORK/amq-query"
(cd "$AMQ" && exec java -Xms256m -Xmx256m -Djava.io.tmpdir="$AMQ/tmp" -Dactivemq.home=/usr/share/activemq \
    -Dactivemq.base="$AMQ" -Dactivemq.conf="$AMQ/conf" -Dactivemq.data="$AMQ/data" \
    -jar /usr/share/activemq/bin/activemq.jar start "xbean:file:$AMQ/conf/activemq.xml" >"$AMQ/out.log" 2>&1) &
PIDS+=($!)
wait_port "$STOMP_PORT" || { tail -20 "$AMQ/out.log"; exit 1; }
wait_port "$JMX_PORT"
export LOADMIX_REAL_ACTIVEMQ_STOMP="stomp://127.0.0.1:$STOMP_PORT"
export LOADMIX_REAL_ACTIVEMQ_JMX="service:jmx:rmi:///jndi/rmi://127.0.0.1:$JMX_PORT/jmxrmi"
real_checks activemq::kahadb::
kill "${PIDS[0]}" 2>/dev/null || true

echo "== 2. RabbitMQ 3.10 over STOMP and AMQP 0-9-1, counts against its Prometheus endpoint"
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
wait_port "$AMQP_PORT"
wait_port "$AMQPS_PORT"
# rabbitmqctl for this node, as the checks call it.
cat >"$WORK/rabbitmqctl" <<SH
#!/bin/sh
HOME="$RMQ" exec /usr/lib/rabbitmq/bin/rabbitmqctl -n "$RMQ_NODE" "\$@"
SH
chmod +x "$WORK/rabbitmqctl"
export LOADMIX_REAL_RABBITMQCTL="$WORK/rabbitmqctl"
export LOADMIX_REAL_RABBITMQ_STOMP="stomp://127.0.0.1:$RSTOMP_PORT"
export LOADMIX_REAL_RABBITMQ_AMQP="amqp://127.0.0.1:$AMQP_PORT"
export LOADMIX_REAL_RABBITMQ_AMQPS="amqps://127.0.0.1:$AMQPS_PORT"
export LOADMIX_REAL_RABBITMQ_CA="$RMQ/tls/ca.pem"
export LOADMIX_REAL_RABBITMQ_PROMETHEUS="http://127.0.0.1:$PROM_PORT/metrics"
export LOADMIX_REAL_RABBITMQ_LOG="$RMQ/log/$RMQ_NODE.log"
real_checks rabbitmq::
kill "${PIDS[1]}" 2>/dev/null || true
"$WORK/rabbitmqctl" stop >/dev/null 2>&1 || true
RMQ_NODE=

echo "== 3. ActiveMQ on the JDBC store (PostgreSQL): counts against JMX, and its message table emptied"
# A folder of its own, outside $WORK: PostgreSQL's user must reach it.
STORES=$(mktemp -d)
trap 'examples/activemq-stores/stop.sh "$STORES"; rm -rf "$STORES"; cleanup' EXIT
examples/activemq-stores/setup.sh "$STORES" >/dev/null || { tail -20 "$STORES"/*.log >&2; exit 1; }
# shellcheck disable=SC1091
. "$STORES/targets.env"
PG=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
cat >"$WORK/jdbc-rows" <<SH
#!/bin/sh
exec su postgres -c "$PG/psql -h 127.0.0.1 -p $PGPORT -U postgres -d activemq_jdbc -tAc 'SELECT count(*) FROM activemq_msgs'"
SH
chmod +x "$WORK/jdbc-rows"
export LOADMIX_REAL_ACTIVEMQ_JDBC_STOMP="$URL_JDBC" LOADMIX_REAL_ACTIVEMQ_JDBC_JMX="$JMX_JDBC"
export LOADMIX_REAL_ACTIVEMQ_JDBC_ROWS="$WORK/jdbc-rows"
real_checks activemq::jdbc::
examples/activemq-stores/stop.sh "$STORES"
rm -rf "$STORES"
trap cleanup EXIT

echo "== 4. the recipes examples/activemq-stores, activemq-failover, activemq-gc and rabbitmq-queues, briefly"
LOADMIX_BIN="$BIN" examples/activemq-stores/run.sh "$WORK/recipe" 1 2s 10 3,10 >"$WORK/recipe.txt"
LOADMIX_BIN="$BIN" examples/rabbitmq-queues/run.sh "$WORK/rabbit-recipe" 1 4s >"$WORK/rabbit-recipe.txt"
# A loose level: a brief search of a debug build on a busy host ends after a few steps,
# on the generator's limit or the brokers', never before any step passed. It starts at
# 100/s: at the workload's 250/s a debug build beside four new JVMs on two cores once
# started 10.6 % of its first step's arrivals late, and a first step the generator limits
# has no rate sustained. A p90 is told from 36 samples (a p99 needs 368, more than a 2 s
# step holds at the first rates), and at most 8 steps a configuration bound its time.
LOADMIX_BIN="$BIN" examples/activemq-gc/run.sh "$WORK/gc-recipe" 2s "sent p90 < 500ms, errors < 5%" \
    --set users.writer.arrival.rate=100/s --capacity-steps 8 >"$WORK/gc-recipe.txt"
# One round of 18 s, the kill at 7 s (2 s after the warm-up): each store down a second,
# started again and watched for the recovery's hold.
LOADMIX_BIN="$BIN" examples/activemq-failover/run.sh "$WORK/failover" 1 18s 7s >"$WORK/failover.txt"
LOADMIX_REAL_ACTIVEMQ_RECIPE="$WORK/recipe" LOADMIX_REAL_RABBITMQ_RECIPE="$WORK/rabbit-recipe" \
    LOADMIX_REAL_ACTIVEMQ_GC_RECIPE="$WORK/gc-recipe" LOADMIX_REAL_ACTIVEMQ_FAILOVER="$WORK/failover" \
    real_checks recipes::brokers::
echo "== brokers_check: all passed"
