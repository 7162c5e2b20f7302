#!/usr/bin/env bash
# RabbitMQ 3.10's classic against its quorum queues, in one command: a RabbitMQ node started
# from a scratch folder on loopback (no system instance), then workloads/rabbitmq-queues.yaml
# over AMQP 0-9-1 once per queue type (8 producers with publisher confirms, 4 consumers,
# persistent 1 KiB messages, a fresh durable queue per round, a warm-up round), the Erlang
# VM (beam.smp) watched, the two runs compared, and the node stopped.
# Usage: examples/rabbitmq-queues/run.sh [OUT=reports/rabbitmq-queues] [ROUNDS=3] [DURATION=10s]
# The table is OUT/compare.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-reports/rabbitmq-queues}
ROUNDS=${2:-3}
DURATION=${3:-10s}
BIN=${LOADMIX_BIN:-target/release/loadmix}
[ -x "$BIN" ] || cargo build --release --locked -q
if [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    (apt-get install -y -qq --no-install-recommends rabbitmq-server ||
        (apt-get update -qq && apt-get install -y -qq --no-install-recommends rabbitmq-server)) >/dev/null
    rm -f /usr/sbin/policy-rc.d
fi
WORK=$(mktemp -d)
NODE="loadmix-recipe-$$@localhost"
EPMD_BEFORE=$(pgrep -x epmd || true)
stop() {
    HOME="$WORK" /usr/lib/rabbitmq/bin/rabbitmqctl -n "$NODE" stop >/dev/null 2>&1 || true
    for p in $(pgrep -x epmd || true); do
        grep -qx "$p" <<<"$EPMD_BEFORE" || kill "$p" 2>/dev/null || true
    done
    rm -rf "$WORK"
}
trap stop EXIT
# shellcheck source=scripts/lib/servers.sh
. scripts/lib/servers.sh
AMQP_PORT=$(free_port)
DIST_PORT=$(free_port)
cat >"$WORK/rabbitmq.conf" <<CONF
listeners.tcp.default = 127.0.0.1:$AMQP_PORT
loopback_users = none
CONF
echo '[].' >"$WORK/enabled_plugins"
(cd "$WORK" && exec env RABBITMQ_CONFIG_FILE="$WORK/rabbitmq" RABBITMQ_ENABLED_PLUGINS_FILE="$WORK/enabled_plugins" \
    RABBITMQ_MNESIA_BASE="$WORK/mnesia" RABBITMQ_LOG_BASE="$WORK/log" RABBITMQ_NODENAME="$NODE" \
    RABBITMQ_NODE_PORT="$AMQP_PORT" RABBITMQ_DIST_PORT="$DIST_PORT" HOME="$WORK" \
    /usr/lib/rabbitmq/bin/rabbitmq-server >"$WORK/out.log" 2>&1) &
for _ in $(seq 1 240); do
    (echo >"/dev/tcp/127.0.0.1/$AMQP_PORT") 2>/dev/null && break
    sleep 0.25
done
mkdir -p "$OUT"
for TYPE in classic quorum; do
    "$BIN" run workloads/rabbitmq-queues.yaml --target "amqp://127.0.0.1:$AMQP_PORT" \
        --set "users.producer.params.queue_type=$TYPE" --set "users.consumer.params.queue_type=$TYPE" \
        --set run.warmup_rounds=1 --rounds "$ROUNDS" --duration "$DURATION" \
        --monitor-process beam.smp --label "queue_type=$TYPE" \
        --note "RabbitMQ 3.10, $TYPE queues, publisher confirms" \
        --quiet --out "$OUT/$TYPE" >/dev/null
done
# The two runs differ in the queue type only, which --force accepts.
"$BIN" compare --force "$OUT/classic/run.json" "$OUT/quorum/run.json" >"$OUT/compare.txt"
cat "$OUT/compare.txt"
