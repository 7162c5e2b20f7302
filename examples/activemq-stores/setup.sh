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
need=()
[ -f /usr/share/activemq/bin/activemq.jar ] || need+=(activemq)
[ -f /usr/share/java/postgresql.jar ] || need+=(libpostgresql-jdbc-java)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    (apt-get install -y -qq --no-install-recommends "${need[@]}" ||
        (apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}")) >/dev/null
    rm -f /usr/sbin/policy-rc.d
fi
PG=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
# shellcheck source=scripts/lib/servers.sh
. "$(dirname "$0")/../../scripts/lib/servers.sh"
mkdir -p "$WORK"
chmod 755 "$WORK"
: >"$WORK/targets.env"
: >"$WORK/pids"

# PostgreSQL: one cluster on a loopback TCP port (the JDBC driver speaks TCP), defaults
# for durability (fsync and synchronous_commit on).
mkdir -p "$WORK/pg"
chown postgres "$WORK/pg"
PGPORT=$(free_port)
su postgres -c "$PG/initdb -D $WORK/pg --auth=trust -U postgres" >"$WORK/initdb.log" 2>&1
cat >>"$WORK/pg/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PGPORT
unix_socket_directories = '$WORK/pg'
max_connections = 200
CONF
su postgres -c "$PG/pg_ctl -D $WORK/pg -l $WORK/pg/server.log -w start" >/dev/null
for db in activemq_jdbc activemq_remote; do
    su postgres -c "$PG/psql -h 127.0.0.1 -p $PGPORT -U postgres -qc 'CREATE DATABASE $db'"
done
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
    mkdir -p "$D/conf" "$D/data" "$D/tmp" "$D/lib"
    cp /etc/activemq/instances-available/main/log4j2.properties "$D/conf/"
    STOMP=$(free_port)
    OPENWIRE=$(free_port)
    JMX=$(free_port)
    case $b in
    jdbc) DBPORT=$PGPORT DB=activemq_jdbc ;;
    remote) DBPORT=$PROXY_PORT DB=activemq_remote ;;
    *) DBPORT=$PGPORT DB=none ;;
    esac
    ln -sf /usr/share/java/postgresql.jar "$D/lib/postgresql.jar"
    cat >"$D/conf/activemq.xml" <<XML
<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <bean class="org.springframework.beans.factory.config.PropertyPlaceholderConfigurer"/>
  <bean id="postgres-ds" class="org.postgresql.ds.PGPoolingDataSource">
    <property name="serverName" value="127.0.0.1"/>
    <property name="portNumber" value="$DBPORT"/>
    <property name="databaseName" value="$DB"/>
    <property name="user" value="postgres"/>
    <property name="dataSourceName" value="activemq-$b"/>
    <property name="maxConnections" value="60"/>
  </bean>
  <broker xmlns="http://activemq.apache.org/schema/core" useJmx="true" brokerName="$b"
          dataDirectory="\${activemq.base}/data">
    <managementContext>
      <managementContext createConnector="true" connectorHost="127.0.0.1" connectorPort="$JMX"/>
    </managementContext>
    <persistenceAdapter>$(store_of $b)</persistenceAdapter>
    <transportConnectors>
      <transportConnector name="openwire" uri="tcp://127.0.0.1:$OPENWIRE"/>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:$STOMP"/>
    </transportConnectors>
  </broker>
</beans>
XML
    (cd "$D" && exec java -Xms512m -Xmx512m -Djava.io.tmpdir="$D/tmp" -Dactivemq.home=/usr/share/activemq \
        -Dactivemq.base="$D" -Dactivemq.conf="$D/conf" -Dactivemq.data="$D/data" \
        -jar /usr/share/activemq/bin/activemq.jar start "xbean:file:$D/conf/activemq.xml" >"$D/out.log" 2>&1) &
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
