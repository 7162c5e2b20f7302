#!/usr/bin/env bash
# Three ActiveMQ Classic 5.17 brokers that differ only in their message store, on loopback,
# each from a folder of its own under WORKDIR:
#   kahadb  - KahaDB, the file store (journal on local disk);
#   jdbc    - the JDBC store on a local PostgreSQL (one cluster, a database per broker);
#   remote  - the JDBC store on the same PostgreSQL reached through a TCP proxy that delays
#             each direction by DELAY_MS (default 22.5 ms: a database 45 ms away; the
#             kernel here has no netem).
#   kahadb-sync - KahaDB with concurrentStoreAndDispatchQueues off: a message is stored
#             before it is dispatched even to a waiting consumer (on by default, which
#             favours KahaDB when consumers keep up).
# Each broker has a STOMP connector and JMX on loopback, the same heap and flags. The JDBC
# brokers use a PGPoolingDataSource with the driver jar linked into their lib/. Writes
# WORKDIR/targets.env (STOMP URLs, JMX URLs). Installs activemq, libpostgresql-jdbc-java
# and postgresql when missing. Must run as root (PostgreSQL runs as the postgres user).
# Usage: setup.sh WORKDIR [DELAY_MS=22.5] [CONCURRENT_STORE_AND_DISPATCH=true (kahadb's)]
set -euo pipefail
WORK=${1:?usage: setup.sh WORKDIR [DELAY_MS]}
DELAY_MS=${2:-22.5}
CSD=${3:-true}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/lib/servers.sh
. "$(dirname "$0")/../../scripts/lib/servers.sh"
# shellcheck source=scripts/lib/activemq.sh
. "$(dirname "$0")/../../scripts/lib/activemq.sh"
activemq_install
mkdir -p "$WORK"
: >"$WORK/targets.env"
: >"$WORK/pids"
# PostgreSQL: one cluster, a database for each JDBC broker.
activemq_postgres "$WORK" activemq_jdbc activemq_remote
PROXY_PORT=$(free_port)
python3 "$HERE/delay_proxy.py" "$PROXY_PORT" "$PGPORT" "$DELAY_MS" >"$WORK/proxy.log" 2>&1 &
echo $! >>"$WORK/pids"
wait_port "$PROXY_PORT"
{
    echo "PGPORT=$PGPORT"
    echo "PROXY_PORT=$PROXY_PORT"
} >>"$WORK/targets.env"

store_of() {
    case $1 in
    kahadb) echo "<kahaDB directory=\"\${activemq.base}/data/kahadb\" concurrentStoreAndDispatchQueues=\"$CSD\"/>" ;;
    kahadb-sync) echo "<kahaDB directory=\"\${activemq.base}/data/kahadb\" concurrentStoreAndDispatchQueues=\"false\"/>" ;;
    jdbc | remote) echo '<jdbcPersistenceAdapter dataSource="#postgres-ds" createTablesOnStartup="true"/>' ;;
    esac
}
for b in kahadb kahadb-sync jdbc remote; do
    D="$WORK/$b"
    STOMP=$(free_port)
    OPENWIRE=$(free_port)
    JMX=$(free_port)
    case $b in
    jdbc) DBPORT=$PGPORT DB=activemq_jdbc ;;
    remote) DBPORT=$PROXY_PORT DB=activemq_remote ;;
    *) DBPORT=$PGPORT DB=none ;;
    esac
    activemq_conf "$D/conf" "$b" "$(store_of $b)" "$STOMP" "$OPENWIRE" "$JMX" "$DBPORT" "$DB"
    (activemq_exec "$D" "$D/conf" 512m >"$D/out.log" 2>&1) &
    echo $! >>"$WORK/pids"
    V=${b^^}
    V=${V//-/_}
    {
        echo "URL_$V=stomp://127.0.0.1:$STOMP"
        echo "JMX_$V=service:jmx:rmi:///jndi/rmi://127.0.0.1:$JMX/jmxrmi"
        echo "OPENWIRE_$V=tcp://127.0.0.1:$OPENWIRE"
        echo "PID_$V=$!"
    } >>"$WORK/targets.env"
done
# shellcheck disable=SC1091
. "$WORK/targets.env"
for url in "$URL_KAHADB" "$URL_KAHADB_SYNC" "$URL_JDBC" "$URL_REMOTE"; do
    wait_port "${url##*:}" || { tail -30 "$WORK"/*/out.log; exit 1; }
done
echo "KahaDB concurrentStoreAndDispatchQueues=$CSD; remote database delay ${DELAY_MS} ms each way" >"$WORK/settings.txt"
cat "$WORK/targets.env"
